/**
 * The browser side of tool choices and held calls, in Chromium: the review page lists each
 * instance's tools with their annotations and defaults and sends what the person changed; the
 * page /ui/calls shows a held call by itself (its arguments escaped, the count in the title) and
 * decides it; a post from another site or without the session's token decides nothing.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM_PATH, launchChromium } from './helpers/consent.js';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { needs } from './helpers/requirements.js';
import { startRiskyServer } from './helpers/risky-mcp.js';
import { eventually } from './helpers/wait.js';

const PASSWORD = 'pw-alice-12345';

/** A page on another origin that posts a form to svc (the cross-site attempt). */
async function startAttacker() {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
    res.setHeader('Content-Type', 'text/html; charset=utf-8');
    res.end(`<!doctype html><form id="f" method="post" action="${esc(url.searchParams.get('action') ?? '')}"><input name="id" value="${esc(url.searchParams.get('id') ?? '')}"><input name="_csrf" value="${esc(url.searchParams.get('csrf') ?? '')}"></form><script>document.getElementById('f').submit()</script>`);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
}

describe.skipIf(!needs(Boolean(CHROMIUM_PATH), 'calls-page', 'Chromium at /usr/bin/chromium'))('tool choices and held calls in the browser', () => {
  let d: TestDaemon;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let alice: Api;
  let risky: Awaited<ReturnType<typeof startRiskyServer>>;
  let attacker: Awaited<ReturnType<typeof startAttacker>>;
  let instance: string;
  let key: string;

  const execute = (tool: string, params: Record<string, unknown>) =>
    new Api(d.url).post(`/svc/v1/apps/mcps/${instance}/tools/${tool}/execute`, { params }, { Authorization: `Bearer ${key}` });

  beforeAll(async () => {
    [risky, attacker, browser] = await Promise.all([startRiskyServer(), startAttacker(), launchChromium()]);
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, notify: false } });
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    alice = await userApi(d.url, admin, 'alice', 'user');
    instance = (await alice.post('/svc/v1/mcps', { name: 'notes', url: risky.url })).body.instance.id;
    const created = await alice.post('/svc/v1/keys', { name: 'page key', mcp_servers: [{ url: risky.url, instance_ids: [instance] }] });
    key = created.body.key;
    context = await browser.newContext();
    page = await context.newPage();
    await page.goto(`${d.url}/ui/login?next=%2Fui`);
    await page.fill('#username', 'alice');
    await page.fill('#password', PASSWORD);
    await Promise.all([page.waitForURL(`${d.url}/ui`), page.click('button[type=submit]')]);
  }, 60_000);

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await d?.stop();
    await Promise.all([risky?.close(), attacker?.close()]);
  });

  it('the review page lists the tools with their annotations and defaults; the choices changed there are what the grant holds', async () => {
    const created = await new Api(d.url).post('/svc/v1/apps/request-access', {
      app_client_id: 'page-app',
      flow_type: 'popup',
      requested_role: 'scope_user_user',
      requested: { version: '1', mcp_servers: [{ url: risky.url }] },
    });
    await page.goto(created.body.review_url);
    const tools = page.locator(`#tools-${instance}`);
    await expect.poll(() => tools.locator('tr').count()).toBe(3);
    expect(await tools.locator('tr[data-tool="delete_note"]').innerText()).toMatch(/destructive/);
    expect(await tools.locator('tr[data-tool="read_notes"]').innerText()).toMatch(/read-only/);
    const picked = (name: string) => tools.locator(`select[aria-label="${name}"]`).inputValue();
    expect(await picked('delete_note')).toBe('ask:delete_note');
    expect(await picked('read_notes')).toBe('allow:read_notes');
    expect(await picked('touch')).toBe('allow:touch');
    await tools.locator('select[aria-label="touch"]').selectOption('deny:touch');
    await tools.locator('select[aria-label="delete_note"]').selectOption('allow:delete_note');
    await page.click('#approve');
    await page.waitForSelector('#outcome[data-status="approved"]');
    const review = await alice.get(`/svc/v1/access-requests/${created.body.id}/review`);
    expect(review.body.tool_policies).toEqual({ [instance]: { tools: { touch: 'deny', delete_note: 'allow' } } });
  });

  it('/ui/calls shows a held call by itself, its arguments escaped and the count in the title; Approve runs it once', async () => {
    await page.goto(`${d.url}/ui/calls`);
    await page.waitForSelector('#none');
    expect(await page.title()).toBe('Held tool calls · svc');
    const before = risky.runs('delete_note');
    const hostile = '<img src=x onerror="document.title=\'pwned\'">\u202e';
    const answer = execute('delete_note', { id: 'page-1', note: hostile });
    const section = page.locator('section.call');
    await section.waitFor({ timeout: 10_000 });
    await expect.poll(() => page.title()).toBe('(1) Held tool calls · svc');
    expect(await section.locator('.tool').innerText()).toBe('delete_note');
    const args = await section.locator('pre.args').innerText();
    expect(JSON.parse(args.replace(/\\u202e/g, '\\u202e'))).toEqual({ id: 'page-1', note: hostile });
    expect(args).toContain('<img src=x');
    expect(args).toContain('\\u202e');
    expect(await page.locator('img').count()).toBe(0);
    // the home page counts it too
    const home = await context.newPage();
    await home.goto(`${d.url}/ui`);
    expect(await home.locator('#held-calls').innerText()).toMatch(/1 tool call is held/);
    expect(await home.title()).toBe('(1) svc · svc');
    await home.close();

    expect(risky.runs('delete_note')).toBe(before);
    await Promise.all([page.waitForURL(/decided=/), section.locator('button.approve').click()]);
    expect(await page.locator('#notice').innerText()).toMatch(/Approved delete_note/);
    expect((await answer).body.result.content).toEqual([{ type: 'text', text: 'deleted page-1' }]);
    expect(risky.runs('delete_note')).toBe(before + 1);
    expect(await page.title()).toBe('Held tool calls · svc');
  });

  it('Deny on the page: the call never runs, and the app is told', async () => {
    await page.goto(`${d.url}/ui/calls`);
    const before = risky.runs('delete_note');
    const answer = execute('delete_note', { id: 'page-2' });
    const section = page.locator('section.call');
    await section.waitFor({ timeout: 10_000 });
    await Promise.all([page.waitForURL(/decided=/), section.locator('button.deny').click()]);
    expect(await page.locator('#notice').innerText()).toMatch(/Denied delete_note/);
    expect((await answer).body.result.isError).toBe(true);
    expect(risky.runs('delete_note')).toBe(before);
  });

  it('later, /ui/grants/tools changes a grant\'s choices: a tool set to deny is refused from then on; only with the page\'s token', async () => {
    const grant = (await alice.get('/svc/v1/access-requests?status=approved')).body.data.find((r: { app_client_id: string }) => r.app_client_id.startsWith('svc-key:'));
    await page.goto(`${d.url}/ui/grants/tools?id=${grant.id}`);
    const section = page.locator(`#tools-${instance}`);
    expect(await section.locator('select[aria-label="delete_note"]').inputValue()).toBe('ask:delete_note');
    await section.locator('select[aria-label="touch"]').selectOption('deny:touch');
    await Promise.all([page.waitForURL(/saved=1/), page.click('#save')]);
    expect(await page.locator('#notice').innerText()).toMatch(/Saved/);
    const review = await alice.get(`/svc/v1/access-requests/${grant.id}/review`);
    expect(review.body.tool_policies).toEqual({ [instance]: { tools: { touch: 'deny' } } });
    const before = risky.runs('touch');
    expect((await execute('touch', { path: '/p' })).status).toBe(403);
    expect(risky.runs('touch')).toBe(before);
    // without the token nothing changes; another person's grant does not exist here
    const stale = await alice.request('POST', '/ui/grants/tools', `id=${grant.id}&tooldefault_${instance}=deny`, { 'Content-Type': 'application/x-www-form-urlencoded' });
    expect(stale.status).toBe(403);
    expect((await alice.get(`/svc/v1/access-requests/${grant.id}/review`)).body.tool_policies).toEqual({ [instance]: { tools: { touch: 'deny' } } });
    // back to the default, from the page
    await page.goto(`${d.url}/ui/grants/tools?id=${grant.id}`);
    await page.locator(`#tools-${instance} select[aria-label="touch"]`).selectOption('allow:touch');
    await Promise.all([page.waitForURL(/saved=1/), page.click('#save')]);
    expect((await alice.get(`/svc/v1/access-requests/${grant.id}/review`)).body.tool_policies).toEqual({});
  });

  it('a form posted from another site, or without the session\'s token, decides nothing', async () => {
    const before = risky.runs('delete_note');
    const answer = execute('delete_note', { id: 'page-3' });
    const call = await eventually(async () => ((await alice.get('/svc/v1/calls?status=pending')).body.data as { id: string }[])[0], 'a held call');
    // the attacker knows the id and even the token, and posts with alice's cookie in her browser
    await page.goto(`${d.url}/ui/calls`);
    const csrf = await page.locator('input[name=_csrf]').first().inputValue();
    const attack = await context.newPage();
    const landed = attack.waitForResponse((r) => r.url().startsWith(`${d.url}/ui/calls/approve`));
    await attack.goto(`${attacker.origin}/?action=${encodeURIComponent(`${d.url}/ui/calls/approve`)}&id=${call.id}&csrf=${encodeURIComponent(csrf)}`);
    expect((await landed).status()).toBe(403);
    await attack.close();
    // same origin, but no token
    const noToken = await alice.request('POST', '/ui/calls/approve', `id=${call.id}`, { 'Content-Type': 'application/x-www-form-urlencoded' });
    expect(noToken.status).toBe(403);
    expect(risky.runs('delete_note')).toBe(before);
    expect((await alice.get('/svc/v1/calls?status=pending')).body.data.map((c: { id: string }) => c.id)).toContain(call.id);
    await alice.post(`/svc/v1/calls/${call.id}/deny`);
    expect((await answer).body.result.isError).toBe(true);
    expect(risky.runs('delete_note')).toBe(before);
  });
});
