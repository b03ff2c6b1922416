import { createPublicKey, randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, importJWK, type JWK, type JWTPayload, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyRouteDef } from '../src/http/route.js';
import { startTestDaemon, testClock, type TestDaemon } from './helpers/daemon.js';
import { Api, type ApiResponse, createBody, userApi } from './helpers/http.js';
import { authorize, oidcConfig, registerClient } from './helpers/oauth.js';

/**
 * The Bearer attack matrix (docs/decisions.md, Errors and Tokens): every forged, stale or misdirected token is a
 * 401 invalid_token with the RFC 9728 WWW-Authenticate header, and the route handler never runs.
 * Validly signed forgeries use the daemon's own signing key, opened from the store, so each case
 * fails on the one check it targets and not on a broken signer (the control case proves that).
 */

const LIST = '/svc/v1/apps/mcps';
const MCP_URL = 'http://127.0.0.1:9311/mcp';
const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

describe('Bearer attack matrix (embedded issuer)', () => {
  const clock = testClock();
  let d: TestDaemon;
  let admin: Api;
  let alice: Api;
  let bob: Api;
  let aliceId: string;
  let bobId: string;
  let clientA: { clientId: string; secret?: string };
  let clientB: { clientId: string; secret?: string };
  let aliceInstance: string;
  let bobInstance: string;
  /** alice's grant to client A, with her instance */
  let grantA: { id: string; scope: string };
  let esKey: JWK;
  let rsKey: JWK;
  let signingKey: CryptoKey;
  /** calls that reached the list handler, counted by wrapping the mounted route definition */
  let handlerCalls = 0;

  const issuer = () => `${d.baseUrl}/oauth`;
  const nowS = () => Math.floor(clock() / 1000);

  /** create a request for `clientId` naming MCP_URL, and have `reviewer` approve it with `instanceId` */
  async function grant(reviewer: Api, clientId: string, instanceId: string, role: 'scope_user_user' | 'scope_user_power_user' = 'scope_user_user') {
    const created = await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ app_client_id: clientId, requested_role: role, requested: { version: '1', mcp_servers: [{ url: MCP_URL }] } }));
    expect(created.status).toBe(201);
    const res = await reviewer.put(`/svc/v1/access-requests/${created.body.id}/approve`, {
      approved_role: role,
      approved: { version: '1', mcp_servers: [{ url: MCP_URL, instance_ids: [instanceId] }] },
    });
    expect(res.status).toBe(200);
    return { id: created.body.id as string, scope: res.body.access_request_scope as string };
  }

  /** the claims of a token that passes every check: alice's grant to client A */
  function goodClaims(): JWTPayload {
    const iat = nowS();
    return { iss: issuer(), aud: d.baseUrl, sub: aliceId, client_id: clientA.clientId, scope: grantA.scope, iat, exp: iat + 600, jti: randomUUID() };
  }

  /** signs with the daemon's real ES256 access-token key */
  async function forge(claims: JWTPayload, header: Record<string, unknown> = {}) {
    return new SignJWT(claims).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: esKey.kid, ...header }).sign(signingKey);
  }

  const call = (token: string | null, path = LIST, headers: Record<string, string> = {}) =>
    new Api(d.url).get(path, { ...(token === null ? {} : { Authorization: `Bearer ${token}` }), ...headers });

  /** the 401 of decisions: Errors, and proof the handler was not reached and nothing leaked */
  async function expectRefused(request: () => Promise<ApiResponse>) {
    const before = handlerCalls;
    const res = await request();
    expect(res.status, res.text).toBe(401);
    expect(res.body).toMatchObject({ error: { type: 'authentication_error', code: 'invalid_token' } });
    expect(typeof res.body.error.message).toBe('string');
    expect(Object.keys(res.body)).toEqual(['error']);
    // error="invalid_token" only when a credential was sent (RFC 6750 §3.1)
    const challenge = res.headers.get('www-authenticate') ?? '';
    expect(challenge.replace('error="invalid_token", ', '')).toBe(`Bearer resource_metadata="${d.baseUrl}/.well-known/oauth-protected-resource", scope="scope_user_user"`);
    expect(res.text).not.toContain(aliceInstance);
    expect(res.text).not.toContain(bobInstance);
    expect(handlerCalls).toBe(before);
    return res;
  }

  async function expectAccepted(token: string, instanceId = aliceInstance) {
    const before = handlerCalls;
    const res = await call(token);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.map((m: { id: string }) => m.id)).toEqual([instanceId]);
    expect(handlerCalls).toBe(before + 1);
  }

  beforeAll(async () => {
    d = await startTestDaemon({ clock, config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    // Count the list handler's calls: the router calls the definition's handler at request time.
    const route = d.app.routes.find((r: AnyRouteDef) => r.operationId === 'listAppMcpInstances')!;
    const inner = route.handler;
    route.handler = (ctx, input) => {
      handlerCalls++;
      return inner(ctx, input);
    };

    admin = await new Api(d.url).login('admin', d.adminPassword);
    alice = await userApi(d.url, admin, 'alice', 'power_user');
    bob = await userApi(d.url, admin, 'bob', 'user');
    aliceId = (await alice.get('/svc/v1/auth/me')).body.user.id;
    bobId = (await bob.get('/svc/v1/auth/me')).body.user.id;
    clientA = await registerClient(admin, { name: 'App A' });
    clientB = await registerClient(admin, { name: 'App B' });
    aliceInstance = (await alice.post('/svc/v1/mcps', { name: 'alice-files', url: MCP_URL })).body.instance.id;
    bobInstance = (await bob.post('/svc/v1/mcps', { name: 'bob-files', url: MCP_URL })).body.instance.id;
    grantA = await grant(alice, clientA.clientId, aliceInstance);

    // The ID-token key is made when the authorization server is first built (here, by its JWKS).
    const published = (await (await fetch(`${d.url}/oauth/jwks`)).json()) as { keys: JWK[] };
    expect(published.keys.map((k) => k.alg).sort()).toEqual(['ES256', 'RS256']);
    const jwks = JSON.parse(d.deps.box.open('oauth_signing_keys', 'jwks', d.store.doc('oauth_keys')!)) as JWK[];
    esKey = jwks[0];
    rsKey = jwks.find((k) => k.alg === 'RS256')!;
    expect(esKey.alg).toBe('ES256');
    signingKey = (await importJWK(esKey, 'ES256')) as CryptoKey;
  });
  afterAll(() => d?.stop());

  it('control: a correctly forged token passes, so every refusal below is the check it targets', async () => {
    await expectAccepted(await forge(goodClaims()));
    // the auth scheme is case-insensitive (RFC 7235 §2.1)
    const res = await call(null, LIST, { Authorization: `bearer ${await forge(goodClaims())}` });
    expect(res.status).toBe(200);
  });

  it('control: a real token from the authorization code flow passes', async () => {
    const { tokens } = await authorize(await oidcConfig(d, clientA.clientId, clientA.secret), alice, grantA.scope);
    await expectAccepted(tokens!.access_token);
  });

  describe('refused before the handler', () => {
    it('no token: the challenge carries no error code (RFC 6750 §3.1)', async () => {
      const res = await expectRefused(() => call(null));
      expect(res.headers.get('www-authenticate')).not.toContain('error=');
      const sent = await expectRefused(() => call('garbage'));
      expect(sent.headers.get('www-authenticate')).toContain('error="invalid_token"');
    });

    it('another scheme, an empty Bearer, a token with spaces', async () => {
      await expectRefused(() => call(null, LIST, { Authorization: `Basic ${Buffer.from('admin:x').toString('base64')}` }));
      await expectRefused(() => call(null, LIST, { Authorization: 'Bearer ' }));
      await expectRefused(() => call(null, LIST, { Authorization: 'Bearer a b' }));
    });

    it('garbage', async () => {
      await expectRefused(() => call('garbage'));
      await expectRefused(() => call('a.b.c'));
      await expectRefused(() => call(`${b64({ alg: 'ES256' })}.${b64('x')}.AAAA`));
    });

    it('bad signature', async () => {
      const token = await forge(goodClaims());
      const [h, p, s] = token.split('.');
      const sig = Buffer.from(s, 'base64url');
      sig[10] ^= 0xff;
      await expectRefused(() => call(`${h}.${p}.${sig.toString('base64url')}`));
    });

    it('payload edited after signing (sub switched to another user)', async () => {
      const [h, , s] = (await forge(goodClaims())).split('.');
      await expectRefused(() => call(`${h}.${b64({ ...goodClaims(), sub: bobId })}.${s}`));
    });

    it('alg: none', async () => {
      const claims = goodClaims();
      await expectRefused(() => call(`${b64({ alg: 'none', typ: 'at+jwt' })}.${b64(claims)}.`));
      await expectRefused(() => call(`${b64({ alg: 'none', typ: 'at+jwt', kid: esKey.kid })}.${b64(claims)}.`));
    });

    it('HS256 signed with the public key as the HMAC secret (algorithm confusion)', async () => {
      const { d: _d, ...pub } = esKey;
      const pem = createPublicKey({ key: pub as never, format: 'jwk' }).export({ type: 'spki', format: 'pem' }) as string;
      for (const secret of [pem, JSON.stringify(pub)]) {
        const token = await new SignJWT(goodClaims()).setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid: esKey.kid }).sign(new TextEncoder().encode(secret));
        await expectRefused(() => call(token));
      }
    });

    it('wrong iss', async () => {
      await expectRefused(async () => call(await forge({ ...goodClaims(), iss: 'https://evil.example/oauth' })));
      await expectRefused(async () => call(await forge({ ...goodClaims(), iss: d.baseUrl })));
      await expectRefused(async () => call(await forge({ ...goodClaims(), iss: undefined })));
    });

    it('wrong aud', async () => {
      await expectRefused(async () => call(await forge({ ...goodClaims(), aud: 'https://other.example' })));
      await expectRefused(async () => call(await forge({ ...goodClaims(), aud: issuer() })));
      await expectRefused(async () => call(await forge({ ...goodClaims(), aud: clientA.clientId })));
    });

    it('expired', async () => {
      const iat = nowS() - 3600;
      await expectRefused(async () => call(await forge({ ...goodClaims(), iat, exp: iat + 600 })));
    });

    it('no exp at all', async () => {
      await expectRefused(async () => call(await forge({ ...goodClaims(), exp: undefined })));
    });

    it('not yet valid (nbf in the future)', async () => {
      await expectRefused(async () => call(await forge({ ...goodClaims(), nbf: nowS() + 300 })));
    });

    it('unknown kid (a stranger key, and the real key under a name the JWKS does not have)', async () => {
      const { privateKey } = await generateKeyPair('ES256', { extractable: true });
      const stranger = await new SignJWT(goodClaims()).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: randomUUID() }).sign(privateKey);
      await expectRefused(() => call(stranger));
      // the stranger's key under the real kid fails the signature
      const impostor = await new SignJWT(goodClaims()).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: esKey.kid }).sign(privateKey);
      await expectRefused(() => call(impostor));
      await expectRefused(async () => call(await forge(goodClaims(), { kid: 'no-such-kid' })));
      // a JWK embedded in the header is never trusted
      const jwk = await exportJWK(privateKey);
      const embedded = await new SignJWT(goodClaims()).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', jwk: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y } }).sign(privateKey);
      await expectRefused(() => call(embedded));
    });

    it('not an access token: typ JWT, no typ, and a real ID token', async () => {
      await expectRefused(async () => call(await forge(goodClaims(), { typ: 'JWT' })));
      await expectRefused(async () => call(await forge(goodClaims(), { typ: undefined })));
      // the RS256 ID-token key signs a token that looks like an access token except for typ
      const rs = await importJWK(rsKey, 'RS256');
      await expectRefused(async () => call(await new SignJWT(goodClaims()).setProtectedHeader({ alg: 'RS256', typ: 'JWT', kid: rsKey.kid }).sign(rs)));
      const { tokens } = await authorize(await oidcConfig(d, clientA.clientId, clientA.secret), alice, `openid ${grantA.scope}`);
      expect(tokens!.id_token).toBeTruthy();
      await expectRefused(() => call(tokens!.id_token!));
    });

    it('a sender-constrained token (cnf: DPoP or mTLS) sent as a plain Bearer', async () => {
      await expectRefused(() => call(null, LIST, {}).then(() => call(null)));
      for (const cnf of [{ jkt: 'x'.repeat(43) }, { 'x5t#S256': 'y'.repeat(43) }]) {
        const token = await forge({ ...goodClaims(), cnf });
        await expectRefused(() => call(token));
      }
    });

    it('two access-request scopes', async () => {
      const second = await grant(alice, clientA.clientId, aliceInstance);
      await expectRefused(async () => call(await forge({ ...goodClaims(), scope: `${grantA.scope} ${second.scope}` })));
      await expectRefused(async () => call(await forge({ ...goodClaims(), scope: `${grantA.scope} ${grantA.scope}` })));
    });

    it('no access-request scope, or one naming no grant', async () => {
      await expectRefused(async () => call(await forge({ ...goodClaims(), scope: 'openid scope_user_power_user' })));
      await expectRefused(async () => call(await forge({ ...goodClaims(), scope: undefined })));
      await expectRefused(async () => call(await forge({ ...goodClaims(), scope: `scope_access_request:${randomUUID()}` })));
    });

    it("a token for another user's grant", async () => {
      const bobsGrant = await grant(bob, clientA.clientId, bobInstance);
      // alice's token naming bob's grant
      await expectRefused(async () => call(await forge({ ...goodClaims(), scope: bobsGrant.scope })));
      // bob's own token for it works (so the refusal above is the user check)
      await expectAccepted(await forge({ ...goodClaims(), sub: bobId, scope: bobsGrant.scope }), bobInstance);
    });

    it("another client's token (client_id or azp differs from the grant's app_client_id)", async () => {
      await expectRefused(async () => call(await forge({ ...goodClaims(), client_id: clientB.clientId })));
      await expectRefused(async () => call(await forge({ ...goodClaims(), client_id: undefined, azp: clientB.clientId })));
      await expectRefused(async () => call(await forge({ ...goodClaims(), client_id: undefined })));
      // a real token of client B, approved by alice for client B, does not open client A's grant
      const grantB = await grant(alice, clientB.clientId, aliceInstance);
      const { tokens } = await authorize(await oidcConfig(d, clientB.clientId, clientB.secret), alice, grantB.scope);
      await expectAccepted(tokens!.access_token);
      const [, p] = tokens!.access_token.split('.');
      const claims = JSON.parse(Buffer.from(p, 'base64url').toString());
      await expectRefused(async () => call(await forge({ ...claims, scope: grantA.scope, jti: randomUUID() })));
    });

    it('token in the query string with no header', async () => {
      const token = await forge(goodClaims());
      await expectAccepted(token);
      const res = await expectRefused(() => call(null, `${LIST}?access_token=${token}`));
      expect(res.body.error.message).toMatch(/header/i);
    });

    it('token in a cookie with no header', async () => {
      const token = await forge(goodClaims());
      await expectRefused(() => call(null, LIST, { Cookie: `access_token=${token}` }));
    });

    it('after revoke: a real token stops on its very next call', async () => {
      const g = await grant(alice, clientA.clientId, aliceInstance);
      const { tokens } = await authorize(await oidcConfig(d, clientA.clientId, clientA.secret), alice, g.scope);
      await expectAccepted(tokens!.access_token);
      expect((await alice.post(`/svc/v1/access-requests/${g.id}/revoke`)).status).toBe(200);
      await expectRefused(() => call(tokens!.access_token));
      await expectRefused(() => call(tokens!.access_token));
    });

    it('after deny', async () => {
      const created = await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ app_client_id: clientA.clientId, requested_role: 'scope_user_user' }));
      expect((await alice.post(`/svc/v1/access-requests/${created.body.id}/deny`)).status).toBe(200);
      await expectRefused(async () => call(await forge({ ...goodClaims(), scope: `scope_access_request:${created.body.id}` })));
    });

    it('for a draft, and for a draft that expired', async () => {
      const created = await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ app_client_id: clientA.clientId, requested_role: 'scope_user_user' }));
      const scope = `scope_access_request:${created.body.id}`;
      await expectRefused(async () => call(await forge({ ...goodClaims(), scope })));
      const start = clock();
      try {
        clock.advance(11 * 60_000);
        // still stored as draft until a path reads it: refused either way
        await expectRefused(async () => call(await forge({ ...goodClaims(), scope })));
        const poll = await new Api(d.url).get(`/svc/v1/apps/access-requests/${created.body.id}?app_client_id=${clientA.clientId}`);
        expect(poll.body.status).toBe('expired');
        await expectRefused(async () => call(await forge({ ...goodClaims(), scope })));
      } finally {
        clock.set(start);
      }
    });

    it('for a grant that is gone with its client (client removed)', async () => {
      const gone = await registerClient(admin, { name: 'Gone' });
      const g = await grant(alice, gone.clientId, aliceInstance);
      const token = await forge({ ...goodClaims(), client_id: gone.clientId, scope: g.scope });
      await expectAccepted(token);
      expect((await admin.delete(`/admin/v1/clients/${gone.clientId}`)).status).toBe(204);
      await expectRefused(() => call(token));
    });

    it('the same refusals on every Bearer route, before its body is validated', async () => {
      // RFC 6750 §3.1: no error code when no credential was sent; an MCP proxy URL names its own metadata
      const header = (path: string, sent: boolean) =>
        `Bearer ${sent ? 'error="invalid_token", ' : ''}resource_metadata="${d.baseUrl}/.well-known/oauth-protected-resource${path.endsWith('/mcp') ? path : ''}", scope="scope_user_user"`;
      const bearerRoutes = d.app.routes.filter((r: AnyRouteDef) => r.auth === 'bearer');
      expect(bearerRoutes.map((r: AnyRouteDef) => r.path)).toEqual(expect.arrayContaining([LIST, `${LIST}/{id}`, '/v1/models', '/v1/chat/completions', '/v1/embeddings']));
      const expired = await forge({ ...goodClaims(), iat: nowS() - 700, exp: nowS() - 100 });
      const otherAud = await forge({ ...goodClaims(), aud: 'https://other.example' });
      for (const route of bearerRoutes) {
        const path = route.path.replace('{id}', aliceInstance).replace(/\{[^}]+\}/g, 'x');
        // Anthropic's Messages paths say it in Anthropic's shape, which has no code
        const refusal = path.startsWith('/v1/messages') ? { type: 'authentication_error' } : { type: 'authentication_error', code: 'invalid_token' };
        for (const token of [null, 'garbage', expired, otherAud]) {
          // the same credential in x-api-key (as Anthropic's SDKs send it) is refused the same way
          for (const headers of token === null ? [{}] : ([{ Authorization: `Bearer ${token}` }, { 'x-api-key': token }] as Record<string, string>[])) {
            // an empty object is no valid body for any of them: the token is checked first
            const res = await new Api(d.url).request(route.method.toUpperCase(), path, route.method === 'get' ? undefined : {}, headers);
            expect(res.status, `${route.method} ${path} ${res.text}`).toBe(401);
            expect(res.body.error).toMatchObject(refusal);
            expect(res.headers.get('www-authenticate')).toBe(header(path, token !== null));
          }
        }
      }
    });
  });

  it('per-user isolation: revoking one user grant leaves the other user of the same app working', async () => {
    const config = await oidcConfig(d, clientA.clientId, clientA.secret);
    const aliceGrant = await grant(alice, clientA.clientId, aliceInstance);
    const bobGrant = await grant(bob, clientA.clientId, bobInstance);
    const aliceToken = (await authorize(config, alice, aliceGrant.scope)).tokens!.access_token;
    const bobToken = (await authorize(config, bob, bobGrant.scope)).tokens!.access_token;
    expect(JSON.parse(Buffer.from(aliceToken.split('.')[1], 'base64url').toString()).sub).toBe(aliceId);
    expect(JSON.parse(Buffer.from(bobToken.split('.')[1], 'base64url').toString()).sub).toBe(bobId);
    await expectAccepted(aliceToken, aliceInstance);
    await expectAccepted(bobToken, bobInstance);

    expect((await alice.post(`/svc/v1/access-requests/${aliceGrant.id}/revoke`)).status).toBe(200);
    await expectRefused(() => call(aliceToken));
    await expectAccepted(bobToken, bobInstance);
    // and bob cannot reach alice's instance with his token
    const other = await call(bobToken, `${LIST}/${aliceInstance}`);
    expect(other.status).toBe(404);
    await expectAccepted(bobToken, bobInstance);
  });
});
