import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeFilesText } from './helpers/store.js';
import * as oidc from 'openid-client';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { approvedScope, authorize, oidcConfig, registerClient } from './helpers/oauth.js';

describe('embedded authorization server with openid-client as the app', () => {
  let d: TestDaemon;
  let admin: Api;
  let alice: Api;

  beforeAll(async () => {
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    alice = await userApi(d.url, admin, 'alice', 'power_user');
  });
  afterAll(() => d.stop());

  it('publishes discovery with PKCE S256 and RFC 9728 resource metadata', async () => {
    const disc = await new Api(d.url).get('/oauth/.well-known/openid-configuration');
    expect(disc.status).toBe(200);
    expect(disc.body.issuer).toBe(`${d.baseUrl}/oauth`);
    expect(disc.body.code_challenge_methods_supported).toEqual(['S256']);
    const prm = await new Api(d.url).get('/.well-known/oauth-protected-resource');
    expect(prm.body).toMatchObject({ resource: d.baseUrl, authorization_servers: [`${d.baseUrl}/oauth`], bearer_methods_supported: ['header'] });
  });

  it('walks register -> request -> approve -> code+PKCE with the session -> token -> Bearer call', async () => {
    const { clientId, secret } = await registerClient(admin, { name: 'Notes <b>App</b>', description: 'Takes notes' });
    expect(secret).toBeTruthy();
    const mcp = await alice.post('/svc/v1/mcps', { name: 'files', url: 'http://127.0.0.1:9301/mcp' });
    const app = new Api(d.url);
    const created = await app.post('/svc/v1/apps/request-access', {
      app_client_id: clientId,
      flow_type: 'redirect',
      redirect_url: 'http://127.0.0.1:65010/callback',
      requested_role: 'scope_user_user',
      requested: { version: '1', mcp_servers: [{ url: 'http://127.0.0.1:9301/mcp' }] },
    });
    expect(created.status).toBe(201);
    const review = await alice.get(`/svc/v1/access-requests/${created.body.id}/review`);
    expect(review.body).toMatchObject({ app_name: 'Notes <b>App</b>', app_description: 'Takes notes' });
    const approved = await alice.put(`/svc/v1/access-requests/${created.body.id}/approve`, {
      approved_role: 'scope_user_user',
      approved: { version: '1', mcp_servers: [{ url: 'http://127.0.0.1:9301/mcp', instance_ids: [mcp.body.instance.id] }] },
    });
    const scope = approved.body.access_request_scope;

    const config = await oidcConfig(d, clientId, secret);
    const result = await authorize(config, alice, scope);
    expect(result.error).toBeUndefined();
    const tokens = result.tokens!;
    expect(tokens.token_type.toLowerCase()).toBe('bearer');
    expect(tokens.scope).toBe(scope);
    expect(tokens.refresh_token).toBeTruthy();
    const [header] = tokens.access_token.split('.');
    expect(JSON.parse(Buffer.from(header, 'base64url').toString())).toMatchObject({ typ: 'at+jwt', alg: 'ES256' });

    const list = await new Api(d.url).get('/svc/v1/apps/mcps', { Authorization: `Bearer ${tokens.access_token}` });
    expect(list.status).toBe(200);
    expect(list.body.data.map((m: { id: string }) => m.id)).toEqual([mcp.body.instance.id]);

    // refresh with rotation: the new refresh token works, the old one is spent
    const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token!);
    expect(refreshed.access_token).not.toBe(tokens.access_token);
    expect(refreshed.refresh_token).not.toBe(tokens.refresh_token);
    await expect(oidc.refreshTokenGrant(config, tokens.refresh_token!)).rejects.toThrow();

    // the store keeps refresh tokens only hashed and sealed
    const db = await storeFilesText(d.dataDir);
    expect(db.includes(refreshed.refresh_token!)).toBe(false);
    expect(db.includes(tokens.refresh_token!)).toBe(false);
  });

  it('sends a user without a session to the login form, then on to the app', async () => {
    const { clientId } = await registerClient(admin, { public: true });
    const { scope } = await approvedScope(d, alice, clientId);
    const config = await oidcConfig(d, clientId);
    const stuck = await authorize(config, new Api(d.url), scope);
    expect(stuck).toMatchObject({ status: 200 });
    expect(stuck.description).toContain('<title>Log in');
    const signedIn = await authorize(config, new Api(d.url), scope, {}, { username: 'alice', password: 'pw-alice-12345' });
    expect(signedIn.error).toBeUndefined();
    expect(signedIn.tokens!.scope).toBe(scope);
  });

  it('refuses a scope that is not approved for this client and user', async () => {
    const { clientId, secret } = await registerClient(admin);
    const other = await registerClient(admin);
    const config = await oidcConfig(d, clientId, secret);
    // approved for another client
    const foreign = await approvedScope(d, alice, other.clientId);
    expect((await authorize(config, alice, foreign.scope)).error).toBe('access_denied');
    // approved for this client, but by another user
    const bob = await userApi(d.url, admin, 'bob', 'user');
    const bobs = await approvedScope(d, bob, clientId);
    expect((await authorize(config, alice, bobs.scope)).error).toBe('access_denied');
    // two grants at once
    const a = await approvedScope(d, alice, clientId);
    const b = await approvedScope(d, alice, clientId);
    expect((await authorize(config, alice, `${a.scope} ${b.scope}`)).error).toBe('invalid_scope');
    // revoked before the code is redeemed
    const c = await approvedScope(d, alice, clientId);
    await alice.post(`/svc/v1/access-requests/${c.id}/revoke`);
    expect((await authorize(config, alice, c.scope)).error).toBe('access_denied');
  });

  it('stops refresh once the grant is revoked', async () => {
    const { clientId, secret } = await registerClient(admin);
    const { id, scope } = await approvedScope(d, alice, clientId);
    const config = await oidcConfig(d, clientId, secret);
    const { tokens } = await authorize(config, alice, scope);
    await alice.post(`/svc/v1/access-requests/${id}/revoke`);
    await expect(oidc.refreshTokenGrant(config, tokens!.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
  });

  it('exchanges a token for another approved grant of the same user and client (RFC 8693)', async () => {
    const { clientId, secret } = await registerClient(admin);
    const first = await approvedScope(d, alice, clientId);
    const second = await approvedScope(d, alice, clientId, 'scope_user_power_user');
    const config = await oidcConfig(d, clientId, secret);
    const { tokens } = await authorize(config, alice, first.scope);
    const exchanged = await oidc.genericGrantRequest(config, 'urn:ietf:params:oauth:grant-type:token-exchange', {
      subject_token: tokens!.access_token,
      subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      scope: second.scope,
    });
    expect(exchanged.scope).toBe(second.scope);
    const call = await new Api(d.url).get('/svc/v1/apps/mcps', { Authorization: `Bearer ${exchanged.access_token}` });
    expect(call.status).toBe(200);

    // not for a grant the user did not approve
    const bob = await userApi(d.url, admin, 'bob2', 'user');
    const bobs = await approvedScope(d, bob, clientId);
    await expect(
      oidc.genericGrantRequest(config, 'urn:ietf:params:oauth:grant-type:token-exchange', {
        subject_token: tokens!.access_token,
        subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
        scope: bobs.scope,
      }),
    ).rejects.toThrow();
  });

  it('rejects a redirect_url that the known client did not register', async () => {
    const { clientId } = await registerClient(admin);
    const res = await new Api(d.url).post('/svc/v1/apps/request-access', {
      app_client_id: clientId,
      flow_type: 'redirect',
      redirect_url: 'http://127.0.0.1:65010/callback/other',
      requested_role: 'scope_user_user',
      requested: { version: '1' },
    });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_redirect_url');
  });

  it('says on a page of its own when a sign-in cannot go on or has expired, escaping what the client sent', async () => {
    const hostile = '<script>alert(1)</script>';
    const bad = await fetch(`${d.url}/oauth/auth?${new URLSearchParams({ client_id: hostile, response_type: 'code', redirect_uri: 'http://127.0.0.1:9/cb', scope: 'openid' })}`);
    expect(bad.status).toBe(400);
    expect(bad.headers.get('content-type')).toMatch(/text\/html/);
    expect(bad.headers.get('content-security-policy')).toContain("default-src 'none'");
    const page = await bad.text();
    expect(page).toContain('This sign-in cannot go on');
    expect(page).not.toContain('<script>alert');
    const gone = await fetch(`${d.url}/oauth/interaction/no-such-interaction`);
    expect(gone.status).toBe(400);
    expect(await gone.text()).toContain('This sign-in has expired');
  });
});
