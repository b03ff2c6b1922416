import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, testClock, type TestDaemon } from './helpers/daemon.js';
import { Api, createBody, userApi } from './helpers/http.js';
import { registerClient } from './helpers/oauth.js';
import { needs } from './helpers/requirements.js';

const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find(
  (p): p is string => Boolean(p && existsSync(p)),
);
const SCREENSHOTS = process.env.SCREENSHOTS === '1';

const MCP_A = 'http://127.0.0.1:9101/mcp';
const MCP_B = 'http://127.0.0.1:9102/mcp';
const PAT_PASSWORD = 'pw-pat-12345';
const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** A stand-in for the third-party app on another loopback origin: its redirect target, its opener page, and a hostile page. */
async function startAppServer() {
  const hits: { url: string; referer?: string }[] = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    hits.push({ url: url.pathname + url.search, referer: req.headers.referer });
    res.setHeader('Content-Type', 'text/html; charset=utf-8');
    res.setHeader('Connection', 'close');
    if (url.pathname === '/opener') {
      const target = url.searchParams.get('review') ?? '';
      res.end(`<!doctype html><title>app</title><button id="open">Connect your local AI</button>
<script>document.getElementById('open').onclick=function(){window.open(${JSON.stringify(target)},'svc-review','popup,width=480,height=760')}</script>`);
    } else if (url.pathname === '/attack') {
      // A page on another origin that knows the request id and even the CSRF token, and posts the form.
      const p = url.searchParams;
      res.end(`<!doctype html><title>evil</title><form id="f" method="post" action="${esc(p.get('action') ?? '')}">
<input name="id" value="${esc(p.get('id') ?? '')}"><input name="_csrf" value="${esc(p.get('csrf') ?? '')}"><input name="approved_role" value="scope_user_user"></form>
<script>document.getElementById('f').submit()</script>`);
    } else {
      res.end('<!doctype html><title>app callback</title><p>back in the app</p>');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    hits,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe.skipIf(!needs(Boolean(CHROMIUM), 'review-page', 'Chromium at /usr/bin/chromium'))('browser review page', () => {
  const clock = testClock();
  let d: TestDaemon;
  let browser: Browser;
  let context: BrowserContext;
  let appServer: Awaited<ReturnType<typeof startAppServer>>;
  let app: Api;
  let admin: Api;
  let pat: Api;
  let a1: string;
  let a2: string;
  let a3: string;
  let notPats: string;

  async function create(overrides: Record<string, unknown> = {}) {
    const res = await app.post('/svc/v1/apps/request-access', createBody(overrides));
    if (res.status !== 201) throw new Error(`create: ${res.status} ${res.text}`);
    return res.body as { id: string; review_url: string };
  }
  async function addInstance(api: Api, name: string, url: string, enabled = true) {
    const res = await api.post('/svc/v1/mcps', { name, url, enabled });
    if (res.status !== 201) throw new Error(`instance: ${res.status} ${res.text}`);
    return res.body.instance.id as string;
  }
  const poll = (id: string, clientId = 'demo-app') => app.get(`/svc/v1/apps/access-requests/${id}?app_client_id=${encodeURIComponent(clientId)}`);

  /** Fills the /ui/login form the way a person would. */
  async function logInThroughForm(page: Page) {
    await page.fill('#username', 'pat');
    await page.fill('#password', PAT_PASSWORD);
    await page.click('button[type=submit]');
  }

  /** Opens a page in the logged-in context and records dialogs and console errors on it. */
  async function openPage() {
    const page = await context.newPage();
    const dialogs: string[] = [];
    const problems: string[] = [];
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(m.text());
    });
    page.on('pageerror', (e) => problems.push(e.message));
    return { page, dialogs, problems };
  }

  beforeAll(async () => {
    d = await startTestDaemon({ clock, config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    app = new Api(d.url);
    admin = await new Api(d.url).login('admin', d.adminPassword);
    pat = await userApi(d.url, admin, 'pat', 'power_user');
    a1 = await addInstance(pat, 'Work notes', MCP_A);
    a2 = await addInstance(pat, 'Personal notes', MCP_A);
    a3 = await addInstance(pat, 'Old archive', MCP_A, false);
    notPats = await addInstance(admin, "Admin's notes", MCP_A);
    appServer = await startAppServer();
    const { chromium } = await import('playwright-core');
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    });
    // The shared reviewer: pat, logged in through the browser form.
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${d.url}/ui/login`);
    await logInThroughForm(page);
    await page.waitForURL(`${d.url}/ui`);
    await page.close();
  });

  afterAll(async () => {
    await browser?.close();
    await appServer?.close();
    await d?.stop();
  });

  it('sends a visitor without a session to the login form and back to the review page', async () => {
    const r = await create();
    const fresh = await browser.newContext();
    try {
      const page = await fresh.newPage();
      const first = await page.goto(r.review_url);
      expect(new URL(page.url()).pathname).toBe('/ui/login');
      expect(new URL(page.url()).searchParams.get('next')).toBe(`/ui/apps/access-requests/review?id=${r.id}`);
      expect(first?.request().redirectedFrom()?.url()).toBe(r.review_url);
      await logInThroughForm(page);
      await page.waitForURL(r.review_url);
      await expect.poll(() => page.locator('h1').textContent()).toContain('wants to use your local AI');
      expect(await page.locator('#review-form').count()).toBe(1);
    } finally {
      await fresh.close();
    }
  });

  it('approves a narrowed role with one of two instances, and the API shows exactly that grant', async () => {
    const r = await create({ requested: { version: '1', mcp_servers: [{ url: MCP_A }, { url: MCP_B }] } });
    const { page, dialogs, problems } = await openPage();
    const res = await page.goto(r.review_url);
    expect(res?.status()).toBe(200);
    expect(res?.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(res?.headers()['content-security-policy']).toContain("form-action 'self'");

    // What the page shows: client id, requested role, both URLs, pat's instances (disabled one not selectable), no one else's.
    expect(await page.locator('.client code').textContent()).toBe('demo-app');
    expect(await page.locator('.hint').first().textContent()).toContain('The app asked for Power User');
    expect(await page.locator('code.url').allTextContents()).toEqual([MCP_A, MCP_B]);
    const boxes = page.locator('input[type=checkbox][name=mcp_0]');
    expect(await boxes.evaluateAll((els) => els.map((e) => (e as HTMLInputElement).value).sort())).toEqual([a1, a2, a3].sort());
    expect(await page.locator(`input[value="${notPats}"]`).count()).toBe(0);
    expect(await page.locator(`input[value="${a3}"]`).isDisabled()).toBe(true);
    expect(await page.locator('input[name=mcp_1]').count()).toBe(0);
    expect(await page.locator('.server').nth(1).textContent()).toContain('You have no instance of this server');
    // Every control has a label; both roles are offered to a power user.
    expect(await page.locator('input[type=checkbox], input[type=radio]').evaluateAll((els) => els.every((e) => (e as HTMLInputElement).labels!.length > 0))).toBe(true);
    expect(await page.locator('input[name=approved_role]').evaluateAll((els) => els.map((e) => (e as HTMLInputElement).value))).toEqual([
      'scope_user_user',
      'scope_user_power_user',
    ]);

    // The countdown starts from the server's 10 minutes and moves.
    const shown = await page.textContent('#time-left');
    expect(shown).toMatch(/^(10:00|9:5\d)$/);
    await expect.poll(() => page.textContent('#time-left'), { timeout: 4000 }).not.toBe(shown);
    expect(await page.textContent('#time-left')).toMatch(/^9:5\d$/);

    // Narrow: User role, only the second instance, by keyboard and by click.
    await page.locator('#role-scope_user_user').focus();
    await page.keyboard.press('Space');
    expect(await page.locator('#role-scope_user_user').isChecked()).toBe(true);
    await page.locator(`input[value="${a1}"]`).setChecked(false);
    await page.locator(`input[value="${a2}"]`).setChecked(true);
    const [posted, decision] = await Promise.all([
      page.waitForResponse((x) => x.url().endsWith('/review/approve')),
      page.waitForResponse((x) => x.url().includes('/review/done?id=')),
      page.click('#approve'),
    ]);
    // post, redirect, get: a reload shows the outcome again and never re-posts
    expect(posted.status()).toBe(303);
    expect(decision.status()).toBe(200);
    expect(await page.locator('#outcome').getAttribute('data-status')).toBe('approved');
    const reloaded = await page.reload();
    expect(reloaded?.status()).toBe(200);
    expect(await page.locator('#outcome').getAttribute('data-status')).toBe('approved');
    expect(await page.locator('h1').textContent()).toBe('Access approved');
    expect(await page.locator('.outcome p').first().textContent()).toContain('as User, with 1 MCP instance');
    // This tab was not opened by a script, so it cannot close itself: the fallback says so.
    await expect.poll(() => page.textContent('#close-note'), { timeout: 5000 }).toContain('could not close itself');
    expect(dialogs).toEqual([]);
    expect(problems).toEqual([]);
    await page.close();

    const p = await poll(r.id);
    expect(p.body).toEqual({
      id: r.id,
      status: 'approved',
      requested_role: 'scope_user_power_user',
      approved_role: 'scope_user_user',
      access_request_scope: `scope_access_request:${r.id}`,
    });
    const listed = await pat.get('/svc/v1/access-requests?status=approved');
    const mine = listed.body.data.find((x: any) => x.id === r.id);
    expect(mine.approved).toEqual({ version: '1', mcp_servers: [{ url: MCP_A, instance_ids: [a2] }] });
    expect(mine.user).toBe('pat');

    // Decided elsewhere: the page now says so, clearly.
    const { page: again } = await openPage();
    const res2 = await again.goto(r.review_url);
    expect(res2?.status()).toBe(409);
    expect(await again.locator('h1').textContent()).toBe('This request was already approved');
    expect(await again.locator('#review-form').count()).toBe(0);
    await again.close();
  });

  it('denies in the redirect flow: 303 to the app with id and status', async () => {
    const { clientId } = await registerClient(admin, {
      name: 'Notes Assistant',
      description: 'Summarises your notes with your local models.',
      redirect_uris: [`${appServer.origin}/cb?from=svc`],
    });
    const r = await create({ app_client_id: clientId, flow_type: 'redirect', redirect_url: `${appServer.origin}/cb?from=svc` });
    const { page } = await openPage();
    const shown = await page.goto(r.review_url);
    // Browsers hold the redirect after a form post to form-action: the app's origin, and only it, is added.
    expect(shown?.headers()['content-security-policy']).toContain(`form-action 'self' ${appServer.origin};`);
    expect(await page.locator('h1').textContent()).toBe('Notes Assistant wants to use your local AI');
    expect(await page.locator('.desc').textContent()).toBe('Summarises your notes with your local models.');
    expect(await page.locator('.client code').textContent()).toBe(clientId);
    expect(await page.locator('.then').textContent()).toContain(`${appServer.origin}/cb?from=svc`);

    const [landing] = await Promise.all([page.waitForNavigation({ url: (u) => u.href.startsWith(`${appServer.origin}/cb`) }), page.click('#deny')]);
    const post = landing!.request().redirectedFrom()!;
    expect(post.method()).toBe('POST');
    expect(post.url()).toBe(`${d.url}/ui/apps/access-requests/review/deny`);
    expect((await post.response())!.status()).toBe(303);
    const landed = new URL(page.url());
    expect(Object.fromEntries(landed.searchParams)).toEqual({ from: 'svc', id: r.id, status: 'denied' });
    expect(appServer.hits.find((h) => h.url.startsWith('/cb'))?.referer).toBeUndefined();
    expect((await poll(r.id, clientId)).body.status).toBe('denied');
    await page.close();
  });

  it('closes the popup by itself after the decision', async () => {
    const r = await create({ requested_role: 'scope_user_user', requested: { version: '1', mcp_servers: [{ url: MCP_A }] } });
    const { page: opener } = await openPage();
    await opener.goto(`${appServer.origin}/opener?review=${encodeURIComponent(r.review_url)}`);
    const [popup] = await Promise.all([context.waitForEvent('page'), opener.click('#open')]);
    await popup.waitForLoadState();
    expect(popup.url()).toBe(r.review_url);
    // A User request: only User is offered.
    expect(await popup.locator('input[name=approved_role]').count()).toBe(1);
    const closed = popup.waitForEvent('close', { timeout: 10_000 });
    await popup.click('#approve');
    await closed;
    expect(popup.isClosed()).toBe(true);
    const p = await poll(r.id);
    expect(p.body).toMatchObject({ status: 'approved', approved_role: 'scope_user_user' });
    const listed = await pat.get('/svc/v1/access-requests?status=approved');
    expect(listed.body.data.find((x: any) => x.id === r.id).approved.mcp_servers).toEqual([{ url: MCP_A, instance_ids: [a1] }]);
    await opener.close();
  });

  it('renders hostile app strings as inert text', async () => {
    const name = '<script>alert("name")</script>';
    const description = `"><img src=x onerror=alert('desc')> <a href="javascript:alert('link')">click</a> javascript:alert(1)`;
    const { clientId } = await registerClient(admin, { name, description });
    const hostileMcp = `http://127.0.0.1:9103/mcp?q="><img src=x onerror=alert('url')>`;
    const registered = await create({ app_client_id: clientId, requested: { version: '1', mcp_servers: [{ url: hostileMcp }] } });
    const hostileId = `"><img/src=x/onerror=alert('id')><script>alert('id2')</script>javascript:alert(3)`;
    const unregistered = await create({ app_client_id: hostileId });

    for (const [r, expected] of [
      [registered, { h1: `${name} wants to use your local AI`, desc: description, client: clientId }],
      [unregistered, { h1: 'An unregistered app wants to use your local AI', desc: null, client: hostileId }],
    ] as const) {
      const { page, dialogs, problems } = await openPage();
      await page.goto(r.review_url);
      expect(await page.locator('h1').textContent()).toBe(expected.h1);
      if (expected.desc) expect(await page.locator('.desc').textContent()).toBe(expected.desc);
      expect(await page.locator('.client code').textContent()).toBe(expected.client);
      expect(await page.locator('img').count()).toBe(0);
      expect(await page.locator('script').count()).toBe(1); // only the page's own, nonce'd
      expect(await page.locator('a[href^="javascript:" i]').count()).toBe(0);
      expect(await page.locator('[onerror]').count()).toBe(0);
      // Still readable on a phone: nothing pushes the page sideways.
      await page.setViewportSize({ width: 360, height: 740 });
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
      await page.waitForTimeout(200);
      expect(dialogs).toEqual([]);
      expect(problems).toEqual([]);
      await page.close();
    }
    // The hostile MCP URL arrives normalised and is shown as text.
    const { page } = await openPage();
    await page.goto(registered.review_url);
    expect(await page.locator('code.url').textContent()).toBe(new URL(hostileMcp).href);
    // The popup's outcome page names the app as text too.
    await page.click('#deny');
    expect(await page.locator('.outcome p').first().textContent()).toBe(`${name} was not given access.`);
    expect(await page.locator('img, [onerror]').count()).toBe(0);
    await page.close();
  });

  it('shows service errors in place, with their status, and keeps the choices', async () => {
    const r = await create({ requested_role: 'scope_user_user', requested: { version: '1', mcp_servers: [{ url: MCP_A }] } });
    const { page } = await openPage();
    await page.goto(r.review_url);
    const submit = async () => {
      const [res] = await Promise.all([page.waitForResponse((x) => x.url().endsWith('/review/approve')), page.click('#approve')]);
      await page.waitForLoadState();
      return res.status();
    };

    // A tampered role above the requested one.
    await page.locator('#role-scope_user_user').evaluate((e) => ((e as HTMLInputElement).value = 'scope_user_power_user'));
    expect(await submit()).toBe(403);
    expect(await page.locator('#error').textContent()).toContain('privilege_escalation');

    // A disabled instance made selectable.
    await page.locator(`input[value="${a3}"]`).evaluate((e) => ((e as HTMLInputElement).disabled = false));
    await page.locator(`input[value="${a3}"]`).check();
    expect(await submit()).toBe(400);
    expect(await page.locator('#error').textContent()).toContain('mcp_instance_disabled');
    // the previous choice is kept: a3 is shown ticked-but-disabled no more; a1 (ticked by default) still is
    expect(await page.locator(`input[value="${a1}"]`).isChecked()).toBe(true);

    // Someone else's instance.
    await page.locator(`input[value="${a2}"]`).evaluate((e, id) => ((e as HTMLInputElement).value = id), notPats);
    await page.locator(`input[value="${notPats}"]`).check();
    expect(await submit()).toBe(403);
    expect(await page.locator('#error').textContent()).toContain('mcp_instance_not_owned');

    // A stale CSRF token.
    await page.locator('input[name=_csrf]').evaluate((e) => ((e as HTMLInputElement).value = 'x'.repeat(32)));
    expect(await submit()).toBe(403);
    expect(await page.locator('#error').textContent()).toContain('stale');

    expect((await poll(r.id)).body.status).toBe('draft');
    // After all that, a proper approval from the same page goes through.
    await page.locator(`input[value="${a2}"]`).setChecked(false);
    expect(await submit()).toBe(303); // then the outcome page, by GET
    await page.waitForURL(/\/review\/done\?id=/);
    expect(await page.locator('#outcome').getAttribute('data-status')).toBe('approved');
    await page.close();
  });

  it('refuses a form posted from another origin, even with the right token', async () => {
    const r = await create({ requested_role: 'scope_user_user' });
    const { page } = await openPage();
    await page.goto(r.review_url);
    const csrf = await page.locator('input[name=_csrf]').getAttribute('value');
    for (const action of ['approve', 'deny']) {
      const target = new URL(`/attack`, appServer.origin);
      target.searchParams.set('action', `${d.url}/ui/apps/access-requests/review/${action}`);
      target.searchParams.set('id', r.id);
      target.searchParams.set('csrf', csrf ?? '');
      const [res] = await Promise.all([page.waitForResponse((x) => x.url().endsWith(`/review/${action}`)), page.goto(target.href)]);
      expect(res.status()).toBe(403);
      await page.waitForLoadState();
      expect(await page.locator('#state').getAttribute('data-state')).toBe('cross_origin');
    }
    expect((await poll(r.id)).body.status).toBe('draft');
    await page.close();
  });

  it('shows a clear page for unknown and expired requests', async () => {
    const { page } = await openPage();
    for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid', '']) {
      const res = await page.goto(`${d.url}/ui/apps/access-requests/review?id=${id}`);
      expect(res?.status()).toBe(404);
      expect(res?.headers()['content-type']).toContain('text/html');
      expect(await page.locator('h1').textContent()).toBe('No such access request');
    }

    const gone = await create();
    clock.advance(10 * 60 * 1000);
    const res = await page.goto(gone.review_url);
    expect(res?.status()).toBe(410);
    expect(res?.headers()['content-type']).toContain('text/html');
    expect(await page.locator('h1').textContent()).toBe('This request has expired');
    expect(await page.locator('#state').textContent()).toContain('Nothing was granted');
    expect(await page.locator('#review-form').count()).toBe(0);
    await page.close();
  });

  it('shows the expired error when a page left open is submitted too late', async () => {
    const r = await create();
    const { page } = await openPage();
    await page.goto(r.review_url);
    clock.advance(10 * 60 * 1000);
    const [res] = await Promise.all([page.waitForResponse((x) => x.url().endsWith('/review/approve')), page.click('#approve')]);
    expect(res.status()).toBe(409);
    expect(await page.locator('h1').textContent()).toBe('This request has expired');
    expect((await poll(r.id)).body.status).toBe('expired');
    await page.close();
  });

  /** A standard OAuth client (an MCP host) that registered itself, and the URL of its sign-in for pat's instance. */
  async function hostSignIn(name = 'Claude Code', scope = 'scope_user_user', resource = `${d.baseUrl}/svc/v1/apps/mcps/${a2}/mcp`) {
    const callback = `${appServer.origin}/callback`;
    const reg = await app.post('/oauth/reg', { client_name: name, redirect_uris: [callback], token_endpoint_auth_method: 'none' });
    expect(reg.status, reg.text).toBe(201);
    const url = new URL(`${d.url}/oauth/auth`);
    const params = {
      client_id: reg.body.client_id,
      response_type: 'code',
      redirect_uri: callback,
      code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
      code_challenge_method: 'S256',
      state: 'xyz',
      scope,
      resource,
    };
    for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
    return { url: url.href, clientId: reg.body.client_id as string, callback };
  }

  it("is the consent step of a standard client's sign-in: the instance it named is ticked, Approve hands the app its code", async () => {
    const host = await hostSignIn();
    const { page, problems } = await openPage();
    await page.goto(host.url);
    await page.waitForURL(/\/ui\/apps\/access-requests\/review\?id=/);
    expect(await page.locator('#client-kind').textContent()).toBe('Registered itself');
    expect(await page.locator('#redirect-origin').textContent()).toContain(appServer.origin);
    expect(await page.locator('h1').textContent()).toContain('Claude Code');
    // the resource named pat's second instance of the URL: that one starts ticked, not the first
    expect(await page.locator(`input[value="${a2}"]`).isChecked()).toBe(true);
    expect(await page.locator(`input[value="${a1}"]`).isChecked()).toBe(false);
    await page.click('#approve');
    await page.waitForURL((u) => u.href.startsWith(host.callback));
    const back = new URL(page.url());
    expect(back.searchParams.get('code')).toBeTruthy();
    expect(back.searchParams.get('state')).toBe('xyz');
    expect(problems).toEqual([]);
    await page.close();
  });

  it('a client that registered itself is badged so in request-access too, its name without invisible characters; an admin\'s client is badged registered', async () => {
    const reg = await app.post('/oauth/reg', { client_name: 'Work\u202eseton\u2066 notes\u200b', redirect_uris: [`${appServer.origin}/callback`], token_endpoint_auth_method: 'none' });
    expect(reg.status, reg.text).toBe(201);
    const selfMade = await create({ app_client_id: reg.body.client_id });
    const { clientId } = await registerClient(admin, { name: 'Work notes' });
    const byAdmin = await create({ app_client_id: clientId });
    const { page, problems } = await openPage();
    await page.goto(selfMade.review_url);
    expect(await page.locator('#client-kind').textContent()).toBe('Registered itself');
    expect(await page.locator('.monogram').getAttribute('class')).toContain('unknown');
    const h1 = (await page.locator('h1').textContent())!;
    expect(h1).toBe('Work\uFFFDseton\uFFFD notes\uFFFD wants to use your local AI');
    for (const c of ['\u202e', '\u2066', '\u200b']) expect(await page.content()).not.toContain(c);
    await page.goto(byAdmin.review_url);
    expect(await page.locator('#client-kind').textContent()).toBe('Registered by your admin');
    expect(await page.locator('.monogram').getAttribute('class')).not.toContain('unknown');
    expect(problems).toEqual([]);
    await page.close();
  });

  it('starts a sign-in for an MCP proxy URL at User even when the host asks for Power User; a sign-in for the whole service at what it asked', async () => {
    const { page } = await openPage();
    const mcpOnly = await hostSignIn('Inspector', 'scope_user_power_user');
    await page.goto(mcpOnly.url);
    await page.waitForURL(/review\?id=/);
    const id = new URL(page.url()).searchParams.get('id')!;
    expect((await pat.get(`/svc/v1/access-requests/${id}/review`)).body).toMatchObject({ requested_role: 'scope_user_power_user', max_grantable_role: 'scope_user_power_user', suggested_role: 'scope_user_user' });
    expect(await page.locator('#role-scope_user_power_user').count()).toBe(1);
    expect(await page.locator('#role-scope_user_user').isChecked()).toBe(true);
    await page.click('#deny');
    await page.waitForURL((u) => u.href.startsWith(mcpOnly.callback));

    const whole = await hostSignIn('Admin tool', 'scope_user_power_user', d.baseUrl);
    await page.goto(whole.url);
    await page.waitForURL(/review\?id=/);
    expect(await page.locator('#role-scope_user_power_user').isChecked()).toBe(true);
    await page.click('#deny');
    await page.waitForURL((u) => u.href.startsWith(whole.callback));
    await page.close();
  });

  it("Deny sends the standard client access_denied; a decision made in another surface carries the sign-in on at a reload", async () => {
    const denied = await hostSignIn('Denied Host');
    const { page } = await openPage();
    await page.goto(denied.url);
    await page.waitForURL(/review\?id=/);
    await page.click('#deny');
    await page.waitForURL((u) => u.href.startsWith(denied.callback));
    expect(new URL(page.url()).searchParams.get('error')).toBe('access_denied');

    const elsewhere = await hostSignIn('Decided in the terminal');
    await page.goto(elsewhere.url);
    await page.waitForURL(/review\?id=/);
    const id = new URL(page.url()).searchParams.get('id')!;
    // as `svc requests approve` does: the instance the host signs in for, ticked by default
    const review = (await pat.get(`/svc/v1/access-requests/${id}/review`)).body;
    const approved = { version: '1', mcp_servers: review.mcp_servers.map((s: { url: string; instances: { id: string; selected: boolean }[] }) => ({ url: s.url, instance_ids: s.instances.filter((i) => i.selected).map((i) => i.id) })) };
    expect((await pat.put(`/svc/v1/access-requests/${id}/approve`, { approved_role: 'scope_user_user', approved })).body.status).toBe('approved');
    await page.reload();
    await page.waitForURL((u) => u.href.startsWith(elsewhere.callback));
    expect(new URL(page.url()).searchParams.get('code')).toBeTruthy();
    await page.close();
  });

  it.runIf(SCREENSHOTS)('takes the README screenshots (SCREENSHOTS=1)', async () => {
    const { clientId } = await registerClient(admin, {
      name: 'Notes Assistant',
      description: 'Summarises your notes and drafts replies with the models on this machine.',
    });
    const r = await create({ app_client_id: clientId, requested: { version: '1', mcp_servers: [{ url: MCP_A }, { url: MCP_B }] } });
    const dir = path.resolve('docs/screenshots');
    await mkdir(dir, { recursive: true });
    const state = await context.storageState();
    for (const [file, viewport, scale] of [
      ['review-desktop.png', { width: 1280, height: 900 }, 1],
      ['review-narrow.png', { width: 390, height: 844 }, 2],
    ] as const) {
      const shot = await browser.newContext({ viewport, deviceScaleFactor: scale, storageState: state });
      const page = await shot.newPage();
      await page.goto(r.review_url);
      await page.screenshot({ path: path.join(dir, file), fullPage: true });
      await shot.close();
    }
    // the consent step of an MCP host's sign-in
    const host = await hostSignIn('Claude Code');
    const shot = await browser.newContext({ viewport: { width: 1280, height: 900 }, storageState: state });
    const page = await shot.newPage();
    await page.goto(host.url);
    await page.waitForURL(/review\?id=/);
    await page.screenshot({ path: path.join(dir, 'review-consent.png'), fullPage: true });
    await shot.close();
  });
});
