/**
 * Behind a reverse proxy every connection comes from the proxy. With --trust-proxy the login
 * backoff and the per-address limits count the address the proxy appended to X-Forwarded-For, so
 * one address's wrong guesses do not slow everyone's logins; without it the header is ignored,
 * so a client cannot pick its own address. The real daemon, over HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, testClock, type TestDaemon } from './helpers/daemon.js';

describe('the client address behind a reverse proxy (--trust-proxy)', () => {
  const clock = testClock(); // standing still: a block lasts until the test moves it
  let trusting: TestDaemon;
  let plain: TestDaemon;

  beforeAll(async () => {
    [trusting, plain] = await Promise.all([startTestDaemon({ clock, config: { trustProxy: true } }), startTestDaemon({ clock })]);
  });
  afterAll(async () => {
    await Promise.all([trusting?.stop(), plain?.stop()]);
  });

  const login = (d: TestDaemon, password: string, forwardedFor?: string) =>
    fetch(`${d.url}/svc/v1/auth/login`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...(forwardedFor ? { 'X-Forwarded-For': forwardedFor } : {}) },
      body: JSON.stringify({ username: 'admin', password }),
    });

  it("counts one address's wrong guesses against that address only, the last one the proxy appended", async () => {
    // what a client put first in the header is not its address: the proxy's own entry is
    for (let i = 0; i < 5; i++) expect((await login(trusting, 'wrong', `10.9.9.${i}, 10.0.0.1`)).status).toBe(401);
    const blocked = await login(trusting, trusting.adminPassword, '10.0.0.1');
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // another address behind the same proxy logs in
    expect((await login(trusting, trusting.adminPassword, '10.0.0.2')).status).toBe(200);
    // an entry that is no address is not taken: the proxy's connection counts, which guessed nothing
    expect((await login(trusting, trusting.adminPassword, 'not-an-address')).status).toBe(200);
  });

  it('without --trust-proxy the header is ignored: a client cannot choose its address', async () => {
    for (let i = 0; i < 5; i++) expect((await login(plain, 'wrong', `10.0.1.${i}`)).status).toBe(401);
    expect((await login(plain, plain.adminPassword, '10.0.2.1')).status).toBe(429);
    expect((await login(plain, plain.adminPassword)).status).toBe(429);
  });
});
