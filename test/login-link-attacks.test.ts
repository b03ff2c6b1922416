import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from './helpers/consent.js';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';

/**
 * The one-time links of `svc open` as an attacker would use them: another account's link pushed
 * into the person's browser by a page of another site (login CSRF), and a link that outlives the
 * session that made it (a logout, a password change).
 */
describe('login links under attack', () => {
  let d: TestDaemon;
  let admin: Api;
  let users = 0;

  beforeAll(async () => {
    d = await startTestDaemon();
    admin = await new Api(d.url).login('admin', d.adminPassword);
  });
  afterAll(() => d.stop());

  /** What `svc open --print` gives the account of `as`. */
  const linkOf = async (as: Api) => {
    const res = await as.post('/svc/v1/auth/login-links');
    expect(res.status, res.text).toBe(201);
    return res.body.url as string;
  };
  const pathOf = (url: string) => url.slice(d.baseUrl.length);
  /** An account of its own for each test (the tests run in any order), signed in. */
  const someone = async () => {
    const name = `mallory${++users}`;
    return { name, password: `pw-${name}-12345`, api: await userApi(d.url, admin, name, 'user') };
  };

  it('another site cannot sign the person in as another account with its link (login CSRF)', async () => {
    const mallory = await someone();
    for (const site of ['cross-site', 'same-site']) {
      const victim = await new Api(d.url).login('admin', d.adminPassword);
      // mallory's own link, opened in the victim's browser by a page of another site
      const link = await linkOf(mallory.api);
      const res = await victim.get(pathOf(link), { 'Sec-Fetch-Site': site, 'Sec-Fetch-Mode': 'navigate', 'Sec-Fetch-Dest': 'document' });
      expect(res.status, site).toBe(403);
      expect(res.headers.getSetCookie().some((c) => /^svc_session=[^;]/.test(c)), site).toBe(false);
      expect((await victim.get('/svc/v1/auth/me')).body.user.username, site).toBe('admin');
      // refused without being spent: opened as svc open opens it, it still works
      const own = new Api(d.url);
      expect((await own.get(pathOf(link), { 'Sec-Fetch-Site': 'none' })).status).toBe(303);
      expect((await own.get('/svc/v1/auth/me')).body.user.username).toBe(mallory.name);
    }
    // a browser that sends no Sec-Fetch-Site: a Referer of another origin says the same
    const victim = await new Api(d.url).login('admin', d.adminPassword);
    const link = await linkOf(mallory.api);
    expect((await victim.get(pathOf(link), { Referer: 'http://evil.example/cats' })).status).toBe(403);
    expect((await victim.get('/svc/v1/auth/me')).body.user.username).toBe('admin');
    expect((await victim.get(pathOf(link), { Referer: `${d.baseUrl}/ui` })).status).toBe(303);
  });

  it('a link made by a session that then logged out signs nobody in', async () => {
    const { api: session } = await someone();
    const link = await linkOf(session);
    expect((await session.post('/svc/v1/auth/logout')).status).toBe(204);
    const browser = new Api(d.url);
    expect((await browser.get(pathOf(link))).status).toBe(400);
    expect((await browser.get('/svc/v1/auth/me')).status).toBe(401);
  });

  it('a link made before a password change signs nobody in (the change ends every session, and its links)', async () => {
    // someone holding mallory's session keeps minting links; she changes her password
    const mallory = await someone();
    const thief = await new Api(d.url).login(mallory.name, mallory.password);
    const link = await linkOf(thief);
    expect((await admin.put(`/svc/v1/users/${mallory.name}/password`, { password: 'a-new-password-67890' })).status).toBe(204);
    expect((await thief.get('/svc/v1/auth/me')).status).toBe(401);
    const browser = new Api(d.url);
    expect((await browser.get(pathOf(link))).status).toBe(400);
    expect((await browser.get('/svc/v1/auth/me')).status).toBe(401);
  });

  describe('in Chromium', () => {
    let browser: Browser;
    let attacker: http.Server;
    let attackerUrl = '';
    let planted = '';

    beforeAll(async () => {
      browser = await launchChromium();
      // a page on another port of this machine (same site, another origin) that sends its
      // visitor to the link it holds
      attacker = http.createServer((_req, res) => {
        res.setHeader('Content-Type', 'text/html');
        res.end(`<!doctype html><title>cats</title><script>location.href=${JSON.stringify(planted)}</script>`);
      });
      await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
      attackerUrl = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}/`;
    }, 60_000);
    afterAll(async () => {
      await browser?.close();
      await new Promise((resolve) => attacker?.close(resolve));
    });

    it('a page that navigates the browser to another account\'s link does not sign it in; the link opened directly does', { timeout: 60_000 }, async () => {
      const mallory = await someone();
      const context = await browser.newContext();
      const page = await context.newPage();
      // the person is signed in as admin
      await page.goto(`${d.baseUrl}/ui/login`);
      await page.fill('#username', 'admin');
      await page.fill('#password', d.adminPassword);
      await Promise.all([page.waitForURL(`${d.baseUrl}/ui`), page.click('button[type=submit]')]);
      planted = await linkOf(mallory.api);
      await page.goto(attackerUrl);
      await page.waitForURL((u) => u.href.startsWith(d.baseUrl), { timeout: 10_000 });
      await page.waitForLoadState();
      await page.goto(`${d.baseUrl}/ui`);
      expect(await page.locator('body').innerText()).toContain('Signed in as admin');
      // the same kind of link, opened as `svc open` opens it (Sec-Fetch-Site: none), signs in
      const fresh = await context.newPage();
      await fresh.goto(await linkOf(mallory.api));
      expect(fresh.url()).toBe(`${d.baseUrl}/ui`);
      expect(await fresh.locator('body').innerText()).toContain(`Signed in as ${mallory.name}`);
      await context.close();
    });
  });
});
