/**
 * A team server's sign-in to an OAuth-protected MCP server: the tokens live in PostgreSQL sealed
 * with the team's key, and a stale token met on both replicas at once is refreshed once in all
 * (the server rotates refresh tokens, so a second refresh with the old one would end the sign-in).
 */
import pg from 'pg';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from './helpers/consent.js';
import { type TestDaemon, testClock } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { signInOnUpstreamPage, startOAuthMcpUpstream } from './helpers/oauth-mcp-upstream.js';
import { useTeamServer } from './helpers/team.js';

describe('a team server signed in to a hosted MCP server', { timeout: 90_000 }, () => {
  const server = useTeamServer();
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchChromium();
  }, 30_000);
  afterAll(() => browser?.close());

  it('twenty calls spread over two replicas that meet an expired token cause one refresh at the authorization server, and all succeed', async () => {
    const clock = testClock();
    const team = await server.startTeam(2, undefined, clock, { rateLimitClient: 0, rateLimitAddress: 0 });
    const upstream = await startOAuthMcpUpstream({ registration: 'dynamic' });
    server.running.push({ stop: () => upstream.close() });
    const admin = await team.api().login('admin', team.password);

    const added = await admin.post('/svc/v1/mcps', { name: 'hosted', url: upstream.mcpUrl });
    expect(added.status, added.text).toBe(201);
    const id = added.body.instance.id as string;
    expect(added.body.instance.auth.status).toBe('needs_sign_in');

    // the sign-in starts on one replica and may come back on the other
    const link = await admin.post('/svc/v1/auth/login-links');
    const url = new URL(link.body.url);
    url.searchParams.set('next', `/ui/mcps/${id}/sign-in`);
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(url.href);
      await signInOnUpstreamPage(page);
      await page.locator('#state').waitFor({ timeout: 15_000 });
      expect(await page.locator('h1').innerText()).toContain('Signed in to hosted');
    } finally {
      await context.close();
    }
    expect((await admin.get(`/svc/v1/mcps/${id}`)).body.instance.auth.status).toBe('connected');

    const { clientId, secret } = await registerClient(admin);
    const created = await new Api(team.balancer.url).post('/svc/v1/apps/request-access', {
      app_client_id: clientId,
      flow_type: 'popup',
      requested_role: 'scope_user_user',
      requested: { version: '1', mcp_servers: [{ url: upstream.mcpUrl }] },
    });
    const approved = await admin.put(`/svc/v1/access-requests/${created.body.id}/approve`, { approved_role: 'scope_user_user', approved: { version: '1', mcp_servers: [{ url: upstream.mcpUrl, instance_ids: [id] }] } });
    expect(approved.status, approved.text).toBe(200);
    const { tokens } = await authorize(await oidcConfig({ baseUrl: team.balancer.url } as TestDaemon, clientId, secret), admin, approved.body.access_request_scope);
    const bearer = { Authorization: `Bearer ${tokens!.access_token}` };

    const before = upstream.refreshes();
    clock.advance(61_000);
    const calls = Array.from({ length: 20 }, (_, i) =>
      new Api(team.replicas[i % 2].url).post(`/svc/v1/apps/mcps/${id}/tools/echo/execute`, { params: { message: `n${i}` } }, bearer),
    );
    const results = await Promise.all(calls);
    for (const [i, r] of results.entries()) expect(r.body.result?.content[0].text, r.text).toBe(`echo: n${i}`);
    expect(upstream.refreshes() - before).toBe(1);
    expect((await admin.get(`/svc/v1/mcps/${id}`)).body.instance.auth.status).toBe('connected');

    // sealed in the database: no token of the upstream's is in any row in the clear
    const c = new pg.Client(team.database);
    await c.connect();
    const rows = await c.query('SELECT record::text AS r FROM mcp_instances').finally(() => c.end());
    const text = rows.rows.map((r: { r: string }) => r.r).join('\n');
    expect(text).toContain('sealed:v1:');
    for (const t of [...upstream.issued, ...upstream.refreshTokens]) expect(text.includes(t)).toBe(false);
  });

  it('a sign-in svc mcp login starts on one replica is finished by the callback on any, and the other replica tells the CLI it is connected', async () => {
    const team = await server.startTeam(2, undefined, undefined, { rateLimitClient: 0, rateLimitAddress: 0 });
    const upstream = await startOAuthMcpUpstream({ registration: 'dynamic' });
    server.running.push({ stop: () => upstream.close() });
    const [one, two] = await Promise.all(team.replicas.map((r) => new Api(r.url).login('admin', team.password)));
    const id = (await one.post('/svc/v1/mcps', { name: 'cli-hosted', url: upstream.mcpUrl })).body.instance.id as string;
    const started = await one.post(`/svc/v1/mcps/${id}/oauth/login`);
    expect(started.status, started.text).toBe(200);
    const status = async () => (await two.post(`/svc/v1/mcps/${id}/oauth/login/status`, { login: started.body.login })).body.status;
    expect(await status()).toBe('pending');
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(started.body.authorization_url);
      await signInOnUpstreamPage(page);
      await page.locator('#state').waitFor({ timeout: 15_000 });
      expect(await page.locator('h1').innerText()).toContain('Signed in to cli-hosted');
    } finally {
      await context.close();
    }
    expect(await status()).toBe('connected');
    expect((await two.get(`/svc/v1/mcps/${id}`)).body.instance.auth.status).toBe('connected');
  });
});
