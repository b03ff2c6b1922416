import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, createBody, userApi } from './helpers/http.js';

/** The browser pages as another site or another account would use them. */
describe('browser pages under attack', () => {
  let d: TestDaemon;
  let admin: Api;
  let users = 0;

  beforeAll(async () => {
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
  });
  afterAll(() => d.stop());

  const someone = async (role: 'user' | 'power_user' = 'user') => {
    const name = `person${++users}`;
    return { name, password: `pw-${name}-12345`, api: await userApi(d.url, admin, name, role) };
  };
  const sessionCookie = (api: Api) => api.cookieHeader;

  it('another site cannot log the person out by sending the browser to /ui/logout', async () => {
    const { api } = await someone();
    for (const site of ['cross-site', 'same-site']) {
      const res = await api.get('/ui/logout', { 'Sec-Fetch-Site': site, 'Sec-Fetch-Mode': 'navigate' });
      expect(res.status, site).toBe(403);
      expect((await api.get('/svc/v1/auth/me')).status, site).toBe(200);
    }
    // svc's own "Log out" link (same-origin) and the address typed in (none) log out
    expect((await api.get('/ui/logout', { 'Sec-Fetch-Site': 'same-origin' })).status).toBe(303);
    expect((await api.get('/svc/v1/auth/me')).status).toBe(401);
  });

  it('logging in replaces a session cookie planted before it (no session fixation)', async () => {
    const mallory = await someone();
    const planted = sessionCookie(mallory.api);
    const victim = await someone();
    // the victim's browser carries mallory's cookie (set by a page of the same site), then logs in
    const browser = new Api(d.url);
    const form = await browser.get('/ui/login');
    const csrf = /name="_csrf" value="([^"]+)"/.exec(form.text)![1];
    for (const pair of planted.split('; ')) {
      const at = pair.indexOf('=');
      browser.keepCookie(pair.slice(0, at), pair.slice(at + 1));
    }
    const res = await browser.request('POST', '/ui/login', `username=${victim.name}&password=${encodeURIComponent(victim.password)}&next=%2Fui&_csrf=${encodeURIComponent(csrf)}`, {
      'Content-Type': 'application/x-www-form-urlencoded',
    });
    expect(res.status).toBe(303);
    const sessionOf = (jar: string) => /svc_session=([^;]+)/.exec(jar)?.[1];
    expect(sessionOf(sessionCookie(browser))).toBeTruthy();
    expect(sessionOf(sessionCookie(browser))).not.toBe(sessionOf(planted));
    expect((await browser.get('/svc/v1/auth/me')).body.user.username).toBe(victim.name);
    // the planted id never becomes the victim's session (the login ended it)
    const withPlanted = await new Api(d.url).get('/svc/v1/auth/me', { Cookie: planted.split('; ').filter((c) => c.startsWith('svc_session')).join('; ') });
    expect(withPlanted.status).toBe(401);
  });

  it("another account's decided request shows on the review page as unknown, as the API answers it", async () => {
    const bob = await someone();
    const alice = await someone();
    const created = await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ app_client_id: 'bobs-secret-app', requested_role: 'scope_user_user' }));
    const id = created.body.id as string;
    expect((await bob.api.put(`/svc/v1/access-requests/${id}/approve`, { approved_role: 'scope_user_user' })).status).toBe(200);
    expect((await alice.api.get(`/svc/v1/access-requests/${id}`)).status).toBe(404);
    const page = await alice.api.get(`/ui/apps/access-requests/review?id=${id}`);
    expect(page.status).toBe(404);
    expect(page.text).not.toContain('bobs-secret-app');
    // its approver still sees what became of it
    const own = await bob.api.get(`/ui/apps/access-requests/review?id=${id}`);
    expect(own.status).toBe(409);
    expect(own.text).toContain('bobs-secret-app');
  });
});
