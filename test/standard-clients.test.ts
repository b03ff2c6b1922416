import * as oidc from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storedOnDisk } from './helpers/store.js';
import { startTestDaemon, tempDir, testClock, type TestDaemon } from './helpers/daemon.js';
import { rm } from 'node:fs/promises';
import { Api, userApi } from './helpers/http.js';
import { approvedScope, authorize, oidcConfig, REDIRECT_URI, registerClient } from './helpers/oauth.js';
import { BAD_REDIRECTS, GOOD_REDIRECTS } from './helpers/redirects.js';

/**
 * Standard OAuth clients (decisions: Standard clients) (MCP hosts, any OAuth app) get in through consent at the
 * authorization endpoint, with no svc-specific code: openid-client plays the client here, the
 * person decides through the same session API the review page uses. The MCP SDK client and a real
 * browser drive the same flow in mcp-oauth.test.ts.
 */
describe('standard clients at the authorization endpoint', () => {
  let d: TestDaemon;
  let admin: Api;
  let alice: Api;
  let instanceId: string;
  const MCP_URL = 'http://127.0.0.1:9301/mcp';

  beforeAll(async () => {
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, rateLimitRegistration: 0 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    alice = await userApi(d.url, admin, 'alice', 'power_user');
    instanceId = (await alice.post('/svc/v1/mcps', { name: 'files', url: MCP_URL })).body.instance.id;
  });
  afterAll(() => d.stop());

  const proxyUrl = (id = instanceId) => `${d.baseUrl}/svc/v1/apps/mcps/${id}/mcp`;
  const approve = (role = 'scope_user_user', instanceIds = [instanceId]) => async (id: string) => {
    const review = await alice.get(`/svc/v1/access-requests/${id}/review`);
    const res = await alice.put(`/svc/v1/access-requests/${id}/approve`, {
      approved_role: role,
      approved: { version: '1', mcp_servers: review.body.mcp_servers.map((s: { url: string }) => ({ url: s.url, instance_ids: instanceIds })) },
    });
    expect(res.status, res.text).toBe(200);
  };
  const publicClient = async () => (await registerClient(admin, { name: 'Host', public: true })).clientId;

  it('publishes RFC 8414 metadata at the path-inserted location, with registration and metadata documents', async () => {
    const res = await new Api(d.url).get('/.well-known/oauth-authorization-server/oauth');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      issuer: `${d.baseUrl}/oauth`,
      registration_endpoint: `${d.baseUrl}/oauth/reg`,
      client_id_metadata_document_supported: true,
      code_challenge_methods_supported: ['S256'],
    });
    // DPoP is not enforced by the resource side, so it is not offered at all
    expect(res.body.dpop_signing_alg_values_supported).toBeUndefined();
  });

  it('advertises only the client authentication it accepts: none (public clients) and client_secret_basic (admin-added confidential clients), which still works', async () => {
    const meta = (await new Api(d.url).get('/.well-known/oauth-authorization-server/oauth')).body;
    expect(meta.token_endpoint_auth_methods_supported).toEqual(['none', 'client_secret_basic']);
    for (const key of ['revocation_endpoint_auth_methods_supported', 'introspection_endpoint_auth_methods_supported']) {
      if (key in meta) expect(meta[key], key).toEqual(['none', 'client_secret_basic']);
    }
    const { clientId, secret } = await registerClient(admin, { name: 'Confidential' });
    const { scope } = await approvedScope(d, alice, clientId);
    const result = await authorize(await oidcConfig(d, clientId, secret), alice, scope);
    expect(result.error, result.description ?? '').toBeUndefined();
    expect(result.tokens!.access_token).toBeTruthy();
  });

  it('points a 401 from an MCP proxy URL at that URL’s own RFC 9728 document, served with CORS and real scopes', async () => {
    const res = await new Api(d.url).post(`/svc/v1/apps/mcps/${instanceId}/mcp`, {});
    expect(res.status).toBe(401);
    const challenge = res.headers.get('www-authenticate')!;
    const metadataUrl = /resource_metadata="([^"]+)"/.exec(challenge)![1];
    expect(metadataUrl).toBe(`${d.baseUrl}/.well-known/oauth-protected-resource/svc/v1/apps/mcps/${instanceId}/mcp`);
    expect(challenge).toContain('scope="scope_user_user"');
    const prm = await fetch(metadataUrl, { headers: { Origin: 'http://localhost:6274' } });
    expect(prm.headers.get('access-control-allow-origin')).toBe('*');
    // a token bound to the MCP URL is used only there, where User serves every call
    expect(await prm.json()).toMatchObject({
      resource: proxyUrl(),
      authorization_servers: [`${d.baseUrl}/oauth`],
      scopes_supported: ['scope_user_user'],
    });
    const root = await new Api(d.url).get('/.well-known/oauth-protected-resource');
    expect(root.body.scopes_supported).toEqual(['scope_user_user', 'scope_user_power_user']);
  });

  it('a pre-registered public client asking no scope: review, approve, code, a token bound to the MCP URL', async () => {
    const clientId = await publicClient();
    const config = await oidcConfig(d, clientId);
    let requestId = '';
    const result = await authorize(config, alice, '', { resource: proxyUrl() }, undefined, async (id) => {
      requestId = id;
      const review = await alice.get(`/svc/v1/access-requests/${id}/review`);
      expect(review.body).toMatchObject({
        app_client_id: clientId,
        requested_role: 'scope_user_user',
        client_kind: 'registered',
        redirect_origin: new URL(REDIRECT_URI).origin,
        mcp_servers: [{ url: MCP_URL, instances: [{ id: instanceId, selected: true }] }],
      });
      await approve()(id);
    });
    expect(result.error, result.description ?? '').toBeUndefined();
    const token = result.tokens!.access_token;
    const claims = JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString());
    expect(claims.aud).toBe(proxyUrl());
    expect(claims.scope.split(' ')).toContain(`scope_access_request:${requestId}`);
    // it is an access request like any other: listed, decided by alice
    const listed = await alice.get('/svc/v1/access-requests?status=approved');
    expect(listed.body.data.map((r: { id: string }) => r.id)).toContain(requestId);
    // bound to that resource: refused elsewhere
    const elsewhere = await new Api(d.url).get('/v1/models', { Authorization: `Bearer ${token}` });
    expect(elsewhere.status).toBe(401);
    expect(elsewhere.body.error.message).toMatch(/another resource/);
    const there = await new Api(d.url).get('/svc/v1/apps/mcps', { Authorization: `Bearer ${token}` });
    expect(there.status).toBe(401);
  });

  it('a resource with a trailing slash is the base resource; power user is asked by scope', async () => {
    const clientId = await publicClient();
    let requestId = '';
    const result = await authorize(await oidcConfig(d, clientId), alice, 'scope_user_power_user', { resource: `${d.baseUrl}/` }, undefined, async (id) => {
      requestId = id;
      const review = await alice.get(`/svc/v1/access-requests/${id}/review`);
      expect(review.body).toMatchObject({ requested_role: 'scope_user_power_user', mcp_servers: [] });
      await approve('scope_user_power_user', [])(id);
    });
    expect(result.error, result.description ?? '').toBeUndefined();
    const token = result.tokens!.access_token;
    expect(JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).aud).toBe(d.baseUrl);
    const models = await new Api(d.url).get('/v1/models', { Authorization: `Bearer ${token}` });
    expect(models.status, models.text).toBe(200);
    const poll = await new Api(d.url).get(`/svc/v1/apps/access-requests/${requestId}?app_client_id=${encodeURIComponent(clientId)}`);
    expect(poll.body).toMatchObject({ status: 'approved', approved_role: 'scope_user_power_user' });
  });

  it('power user asked, only User approved: the token names User, not the role the app asked for, and a refresh keeps it so', async () => {
    const clientId = await publicClient();
    const result = await authorize(await oidcConfig(d, clientId), alice, 'scope_user_power_user offline_access', { resource: `${d.baseUrl}/` }, undefined, async (id) => {
      await approve('scope_user_user', [])(id);
    });
    expect(result.error, result.description ?? '').toBeUndefined();
    const scopesOf = (token: string) => String(JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).scope).split(' ');
    const token = result.tokens!.access_token;
    expect(scopesOf(token)).not.toContain('scope_user_power_user');
    expect(scopesOf(token)).toContain('scope_user_user');
    // and the token endpoint's answer says what the token says
    expect(String(result.tokens!.scope).split(' ').sort()).toEqual(scopesOf(token).sort());
    // what the grant allows: User's calls, not a power user's
    expect((await new Api(d.url).get('/v1/models', { Authorization: `Bearer ${token}` })).status).toBe(200);
    expect((await new Api(d.url).get('/svc/v1/models', { Authorization: `Bearer ${token}` })).status).toBe(403);
    expect(result.tokens!.refresh_token).toBeTruthy();
    const refreshed = await oidc.refreshTokenGrant(await oidcConfig(d, clientId), result.tokens!.refresh_token!, { resource: `${d.baseUrl}/` });
    expect(scopesOf(refreshed.access_token)).not.toContain('scope_user_power_user');
    expect(scopesOf(refreshed.access_token)).toContain('scope_user_user');
    expect(String(refreshed.scope).split(' ')).not.toContain('scope_user_power_user');
  });

  it('deny gives the client access_denied', async () => {
    const clientId = await publicClient();
    const result = await authorize(await oidcConfig(d, clientId), alice, 'scope_user_user', { resource: proxyUrl() }, undefined, async (id) => {
      expect((await alice.post(`/svc/v1/access-requests/${id}/deny`)).status).toBe(200);
    });
    expect(result.error).toBe('access_denied');
  });

  it('a resource of another origin, an unknown path or an unknown instance is invalid_target, and no request is made', async () => {
    const clientId = await publicClient();
    const before = (await alice.get('/svc/v1/access-requests')).body.data.length;
    for (const resource of ['https://other.example/mcp', `${d.baseUrl}/svc/v1/health`, `${d.baseUrl}/svc/v1/apps/mcps/00000000-0000-4000-8000-000000000000/mcp`]) {
      const result = await authorize(await oidcConfig(d, clientId), alice, 'scope_user_user', { resource });
      expect(result.error, resource).toBe('invalid_target');
    }
    expect((await alice.get('/svc/v1/access-requests')).body.data.length).toBe(before);
  });

  it('prompt=consent asks once, not for ever', async () => {
    const clientId = await publicClient();
    const result = await authorize(await oidcConfig(d, clientId), alice, 'scope_user_user', { prompt: 'consent' }, undefined, approve('scope_user_user', []));
    expect(result.error, result.description ?? '').toBeUndefined();
    expect(result.tokens!.access_token).toBeTruthy();
  });

  it('refresh after revoke is refused and ends the token family, even with another approved grant of the same user and client', async () => {
    const clientId = await publicClient();
    const config = await oidcConfig(d, clientId);
    const first = await authorize(config, alice, 'scope_user_user offline_access', {}, undefined, approve('scope_user_user', []));
    // another resource (a sign-in again for the same one would replace the first grant)
    const second = await authorize(config, alice, 'scope_user_user offline_access', { resource: `${d.baseUrl}/v1` }, undefined, approve('scope_user_user', []));
    const firstRefresh = first.tokens!.refresh_token!;
    expect(firstRefresh).toBeTruthy();
    const scopeOf = (t: string) => JSON.parse(Buffer.from(t.split('.')[1], 'base64url').toString()).scope as string;
    const firstId = scopeOf(first.tokens!.access_token).split(' ').find((s) => s.startsWith('scope_access_request:'))!.split(':')[1];
    // refresh works while approved
    const refreshed = await oidc.refreshTokenGrant(config, firstRefresh);
    expect(scopeOf(refreshed.access_token)).toContain(firstId);
    expect((await alice.post(`/svc/v1/access-requests/${firstId}/revoke`)).status).toBe(200);
    await expect(oidc.refreshTokenGrant(config, refreshed.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
    // the family is gone: the same refresh token stays refused
    await expect(oidc.refreshTokenGrant(config, refreshed.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
    // the other grant of the same client and user is untouched
    const other = await oidc.refreshTokenGrant(config, second.tokens!.refresh_token!);
    expect(scopeOf(other.access_token)).not.toContain(firstId);
    expect((await new Api(d.url).get('/v1/models', { Authorization: `Bearer ${other.access_token}` })).status).toBe(200);
  });

  describe('dynamic client registration (RFC 7591)', () => {
    const register = (body: Record<string, unknown>) => new Api(d.url).post('/oauth/reg', body);

    it('answers CORS, so a browser-based host can register from its own origin', async () => {
      const preflight = await fetch(`${d.url}/oauth/reg`, {
        method: 'OPTIONS',
        headers: { Origin: 'http://localhost:6274', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'content-type' },
      });
      expect(preflight.status).toBe(204);
      expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
      expect(preflight.headers.get('access-control-allow-headers')).toMatch(/content-type/i);
      const res = await fetch(`${d.url}/oauth/reg`, {
        method: 'POST',
        headers: { Origin: 'http://localhost:6274', 'Content-Type': 'application/json' },
        body: JSON.stringify({ redirect_uris: ['http://localhost:6274/oauth/callback'], token_endpoint_auth_method: 'none' }),
      });
      expect(res.status).toBe(201);
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
    });

    it('registers a public client with a loopback redirect, which then signs in through consent', async () => {
      const res = await register({ client_name: 'Claude <Code>', redirect_uris: [REDIRECT_URI], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'] });
      expect(res.status, res.text).toBe(201);
      const clientId = res.body.client_id as string;
      expect(clientId).toMatch(/^svc-dyn-/);
      expect(res.body.client_secret).toBeUndefined();
      const listed = await admin.get('/admin/v1/clients');
      expect(listed.body.data.find((c: { client_id: string }) => c.client_id === clientId)).toMatchObject({ kind: 'dynamic', public: true });
      const result = await authorize(await oidcConfig(d, clientId), alice, 'scope_user_user', { resource: proxyUrl() }, undefined, async (id) => {
        const review = await alice.get(`/svc/v1/access-requests/${id}/review`);
        expect(review.body).toMatchObject({ client_kind: 'dynamic', app_name: 'Claude <Code>' });
        await approve()(id);
      });
      expect(result.error, result.description ?? '').toBeUndefined();
    });

    it('is rate-limited per address (429 with Retry-After), and storing nothing beyond the limit', async () => {
      const limited = await startTestDaemon({ config: { rateLimitRegistration: 2 } });
      try {
        const reg = () => fetch(`${limited.url}/oauth/reg`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ redirect_uris: [REDIRECT_URI], token_endpoint_auth_method: 'none' }) });
        expect((await reg()).status).toBe(201);
        expect((await reg()).status).toBe(201);
        const third = await reg();
        expect(third.status).toBe(429);
        expect(third.headers.get('retry-after')).toBe('60');
        expect((await third.json()).error).toBe('rate_limited');
        expect(limited.store.count('oauth_clients')).toBe(2);
      } finally {
        await limited.stop();
      }
    });

    it('holds at most --dynamic-client-max self-registered clients (429 too_many_clients beyond); 0 turns registration off', async () => {
      const capped = await startTestDaemon({ config: { dynamicClientMax: 1 } });
      const off = await startTestDaemon({ config: { dynamicClientMax: 0 } });
      try {
        const reg = (url: string) => fetch(`${url}/oauth/reg`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ redirect_uris: [REDIRECT_URI], token_endpoint_auth_method: 'none' }) });
        expect((await reg(capped.url)).status).toBe(201);
        const over = await reg(capped.url);
        expect(over.status).toBe(429);
        expect((await over.json()).error).toBe('too_many_clients');
        expect(capped.store.count('oauth_clients')).toBe(1);
        expect((await reg(off.url)).status).not.toBe(201);
        const meta = await (await fetch(`${off.url}/.well-known/oauth-authorization-server/oauth`)).json();
        expect(meta.registration_endpoint).toBeUndefined();
      } finally {
        await capped.stop();
        await off.stop();
      }
    });

    it('refuses confidential clients and every redirect outside the allow-list (loopback http, https, reverse-domain private-use schemes), and stores nothing', async () => {
      const before = (await admin.get('/admin/v1/clients')).body.data.length;
      const cases: [Record<string, unknown>, string][] = [
        [{ redirect_uris: [REDIRECT_URI], token_endpoint_auth_method: 'client_secret_basic' }, 'invalid_client_metadata'],
        [{ redirect_uris: [REDIRECT_URI], token_endpoint_auth_method: 'client_secret_post' }, 'invalid_client_metadata'],
        [{ redirect_uris: [REDIRECT_URI], token_endpoint_auth_method: 'none', svc_policy: 'off' }, 'invalid_client_metadata'],
        ...BAD_REDIRECTS.map((uri): [Record<string, unknown>, string] => [{ redirect_uris: [uri], token_endpoint_auth_method: 'none', application_type: 'native' }, 'invalid_redirect_uri']),
      ];
      for (const [body, error] of cases) {
        const res = await register(body);
        expect(res.status, JSON.stringify(body)).toBe(400);
        expect(res.body.error, JSON.stringify(body)).toBe(error);
      }
      expect((await admin.get('/admin/v1/clients')).body.data.length).toBe(before);
      for (const uri of GOOD_REDIRECTS) {
        const res = await register({ redirect_uris: [uri], token_endpoint_auth_method: 'none', application_type: /^https?:/.test(uri) ? 'web' : 'native' });
        expect(res.status, `${uri}: ${res.text}`).toBe(201);
      }
      expect((await admin.get('/admin/v1/clients')).body.data.length).toBe(before + GOOD_REDIRECTS.length);
    });

    it('a registration that names no token_endpoint_auth_method (the Python MCP SDK) is a public client: "none" in the answer, no secret anywhere', async () => {
      const res = await register({ client_name: 'python host', redirect_uris: [REDIRECT_URI], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'] });
      expect(res.status, res.text).toBe(201);
      expect(res.body.token_endpoint_auth_method).toBe('none');
      expect(res.body.client_secret).toBeUndefined();
      expect(res.body.client_secret_expires_at).toBeUndefined();
      const clientId = res.body.client_id as string;
      const stored = d.store.all('oauth_clients').find((c: { client_id: string }) => c.client_id === clientId);
      expect(JSON.stringify(stored)).not.toMatch(/client_secret"\s*:\s*"/);
      // and it signs in like any public client
      const result = await authorize(await oidcConfig(d, clientId), alice, 'scope_user_user', {}, undefined, approve('scope_user_user', []));
      expect(result.error, result.description ?? '').toBeUndefined();
      expect(result.tokens!.access_token).toBeTruthy();
    });

    it('holds at most --dynamic-client-max-per-address self-registered clients from one address; other addresses and the total cap are apart', async () => {
      const capped = await startTestDaemon({ config: { dynamicClientMaxPerAddress: 2, rateLimitRegistration: 0 } });
      try {
        const reg = () => fetch(`${capped.url}/oauth/reg`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ redirect_uris: [REDIRECT_URI] }) });
        expect((await reg()).status).toBe(201);
        expect((await reg()).status).toBe(201);
        const over = await reg();
        expect(over.status).toBe(429);
        expect(await over.json()).toMatchObject({ error: 'too_many_clients', error_description: expect.stringMatching(/This address/) });
        expect(capped.store.count('oauth_clients')).toBe(2);
        expect(capped.store.all('oauth_clients').map((c: { registered_from?: string }) => c.registered_from)).toEqual(['127.0.0.1', '127.0.0.1']);
      } finally {
        await capped.stop();
      }
    });
  });

  it('removes self-registered clients unused for the retention period; only a token keeps one', async () => {
    const dataDir = await tempDir();
    const clock = testClock();
    const DAY = 24 * 60 * 60 * 1000;
    let daemon = await startTestDaemon({ dataDir, clock });
    try {
      const reg = (name: string) =>
        new Api(daemon.url).post('/oauth/reg', { client_name: name, redirect_uris: [REDIRECT_URI], token_endpoint_auth_method: 'none' }).then((r) => r.body.client_id as string);
      const stale = await reg('stale');
      const used = await reg('used');
      const poked = await reg('poked');
      const password = daemon.adminPassword;
      const registered = (await registerClient(await new Api(daemon.url).login('admin', password), { name: 'by admin', public: true })).clientId;
      await daemon.stop();
      clock.advance(20 * DAY);
      daemon = await startTestDaemon({ dataDir, clock });
      // anyone can send an authorization request for any client id: that keeps nothing alive
      const config = await oidcConfig(daemon, poked);
      const url = oidc.buildAuthorizationUrl(config, { redirect_uri: REDIRECT_URI, scope: 'scope_user_user', code_challenge: 'x'.repeat(43), code_challenge_method: 'S256' });
      expect((await fetch(url, { redirect: 'manual' })).status).toBe(303);
      // a token does: `used` completes a sign-in the person approved
      const admin = await new Api(daemon.url).login('admin', password);
      const signedIn = await authorize(await oidcConfig(daemon, used), admin, 'scope_user_user', {}, undefined, async (id) => {
        expect((await admin.put(`/svc/v1/access-requests/${id}/approve`, { approved_role: 'scope_user_user' })).status).toBe(200);
      });
      expect(signedIn.tokens?.access_token, signedIn.description ?? '').toBeTruthy();
      await daemon.stop();
      clock.advance(11 * DAY);
      daemon = await startTestDaemon({ dataDir, clock });
      const ids = (await storedOnDisk(dataDir)).oauth_clients.map((c: { client_id: string }) => c.client_id);
      expect(ids).not.toContain(stale);
      expect(ids).not.toContain(poked);
      expect(ids).toContain(used);
      expect(ids).toContain(registered);
    } finally {
      await daemon.stop();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
