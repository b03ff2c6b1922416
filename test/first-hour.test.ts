import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, createBody } from './helpers/http.js';

/** Issue 16's polish items that a person notices in the browser pages. */
describe('what a person reads in the pages', () => {
  let d: TestDaemon;
  let admin: Api;
  beforeAll(async () => {
    d = await startTestDaemon();
    admin = await new Api(d.url).login('admin', d.adminPassword);
  });
  afterAll(() => d.stop());

  it('the home page names roles as people do (item 11); JSON keeps the wire values', async () => {
    const created = await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ requested_role: 'scope_user_power_user' }));
    const home = await admin.get('/ui');
    expect(home.status).toBe(200);
    expect(home.text).toContain('asks for Power User');
    expect(home.text).toContain('(Admin)');
    expect(home.text).not.toContain('scope_user_power_user');
    const review = await admin.get(`/svc/v1/access-requests/${created.body.id}/review`);
    expect(review.body.requested_role).toBe('scope_user_power_user');
  });

  it('every page names an icon, so no browser asks for /favicon.ico and logs a 404 (item 12)', async () => {
    for (const page of ['/ui', '/ui/apps/access-requests/review?id=nothing']) {
      const res = await admin.get(page);
      expect(res.text, page).toContain('<link rel="icon" href="data:,">');
    }
  });
});
