/**
 * The refresh token svc asks for and what happens when it stops working: where the authorization
 * server lists offline_access (and, like an OpenID Connect provider, issues a refresh token only
 * with it) svc asks for it, so a token the server later refuses is refreshed; when the refresh is
 * refused, the person gets a desktop notice that the instance needs a sign-in (here through a
 * recording notify-send first on the PATH).
 */
import { chmod, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from './helpers/consent.js';
import { startTestDaemon, type TestDaemon, tempDir, testClock } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { type OAuthUpstream, signInOnUpstreamPage, startOAuthMcpUpstream } from './helpers/oauth-mcp-upstream.js';
import { eventually } from './helpers/wait.js';

describe('the refresh token of a hosted MCP server\'s sign-in', { timeout: 60_000 }, () => {
  const clock = testClock();
  const pathBefore = process.env.PATH;
  let d: TestDaemon;
  let admin: Api;
  let browser: Browser;
  let upstream: OAuthUpstream;
  let notified: string;

  beforeAll(async () => {
    const bin = await tempDir('svc-notify-');
    notified = path.join(bin, 'notified.txt');
    await writeFile(notified, '');
    await writeFile(path.join(bin, 'notify-send'), `#!/bin/sh\nprintf '%s|' "$@" | tr '\\n' ' ' >> '${notified}'\nprintf '\\n' >> '${notified}'\n`);
    await chmod(path.join(bin, 'notify-send'), 0o755);
    process.env.PATH = `${bin}${path.delimiter}${pathBefore}`;
    d = await startTestDaemon({ clock, config: { rateLimitClient: 0, rateLimitAddress: 0, notify: true } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    upstream = await startOAuthMcpUpstream({ registration: 'dynamic', refreshOnlyOffline: true });
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    // the test files after this one in the same worker get the PATH they had
    process.env.PATH = pathBefore;
    await browser?.close();
    await upstream?.close();
    await d?.stop();
  });

  /** An instance signed in through the upstream URL a CLI-started sign-in answers, and an API key granting it. */
  async function signedIn(name: string, oauth?: { scope: string }) {
    const added = await admin.post('/svc/v1/mcps', { name, url: upstream.mcpUrl, ...(oauth ? { oauth } : {}) });
    expect(added.status, added.text).toBe(201);
    const id = added.body.instance.id as string;
    const started = await admin.post(`/svc/v1/mcps/${id}/oauth/login`);
    expect(started.status, started.text).toBe(200);
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(started.body.authorization_url);
      await signInOnUpstreamPage(page);
      await page.locator('#state').waitFor({ timeout: 15_000 });
    } finally {
      await context.close();
    }
    expect((await admin.post(`/svc/v1/mcps/${id}/oauth/login/status`, { login: started.body.login })).body.status).toBe('connected');
    const key = await admin.post('/svc/v1/keys', { name: `${name} key`, mcp_servers: [{ url: upstream.mcpUrl, instance_ids: [id] }] });
    expect(key.status, key.text).toBe(201);
    const execute = () => new Api(d.url).post(`/svc/v1/apps/mcps/${id}/tools/echo/execute`, { params: { message: 'hi' } }, { Authorization: `Bearer ${key.body.key}` });
    return { id, execute };
  }

  it('asks for offline_access where the authorization server lists it, so a refused token is refreshed', async () => {
    const issuedBefore = upstream.refreshTokens.length;
    const { execute } = await signedIn('offline');
    expect(upstream.authorizeRequests.at(-1)!.get('scope')?.split(' ')).toContain('offline_access');
    expect(upstream.refreshTokens.length - issuedBefore).toBe(1);
    const before = upstream.refreshes();
    upstream.rejectIssuedTokens();
    const r = await execute();
    expect(r.status, r.text).toBe(200);
    expect(upstream.refreshes() - before).toBe(1);
  });

  it('with the owner\'s own --oauth-scope (no offline_access) this server issues no refresh token: a refused token needs a sign-in', async () => {
    const issuedBefore = upstream.refreshTokens.length;
    const { id, execute } = await signedIn('scoped', { scope: 'mcp:tools' });
    expect(upstream.refreshTokens.length - issuedBefore).toBe(0);
    upstream.rejectIssuedTokens();
    expect((await execute()).body.error?.code).toBe('mcp_sign_in_required');
    expect((await admin.get(`/svc/v1/mcps/${id}`)).body.instance.auth).toMatchObject({ status: 'needs_sign_in', reason: 'token_refused' });
  });

  it('a refused refresh tells the person on the desktop that the instance needs a sign-in, with the link', async () => {
    const { id, execute } = await signedIn('notice');
    upstream.refuseRefresh = true;
    clock.advance(61_000);
    try {
      const r = await execute();
      expect(r.body.error?.code, r.text).toBe('mcp_sign_in_required');
      const line = await eventually(async () => (await readFile(notified, 'utf8')).split('\n').find((l) => l.includes('notice needs you to sign in again')), 'a desktop notice of the sign-in needed');
      expect(line).toContain(`${d.baseUrl}/ui/mcps/${id}/sign-in`);
    } finally {
      upstream.refuseRefresh = false;
    }
  });
});
