/**
 * One app, one person, several grants over time: every authorization issues tokens for exactly the
 * access request it named, refresh tokens stay with their own grant, a revoke ends only its grant,
 * re-approval after a revoke works, a replayed refresh token ends its family, and a token exchange
 * never reaches further than the token given.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as oidc from 'openid-client';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { approvedScope, authorize, oidcConfig, registerClient } from './helpers/oauth.js';

const MCP_URL = 'http://127.0.0.1:9/mcp';
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

const scopeOf = (jwt: string) => JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString()).scope as string;

describe('grants of one app and person', () => {
  let d: TestDaemon;
  let admin: Api;
  let alice: Api;
  let instanceId: string;

  beforeAll(async () => {
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    alice = await userApi(d.url, admin, 'alice', 'power_user');
    instanceId = (await alice.post('/svc/v1/mcps', { name: 'files', url: MCP_URL })).body.instance.id;
  });
  afterAll(() => d.stop());

  const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });
  const mcps = async (token: string) => {
    const res = await new Api(d.url).get('/svc/v1/apps/mcps', bearer(token));
    return res.status === 200 ? res.body.data.map((m: { id: string }) => m.id) : res.status;
  };
  /** A power-user endpoint: the model aliases. */
  const aliases = async (token: string) => (await new Api(d.url).get('/svc/v1/models', bearer(token))).status;
  const createWithMcp = async (clientId: string) => {
    const res = await new Api(d.url).post('/svc/v1/apps/request-access', {
      app_client_id: clientId,
      flow_type: 'popup',
      requested_role: 'scope_user_power_user',
      requested: { version: '1', mcp_servers: [{ url: MCP_URL }] },
    });
    expect(res.status).toBe(201);
    return res.body.id as string;
  };
  /** A Power User grant with the instance. */
  const wide = async (clientId: string) => {
    const id = await createWithMcp(clientId);
    const res = await alice.put(`/svc/v1/access-requests/${id}/approve`, {
      approved_role: 'scope_user_power_user',
      approved: { version: '1', mcp_servers: [{ url: MCP_URL, instance_ids: [instanceId] }] },
    });
    expect(res.status).toBe(200);
    return { id, scope: res.body.access_request_scope as string };
  };
  const narrow = (clientId: string) => approvedScope(d, alice, clientId, 'scope_user_user');
  it('a narrower second grant gets its own token, not the first one', async () => {
    const { clientId } = await registerClient(admin, { public: true });
    const config = await oidcConfig(d, clientId);
    // G1: Power User with the instance
    const g1 = await wide(clientId);
    const t1 = (await authorize(config, alice, g1.scope)).tokens!;
    expect(scopeOf(t1.access_token)).toContain(g1.scope);
    // G2: User, no instance
    const g2 = await narrow(clientId);
    const t2 = (await authorize(config, alice, g2.scope)).tokens!;
    expect(t2.scope).toBe(g2.scope);
    expect(scopeOf(t2.access_token)).toBe(g2.scope);
    expect(await mcps(t2.access_token)).toEqual([]);
    expect(await aliases(t2.access_token)).toBe(403);
    expect(await mcps(t1.access_token)).toEqual([instanceId]);
    expect(await aliases(t1.access_token)).toBe(200);

    // revoking G2 stops G2's tokens and nothing of G1
    expect((await alice.post(`/svc/v1/access-requests/${g2.id}/revoke`)).status).toBe(200);
    expect(await mcps(t2.access_token)).toBe(401);
    expect(await mcps(t1.access_token)).toEqual([instanceId]);
    // G2's refresh token is refused, and never turns into a token of G1
    await expect(oidc.refreshTokenGrant(config, t2.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
    const r1 = await oidc.refreshTokenGrant(config, t1.refresh_token!);
    expect(scopeOf(r1.access_token)).toContain(g1.scope);
    expect(await mcps(r1.access_token)).toEqual([instanceId]);
  });

  it('three grants in turn: each refresh token stays with its grant, and re-approval after revoking all works', async () => {
    const { clientId } = await registerClient(admin, { public: true });
    const config = await oidcConfig(d, clientId);
    const grants = [await wide(clientId), await narrow(clientId), await narrow(clientId)];
    const tokens = [];
    for (const g of grants) tokens.push((await authorize(config, alice, g.scope)).tokens!);
    for (const [i, g] of grants.entries()) {
      expect(scopeOf(tokens[i].access_token)).toContain(g.scope);
      const refreshed = await oidc.refreshTokenGrant(config, tokens[i].refresh_token!);
      expect(scopeOf(refreshed.access_token)).toContain(g.scope);
      tokens[i] = { ...tokens[i], ...refreshed };
    }
    // revoke the middle one: only its tokens stop
    await alice.post(`/svc/v1/access-requests/${grants[1].id}/revoke`);
    expect(await mcps(tokens[1].access_token)).toBe(401);
    expect(await mcps(tokens[0].access_token)).toEqual([instanceId]);
    expect(await mcps(tokens[2].access_token)).toEqual([]);
    await expect(oidc.refreshTokenGrant(config, tokens[1].refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
    expect(scopeOf((await oidc.refreshTokenGrant(config, tokens[2].refresh_token!)).access_token)).toBe(grants[2].scope);

    // every grant revoked: a new approval still signs the app in
    for (const g of [grants[0], grants[2]]) await alice.post(`/svc/v1/access-requests/${g.id}/revoke`);
    const again = await narrow(clientId);
    const result = await authorize(config, alice, again.scope);
    expect(result.error).toBeUndefined();
    expect(scopeOf(result.tokens!.access_token)).toBe(again.scope);
    expect(await mcps(result.tokens!.access_token)).toEqual([]);
    expect(scopeOf((await oidc.refreshTokenGrant(config, result.tokens!.refresh_token!)).access_token)).toBe(again.scope);
  });

  it('a replayed refresh token ends its whole family: the successor and its access token too, and no other grant', async () => {
    const { clientId } = await registerClient(admin, { public: true });
    const config = await oidcConfig(d, clientId);
    const mine = await narrow(clientId);
    const other = await narrow(clientId);
    const first = (await authorize(config, alice, mine.scope)).tokens!;
    const bystander = (await authorize(config, alice, other.scope)).tokens!;
    const successor = await oidc.refreshTokenGrant(config, first.refresh_token!);
    expect(await mcps(successor.access_token)).toEqual([]);
    // the rotated token comes back: someone holds a copy of it
    await expect(oidc.refreshTokenGrant(config, first.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
    await expect(oidc.refreshTokenGrant(config, successor.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
    expect(await mcps(successor.access_token)).toBe(401);
    expect(await mcps(first.access_token)).toBe(401);
    // the grant itself stands: the person did not revoke it, and another sign-in works
    expect(await mcps(bystander.access_token)).toEqual([]);
    const fresh = (await authorize(config, alice, mine.scope)).tokens!;
    expect(await mcps(fresh.access_token)).toEqual([]);
  });

  it('a refresh token used several times at once is a replay too: no two live sign-ins come of it', async () => {
    const { clientId } = await registerClient(admin, { public: true });
    const config = await oidcConfig(d, clientId);
    const g = await narrow(clientId);
    const first = (await authorize(config, alice, g.scope)).tokens!;
    const results = await Promise.allSettled([1, 2, 3, 4].map(() => oidc.refreshTokenGrant(config, first.refresh_token!)));
    const won = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    expect(won.length).toBeLessThanOrEqual(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ error: 'invalid_grant' });
    // as with a replay one after the other, the whole sign-in has ended
    expect(await mcps(first.access_token)).toBe(401);
    for (const t of won) {
      expect(await mcps(t.access_token)).toBe(401);
      await expect(oidc.refreshTokenGrant(config, t.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
    }
    // the grant itself stands
    expect(await mcps((await authorize(config, alice, g.scope)).tokens!.access_token)).toEqual([]);
  });

  it('a token got by exchange ends with the sign-in of the token given: a replayed refresh token or a revoked one stops it, and it cannot be exchanged on', async () => {
    const { clientId } = await registerClient(admin, { public: true });
    const config = await oidcConfig(d, clientId);
    const g = await narrow(clientId);
    const exchange = (subject: string) =>
      oidc.genericGrantRequest(config, TOKEN_EXCHANGE, { subject_token: subject, subject_token_type: ACCESS_TOKEN_TYPE, scope: g.scope });

    // a replayed refresh token ends the sign-in: what was exchanged from it ends too
    const first = (await authorize(config, alice, g.scope)).tokens!;
    const exchanged = await exchange(first.access_token);
    const chained = await exchange(exchanged.access_token);
    // and no exchange lives longer than the token it was given
    const expOf = (jwt: string) => JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString()).exp as number;
    expect(expOf(exchanged.access_token)).toBeLessThanOrEqual(expOf(first.access_token));
    expect(expOf(chained.access_token)).toBeLessThanOrEqual(expOf(first.access_token));
    expect(await mcps(exchanged.access_token)).toEqual([]);
    await oidc.refreshTokenGrant(config, first.refresh_token!);
    await expect(oidc.refreshTokenGrant(config, first.refresh_token!)).rejects.toMatchObject({ error: 'invalid_grant' });
    expect(await mcps(first.access_token)).toBe(401);
    expect(await mcps(exchanged.access_token)).toBe(401);
    expect(await mcps(chained.access_token)).toBe(401);
    await expect(exchange(exchanged.access_token)).rejects.toMatchObject({ error: 'invalid_grant' });

    // the app signs out (RFC 7009 revocation of its refresh token): the same
    const second = (await authorize(config, alice, g.scope)).tokens!;
    const kept = await exchange(second.access_token);
    await oidc.tokenRevocation(config, second.refresh_token!);
    expect(await mcps(second.access_token)).toBe(401);
    expect(await mcps(kept.access_token)).toBe(401);

    // the grant itself stands: a new sign-in works, and so does an exchange of its token
    const third = (await authorize(config, alice, g.scope)).tokens!;
    expect(await mcps((await exchange(third.access_token)).access_token)).toEqual([]);
  });

  it('a token exchange keeps the audience of the token given', async () => {
    const { clientId } = await registerClient(admin, { public: true });
    const config = await oidcConfig(d, clientId);
    const g = await wide(clientId);
    const proxy = `${d.baseUrl}/svc/v1/apps/mcps/${instanceId}/mcp`;
    const bound = (await authorize(config, alice, g.scope, { resource: proxy })).tokens!;
    const audOf = (jwt: string) => JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString()).aud;
    expect(audOf(bound.access_token)).toBe(proxy);
    const exchange = (extra: Record<string, string>) =>
      oidc.genericGrantRequest(config, TOKEN_EXCHANGE, { subject_token: bound.access_token, subject_token_type: ACCESS_TOKEN_TYPE, scope: g.scope, ...extra });
    // no resource named: the same one, not the whole of svc
    const same = await exchange({});
    expect(audOf(same.access_token)).toBe(proxy);
    expect(await mcps(same.access_token)).toBe(401);
    expect((await new Api(d.url).get('/v1/models', bearer(same.access_token))).status).toBe(401);
    // a wider or another resource is refused
    await expect(exchange({ resource: d.baseUrl })).rejects.toMatchObject({ error: 'invalid_target' });
    await expect(exchange({ resource: `${d.baseUrl}/v1` })).rejects.toMatchObject({ error: 'invalid_target' });
    // a token for the whole of svc may still be exchanged for a narrower one
    const whole = (await authorize(config, alice, g.scope)).tokens!;
    const narrowed = await oidc.genericGrantRequest(config, TOKEN_EXCHANGE, {
      subject_token: whole.access_token,
      subject_token_type: ACCESS_TOKEN_TYPE,
      scope: g.scope,
      resource: `${d.baseUrl}/v1`,
    });
    expect(audOf(narrowed.access_token)).toBe(`${d.baseUrl}/v1`);
  });
});
