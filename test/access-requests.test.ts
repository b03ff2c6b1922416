import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, testClock, type TestDaemon } from './helpers/daemon.js';
import { Api, createBody, expectErrorShape, userApi } from './helpers/http.js';

const MCP_A = 'http://127.0.0.1:9101/mcp';
const MCP_B = 'http://127.0.0.1:9102/mcp';

describe('access-request flow over HTTP', () => {
  let d: TestDaemon;
  const clock = testClock();
  let app: Api;
  let admin: Api;
  let power: Api;
  let plain: Api;
  let manager: Api;

  beforeAll(async () => {
    d = await startTestDaemon({ clock, config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    app = new Api(d.url);
    admin = await new Api(d.url).login('admin', d.adminPassword);
    power = await userApi(d.url, admin, 'pat', 'power_user');
    plain = await userApi(d.url, admin, 'uma', 'user');
    manager = await userApi(d.url, admin, 'max', 'manager');
  });
  afterAll(() => d.stop());

  async function create(overrides: Record<string, unknown> = {}) {
    const res = await app.post('/svc/v1/apps/request-access', createBody(overrides));
    expect(res.status).toBe(201);
    return res.body as { id: string; status: string; review_url: string };
  }
  async function addInstance(api: Api, name: string, url: string, enabled = true) {
    const res = await api.post('/svc/v1/mcps', { name, url, enabled });
    expect(res.status).toBe(201);
    return res.body.instance.id as string;
  }
  const poll = (id: string, clientId = 'demo-app') => app.get(`/svc/v1/apps/access-requests/${id}?app_client_id=${encodeURIComponent(clientId)}`);

  it('creates a draft with a review URL built from the base URL', async () => {
    const r = await create();
    expect(r.status).toBe('draft');
    expect(r.review_url).toBe(`${d.baseUrl}/ui/apps/access-requests/review?id=${r.id}`);
    const p = await poll(r.id);
    expect(p.status).toBe(200);
    expect(p.body).toEqual({ id: r.id, status: 'draft', requested_role: 'scope_user_power_user' });
  });

  it('answers 404 to another client and to unknown ids, in the error shape', async () => {
    const r = await create();
    for (const res of [await poll(r.id, 'other-app'), await poll('00000000-0000-4000-8000-000000000000'), await poll('not-a-uuid')]) {
      expect(res.status).toBe(404);
      expect(res.body.error).toMatchObject({ type: 'not_found_error', code: 'not_found' });
    }
    const missing = await app.get(`/svc/v1/apps/access-requests/${r.id}`);
    expect(missing.status).toBe(400);
    expect(missing.body.error.code).toBe('invalid_body');
  });

  it('refuses malformed creates with the contract codes', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ flow_type: 'redirect' }, 'missing_redirect_url'],
      [{ flow_type: 'redirect', redirect_url: 'javascript:alert(1)' }, 'invalid_redirect_url'],
      [{ flow_type: 'redirect', redirect_url: 'https://user:pw@app.example/cb' }, 'invalid_redirect_url'],
      [{ flow_type: 'redirect', redirect_url: 'https://app.example/cb#frag' }, 'invalid_redirect_url'],
      [{ requested: { version: 2 } }, 'unsupported_version'],
      [{ requested: { mcp_servers: [] } }, 'unsupported_version'],
      [{ requested_role: 'scope_user_admin' }, 'invalid_body'],
      [{ flow_type: 'sideways' }, 'invalid_body'],
      [{ app_client_id: '' }, 'invalid_body'],
      [{ requested: { version: '1', mcp_servers: [{ url: 'ftp://x' }] } }, 'invalid_body'],
      [{ requested: { version: '1', mcp_servers: Array.from({ length: 33 }, (_, i) => ({ url: `http://127.0.0.1/${i}` })) } }, 'invalid_body'],
    ];
    for (const [overrides, code] of cases) {
      const res = await app.post('/svc/v1/apps/request-access', createBody(overrides));
      expect(res.status, JSON.stringify(overrides)).toBe(400);
      expect(expectErrorShape(res.body)).toBe(true);
      expect(res.body.error.code, JSON.stringify(overrides)).toBe(code);
    }
    const notJson = await app.post('/svc/v1/apps/request-access', '{"app_client_id":', { 'Content-Type': 'application/json' });
    expect(notJson.status).toBe(400);
    expect(notJson.body.error.code).toBe('invalid_body');
  });

  it('requires a session for review, approve, deny, revoke and list', async () => {
    const r = await create();
    const anon = new Api(d.url);
    for (const res of [
      await anon.get(`/svc/v1/access-requests/${r.id}/review`),
      await anon.put(`/svc/v1/access-requests/${r.id}/approve`, { approved_role: 'scope_user_user' }),
      await anon.post(`/svc/v1/access-requests/${r.id}/deny`),
      await anon.post(`/svc/v1/access-requests/${r.id}/revoke`),
      await anon.get('/svc/v1/access-requests'),
    ]) {
      expect(res.status).toBe(401);
      expect(res.body.error).toMatchObject({ type: 'authentication_error', code: 'login_required' });
    }
  });

  it('reviews with the reviewer\'s own instances, approves a downgrade with a subset, and the poll shows exactly that grant', async () => {
    // a URL of its own: other tests add instances of the same user at the shared ones
    const MCP_A = 'http://127.0.0.1:9/review-only/a';
    const MCP_B = 'http://127.0.0.1:9/review-only/b';
    const a1 = await addInstance(power, 'files one', MCP_A);
    const a2 = await addInstance(power, 'files two', MCP_A);
    const othersA = await addInstance(plain, 'not yours', MCP_A);
    const r = await create({ requested: { version: '1', mcp_servers: [{ url: MCP_A }, { url: MCP_B }] } });

    const review = await power.get(`/svc/v1/access-requests/${r.id}/review`);
    expect(review.status).toBe(200);
    expect(review.body).toMatchObject({
      id: r.id,
      app_client_id: 'demo-app',
      flow_type: 'popup',
      status: 'draft',
      requested_role: 'scope_user_power_user',
      max_grantable_role: 'scope_user_power_user',
    });
    expect(review.body.expires_in_seconds).toBe(600);
    const byUrl = Object.fromEntries(review.body.mcp_servers.map((s: any) => [s.url, s.instances.map((i: any) => i.id)]));
    expect(byUrl[MCP_A].sort()).toEqual([a1, a2].sort());
    expect(byUrl[MCP_A]).not.toContain(othersA);
    expect(byUrl[MCP_B]).toEqual([]);

    const approved = await power.put(`/svc/v1/access-requests/${r.id}/approve`, {
      approved_role: 'scope_user_user',
      approved: { version: '1', mcp_servers: [{ url: MCP_A, instance_ids: [a2] }] },
    });
    expect(approved.status).toBe(200);
    expect(approved.body).toEqual({
      id: r.id,
      status: 'approved',
      approved_role: 'scope_user_user',
      access_request_scope: `scope_access_request:${r.id}`,
      flow_type: 'popup',
    });
    const p = await poll(r.id);
    expect(p.body).toEqual({
      id: r.id,
      status: 'approved',
      requested_role: 'scope_user_power_user',
      approved_role: 'scope_user_user',
      access_request_scope: `scope_access_request:${r.id}`,
    });
    const listed = await power.get('/svc/v1/access-requests?status=approved');
    const mine = listed.body.data.find((x: any) => x.id === r.id);
    expect(mine.approved).toEqual({ version: '1', mcp_servers: [{ url: MCP_A, instance_ids: [a2] }] });
    expect(mine.user).toBe('pat');

    const again = await power.post(`/svc/v1/access-requests/${r.id}/deny`);
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ type: 'conflict_error', code: 'already_processed' });
  });

  it('denies in the redirect flow with id and status on the redirect URL', async () => {
    const r = await create({ flow_type: 'redirect', redirect_url: 'https://app.example/cb?keep=1' });
    const res = await plain.post(`/svc/v1/access-requests/${r.id}/deny`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ id: r.id, status: 'denied', flow_type: 'redirect', redirect_url: `https://app.example/cb?keep=1&id=${r.id}&status=denied` });
    expect((await poll(r.id)).body).toEqual({ id: r.id, status: 'denied', requested_role: 'scope_user_power_user' });
  });

  it('revokes an approved grant, by its approver or an admin only', async () => {
    const r1 = await create({ requested_role: 'scope_user_user' });
    await plain.put(`/svc/v1/access-requests/${r1.id}/approve`, { approved_role: 'scope_user_user' });
    const byOther = await power.post(`/svc/v1/access-requests/${r1.id}/revoke`);
    expect(byOther.status).toBe(404);
    const byManager = await manager.post(`/svc/v1/access-requests/${r1.id}/revoke`);
    expect(byManager.status).toBe(404);
    const res = await plain.post(`/svc/v1/access-requests/${r1.id}/revoke`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ id: r1.id, status: 'revoked' });
    expect((await poll(r1.id)).body.status).toBe('revoked');
    expect((await poll(r1.id)).body.access_request_scope).toBeUndefined();
    const twice = await plain.post(`/svc/v1/access-requests/${r1.id}/revoke`);
    expect(twice.status).toBe(409);
    expect(twice.body.error.code).toBe('not_approved');

    const r2 = await create({ requested_role: 'scope_user_user' });
    await plain.put(`/svc/v1/access-requests/${r2.id}/approve`, { approved_role: 'scope_user_user' });
    expect((await admin.post(`/svc/v1/access-requests/${r2.id}/revoke`)).status).toBe(200);

    const draft = await create();
    const early = await admin.post(`/svc/v1/access-requests/${draft.id}/revoke`);
    expect(early.status).toBe(409);
    expect(early.body.error.code).toBe('not_approved');
  });

  it('expires a draft after 10 minutes on every read and write path', async () => {
    const r = await create();
    clock.advance(10 * 60 * 1000 - 1000);
    expect((await poll(r.id)).body.status).toBe('draft');
    clock.advance(1000);
    expect((await poll(r.id)).body.status).toBe('expired');
    const listed = await plain.get('/svc/v1/access-requests?status=expired');
    expect(listed.body.data.map((x: any) => x.id)).toContain(r.id);
    const review = await plain.get(`/svc/v1/access-requests/${r.id}/review`);
    expect(review.status).toBe(200);
    expect(review.body).toMatchObject({ status: 'expired', expires_in_seconds: 0 });

    const r2 = await create();
    clock.advance(10 * 60 * 1000);
    const approve = await admin.put(`/svc/v1/access-requests/${r2.id}/approve`, { approved_role: 'scope_user_user' });
    expect(approve.status).toBe(409);
    expect(approve.body.error).toMatchObject({ type: 'conflict_error', code: 'expired' });
    const deny = await admin.post(`/svc/v1/access-requests/${r2.id}/deny`);
    expect(deny.status).toBe(409);
    expect(deny.body.error.code).toBe('expired');
    expect((await poll(r2.id)).body.status).toBe('expired');
  });

  describe('privilege rules', () => {
    it('refuses a role above the requested one', async () => {
      const r = await create({ requested_role: 'scope_user_user' });
      const res = await admin.put(`/svc/v1/access-requests/${r.id}/approve`, { approved_role: 'scope_user_power_user' });
      expect(res.status).toBe(403);
      expect(res.body.error).toMatchObject({ type: 'forbidden_error', code: 'privilege_escalation' });
      expect((await poll(r.id)).body.status).toBe('draft');
    });

    it("refuses a role above the reviewer's own, and caps max_grantable_role", async () => {
      const r = await create({ requested_role: 'scope_user_power_user' });
      const review = await plain.get(`/svc/v1/access-requests/${r.id}/review`);
      expect(review.body.max_grantable_role).toBe('scope_user_user');
      const res = await plain.put(`/svc/v1/access-requests/${r.id}/approve`, { approved_role: 'scope_user_power_user' });
      expect(res.status).toBe(403);
      expect(res.body.error.code).toBe('privilege_escalation');
      const ok = await plain.put(`/svc/v1/access-requests/${r.id}/approve`, { approved_role: 'scope_user_user' });
      expect(ok.status).toBe(200);
    });

    it('never grants manager or admin roles', async () => {
      const r = await create();
      for (const role of ['scope_user_manager', 'scope_user_admin', 'admin']) {
        const res = await admin.put(`/svc/v1/access-requests/${r.id}/approve`, { approved_role: role });
        expect(res.status).toBe(400);
        expect(res.body.error.code).toBe('invalid_body');
      }
    });

    it("refuses another user's instance, an instance of another URL, and a disabled one", async () => {
      const mineA = await addInstance(power, 'mine', MCP_A);
      const mineB = await addInstance(power, 'mine b', MCP_B);
      const disabled = await addInstance(power, 'off', MCP_A, false);
      const theirs = await addInstance(plain, 'theirs', MCP_A);
      const r = await create({ requested: { version: '1', mcp_servers: [{ url: MCP_A }, { url: MCP_B }] } });
      const approve = (url: string, ids: string[]) =>
        power.put(`/svc/v1/access-requests/${r.id}/approve`, { approved_role: 'scope_user_user', approved: { version: '1', mcp_servers: [{ url, instance_ids: ids }] } });

      const foreign = await approve(MCP_A, [mineA, theirs]);
      expect(foreign.status).toBe(403);
      expect(foreign.body.error.code).toBe('mcp_instance_not_owned');
      const wrongUrl = await approve(MCP_A, [mineB]);
      expect(wrongUrl.status).toBe(403);
      expect(wrongUrl.body.error.code).toBe('mcp_instance_not_owned');
      const missing = await approve(MCP_A, ['00000000-0000-4000-8000-000000000000']);
      expect(missing.body.error.code).toBe('mcp_instance_not_owned');
      const off = await approve(MCP_A, [disabled]);
      expect(off.status).toBe(400);
      expect(off.body.error.code).toBe('mcp_instance_disabled');
      const notRequested = await approve('http://127.0.0.1:9999/other', [mineA]);
      expect(notRequested.status).toBe(400);
      expect(notRequested.body.error.code).toBe('invalid_body');
      expect((await poll(r.id)).body.status).toBe('draft');

      const ok = await approve(MCP_A, [mineA]);
      expect(ok.status).toBe(200);
    });
  });

  it('lets exactly one of many concurrent decisions win', async () => {
    const r = await create({ requested_role: 'scope_user_user' });
    const reviewers = [admin, power, plain, manager];
    const attempts = Array.from({ length: 24 }, (_, i) => {
      const who = reviewers[i % reviewers.length];
      return i % 2 === 0
        ? who.put(`/svc/v1/access-requests/${r.id}/approve`, { approved_role: 'scope_user_user' })
        : who.post(`/svc/v1/access-requests/${r.id}/deny`);
    });
    const results = await Promise.all(attempts);
    const winners = results.filter((x) => x.status === 200);
    const losers = results.filter((x) => x.status === 409);
    expect(winners).toHaveLength(1);
    expect(losers).toHaveLength(results.length - 1);
    for (const l of losers) expect(l.body.error.code).toBe('already_processed');
    expect((await poll(r.id)).body.status).toBe(winners[0].body.status);
  });

  it('shows drafts to every user and decided requests only to their approver and admins', async () => {
    const r = await create();
    await power.put(`/svc/v1/access-requests/${r.id}/approve`, { approved_role: 'scope_user_user' });
    const draft = await create();
    const seen = async (api: Api) => (await api.get('/svc/v1/access-requests')).body.data.map((x: any) => x.id);
    expect(await seen(plain)).toContain(draft.id);
    expect(await seen(plain)).not.toContain(r.id);
    expect(await seen(power)).toContain(r.id);
    expect(await seen(admin)).toContain(r.id);
    const bad = await plain.get('/svc/v1/access-requests?status=bogus');
    expect(bad.status).toBe(400);
  });

  it('rate-limits request creation per app_client_id', async () => {
    const limited = await startTestDaemon({ config: { rateLimitClient: 3, rateLimitAddress: 0 } });
    try {
      const a = new Api(limited.url);
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) statuses.push((await a.post('/svc/v1/apps/request-access', createBody({ app_client_id: 'noisy' }))).status);
      expect(statuses).toEqual([201, 201, 201, 429, 429]);
      const res = await a.post('/svc/v1/apps/request-access', createBody({ app_client_id: 'noisy' }));
      expect(res.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited' });
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      expect((await a.post('/svc/v1/apps/request-access', createBody({ app_client_id: 'quiet' }))).status).toBe(201);
    } finally {
      await limited.stop();
    }
  });

  it('rate-limits per address', async () => {
    const limited = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 2 } });
    try {
      const a = new Api(limited.url);
      const s1 = (await a.post('/svc/v1/apps/request-access', createBody({ app_client_id: 'a' }))).status;
      const s2 = (await a.post('/svc/v1/apps/request-access', createBody({ app_client_id: 'b' }))).status;
      const s3 = (await a.post('/svc/v1/apps/request-access', createBody({ app_client_id: 'c' }))).status;
      expect([s1, s2, s3]).toEqual([201, 201, 429]);
    } finally {
      await limited.stop();
    }
  });
});
