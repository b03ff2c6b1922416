/** The sign-in's tokens as a unit: a refused refresh ends the sign-in, says so on the record, and tells the person. */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../log.js';
import { SecretBox } from '../../store/crypto.js';
import { SEAL_KINDS } from '../../store/seal-kinds.js';
import { inMemoryRepositories } from '../../store/store-repositories.js';
import { UpstreamOAuth } from './service.js';

const at = '2026-11-26T12:00:00.000Z';
const now = Date.parse(at);

describe('UpstreamOAuth on the in-memory repositories', () => {
  // a token endpoint that refuses every refresh, as after the person revoked svc at the provider
  const refusing = http.createServer((req, res) => {
    req.resume();
    res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"invalid_grant"}');
  });
  let tokenEndpoint: string;
  beforeAll(async () => {
    await new Promise<void>((r) => refusing.listen(0, '127.0.0.1', r));
    tokenEndpoint = `http://127.0.0.1:${(refusing.address() as AddressInfo).port}/token`;
  });
  afterAll(() => new Promise<void>((r) => refusing.close(() => r())));

  it('a refused refresh forgets the tokens, marks the instance as needing a sign-in and sends one notice naming its sign-in page', async () => {
    const repos = await inMemoryRepositories();
    const box = new SecretBox(randomBytes(32));
    const notices: string[][] = [];
    const oauth = new UpstreamOAuth({
      repos,
      box,
      clock: () => now,
      logger: createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() })),
      baseUrl: () => 'http://127.0.0.1:7777',
      notify: (...args) => void notices.push(args),
    });
    await repos.mcpInstances.put({
      id: 'm1', owner_id: 'u1', name: 'hosted', url: 'http://127.0.0.1:9/mcp', enabled: true, headers: [], allow_tools: null, created_at: at, updated_at: at,
      oauth: {
        status: 'connected', generation: 3, expires_at: now - 1, token_endpoint: tokenEndpoint, issuer: 'http://127.0.0.1:9',
        client: { kind: 'dynamic', client_id: 'c1', issuer: 'http://127.0.0.1:9' },
        tokens: box.seal(SEAL_KINDS.mcpOAuthTokens, 'm1', JSON.stringify({ access_token: 'at-old', refresh_token: 'rt-old' })),
      },
    });
    const instance = (await repos.mcpInstances.get('m1'))!;
    // twenty calls that meet the stale token share one refused refresh, and all get the same error
    const calls = await Promise.allSettled(Array.from({ length: 20 }, () => oauth.authorization(instance)));
    for (const c of calls) expect(c).toMatchObject({ status: 'rejected', reason: { code: 'mcp_sign_in_required' } });
    const after = (await repos.mcpInstances.get('m1'))!.oauth!;
    expect(after).toMatchObject({ status: 'needs_sign_in', reason: 'refresh_refused' });
    expect(after.tokens).toBeUndefined();
    expect(notices).toEqual([['svc: hosted needs you to sign in again', 'Apps cannot use it until you do. Sign in at', 'http://127.0.0.1:7777/ui/mcps/m1/sign-in']]);
  });
});
