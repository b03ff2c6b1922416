/**
 * `/ui/apps` in Chromium: the person's active grants with what each does (last used, today's calls
 * and tokens, limits, recent activity that updates by itself), a Revoke that stops the tokens at
 * once, and the refusals a revoke form must give (another site, a stale token).
 */
import type { Browser, BrowserContext } from 'playwright-core';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from './helpers/consent.js';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { startUpstream } from './helpers/upstream.js';

describe('the apps page', () => {
  let d: TestDaemon;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let browser: Browser;
  let context: BrowserContext;
  let admin: Api;
  let pat: Api;
  let clientId: string;

  async function grant(name: string) {
    const app = await new Api(d.url).post('/svc/v1/apps/request-access', { app_client_id: clientId, flow_type: 'popup', requested_role: 'scope_user_user', requested: { version: '1' } });
    const approved = await pat.put(`/svc/v1/access-requests/${app.body.id}/approve`, { approved_role: 'scope_user_user', limits: { requests_per_minute: 100 } });
    const token = (await authorize(await oidcConfig(d, clientId), pat, approved.body.access_request_scope)).tokens!.access_token;
    void name;
    return { id: app.body.id as string, token, openai: new OpenAI({ baseURL: `${d.url}/v1`, apiKey: token, maxRetries: 0 }) };
  }

  beforeAll(async () => {
    upstream = await startUpstream();
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    pat = await userApi(d.url, admin, 'pat', 'power_user');
    expect((await pat.post('/svc/v1/providers', { name: 'local', base_url: upstream.url })).status).toBe(201);
    clientId = (await registerClient(admin, { name: 'Notes <b>App</b>', public: true })).clientId;
    browser = await launchChromium();
    context = await browser.newContext();
    // Under the test's own limit, so that a step that never ends fails naming its step, not as a
    // bare test timeout.
    context.setDefaultTimeout(10_000);
    const page = await context.newPage();
    await page.goto(`${d.url}/ui/login?next=%2Fui`);
    await page.fill('#username', 'pat');
    await page.fill('#password', 'pw-pat-12345');
    await page.click('button[type=submit]');
    await page.waitForURL(`${d.url}/ui`);
    expect(await page.locator('#apps-link').getAttribute('href')).toBe('/ui/apps');
    await page.close();
  });
  afterAll(async () => {
    await browser?.close();
    await d?.stop();
    await upstream?.close();
  });

  it('shows each grant with what it does, updates its activity by itself, and revokes it', async () => {
    const g = await grant('first');
    const other = await grant('second');
    await g.openai.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'hi' }] });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('pageerror', (e) => problems.push(e.message));
    page.on('console', (m) => m.type() === 'error' && problems.push(m.text()));
    await page.goto(`${d.url}/ui/apps`);
    const section = page.locator(`#grant-${g.id}`);
    // the app's name is text, never markup
    expect(await section.locator('h2').textContent()).toBe('Notes <b>App</b>');
    expect(await section.locator('.limits').textContent()).toContain('100 calls a minute');
    await expect.poll(() => section.locator('ol.activity li').first().textContent()).toContain('chat fake-model');
    expect(await section.locator('.today').textContent()).toBe('1 calls, 2 tokens');

    // a new call shows without a reload
    await g.openai.models.list();
    await expect.poll(() => section.locator('ol.activity li').first().textContent(), { timeout: 10_000 }).toContain('models');

    await page.click(`#revoke-${g.id.slice(0, 8)}`);
    await page.waitForURL(/\/ui\/apps\?revoked=/);
    expect(await page.locator('#revoked').textContent()).toContain(g.id.slice(0, 8));
    expect(await page.locator(`#grant-${g.id}`).count()).toBe(0);
    expect(await page.locator(`#grant-${other.id}`).count()).toBe(1);
    expect((await new Api(d.url).get('/v1/models', { Authorization: `Bearer ${g.token}` })).status).toBe(401);
    expect((await new Api(d.url).get('/v1/models', { Authorization: `Bearer ${other.token}` })).status).toBe(200);
    expect(problems).toEqual([]);
    await page.close();
  });

  it('the review page takes limits at approval; a bad one decides nothing and says why', async () => {
    const create = async () =>
      (await new Api(d.url).post('/svc/v1/apps/request-access', { app_client_id: clientId, flow_type: 'popup', requested_role: 'scope_user_user', requested: { version: '1' } })).body.id as string;
    const page = await context.newPage();
    const bad = await create();
    await page.goto(`${d.url}/ui/apps/access-requests/review?id=${bad}`);
    await page.fill('#limit-rpm', 'lots');
    const [answer] = await Promise.all([page.waitForResponse((r) => r.request().method() === 'POST'), page.click('#approve')]);
    expect(answer.status()).toBe(400);
    expect(await page.locator('#error').textContent()).toContain('A limit must be a whole number above 0');
    expect((await pat.get(`/svc/v1/access-requests/${bad}/review`)).body.status).toBe('draft');

    const good = await create();
    await page.goto(`${d.url}/ui/apps/access-requests/review?id=${good}`);
    await page.fill('#limit-rpm', '30');
    await page.fill('#limit-tokens', '5000');
    await page.click('#approve');
    await expect.poll(async () => (await pat.get(`/svc/v1/access-requests/${good}/review`)).body.status).toBe('approved');
    expect((await pat.get(`/svc/v1/access-requests/${good}/review`)).body.limits).toEqual({ requests_per_minute: 30, tokens_per_day: 5000 });
    await page.close();
  });

  it('refuses a revoke from another site and one without the session’s CSRF token; nothing is revoked', async () => {
    const g = await grant('third');
    const cookie = (await context.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
    const crossSite = await fetch(`${d.url}/ui/apps/revoke`, {
      method: 'POST',
      redirect: 'manual',
      headers: { Cookie: cookie, Origin: 'https://evil.example', 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ id: g.id, _csrf: 'x' }),
    });
    expect(crossSite.status).toBe(403);
    const stale = await fetch(`${d.url}/ui/apps/revoke`, {
      method: 'POST',
      redirect: 'manual',
      headers: { Cookie: cookie, Origin: d.url, 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ id: g.id, _csrf: 'not-the-token' }),
    });
    expect(stale.status).toBe(403);
    expect((await pat.get(`/svc/v1/access-requests/${g.id}/review`)).body.status).toBe('approved');
  });
});
