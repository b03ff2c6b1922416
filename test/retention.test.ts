import { rm } from 'node:fs/promises';
import * as oidc from 'openid-client';
import { describe, expect, it } from 'vitest';
import { storedOnDisk } from './helpers/store.js';
import { startTestDaemon, tempDir, testClock } from './helpers/daemon.js';
import { Api, createBody, userApi } from './helpers/http.js';
import { authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { sweepOAuthState } from '../src/oauth/adapter.js';

const DAY = 24 * 60 * 60 * 1000;
const stored = (dataDir: string) => storedOnDisk(dataDir);

/** Retention (decisions: Access requests) and intake caps: the store holds the present, not all of history. */
describe('retention', () => {
  it('removes expired, denied and failed requests after 7 days and revoked ones after 30, keeps the rest, across restarts', async () => {
    const dataDir = await tempDir();
    const clock = testClock();
    let d = await startTestDaemon({ dataDir, clock, config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    try {
      const password = d.adminPassword;
      const admin = await new Api(d.url).login('admin', password);
      const make = async (client: string) => (await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ app_client_id: client }))).body.id as string;
      const approved = await make('keep-approved');
      const denied = await make('denied');
      const expired = await make('expired');
      const revoked = await make('revoked');
      const draft = await make('fresh-draft');
      expect((await admin.put(`/svc/v1/access-requests/${approved}/approve`, { approved_role: 'scope_user_user' })).status).toBe(200);
      expect((await admin.put(`/svc/v1/access-requests/${revoked}/approve`, { approved_role: 'scope_user_user' })).status).toBe(200);
      expect((await admin.post(`/svc/v1/access-requests/${denied}/deny`)).status).toBe(200);
      await d.stop();

      clock.advance(6 * DAY);
      d = await startTestDaemon({ dataDir, clock });
      const admin2 = await new Api(d.url).login('admin', password);
      expect((await admin2.post(`/svc/v1/access-requests/${revoked}/revoke`)).status).toBe(200);
      const fresh = (await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ app_client_id: 'young-draft' }))).body.id as string;
      await d.stop();
      // day 6: nothing old enough yet (the expired draft ended 10 minutes after it was made)
      expect(ids(await stored(dataDir))).toEqual(expect.arrayContaining([approved, denied, expired, revoked, draft, fresh]));

      clock.advance(2 * DAY);
      d = await startTestDaemon({ dataDir, clock });
      await d.stop();
      // day 8: the denied and the expired ones (both drafts made on day 0 expired) went; the revoked one (day 6) stays
      let left = ids(await stored(dataDir));
      expect(left).toEqual(expect.arrayContaining([approved, revoked, fresh]));
      expect(left).not.toContain(denied);
      expect(left).not.toContain(expired);
      expect(left).not.toContain(draft);

      clock.advance(29 * DAY);
      d = await startTestDaemon({ dataDir, clock });
      await d.stop();
      left = ids(await stored(dataDir));
      expect(left).toEqual([approved]);
    } finally {
      await d.stop().catch(() => undefined);
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('0 keeps forever', async () => {
    const dataDir = await tempDir();
    const clock = testClock();
    let d = await startTestDaemon({ dataDir, clock, config: { requestRetentionDays: 0, revokedRetentionDays: 0 } });
    try {
      const admin = await new Api(d.url).login('admin', d.adminPassword);
      const id = (await new Api(d.url).post('/svc/v1/apps/request-access', createBody())).body.id;
      expect((await admin.post(`/svc/v1/access-requests/${id}/deny`)).status).toBe(200);
      await d.stop();
      clock.advance(400 * DAY);
      d = await startTestDaemon({ dataDir, clock, config: { requestRetentionDays: 0, revokedRetentionDays: 0 } });
      await d.stop();
      expect(ids(await stored(dataDir))).toEqual([id]);
    } finally {
      await d.stop().catch(() => undefined);
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('keeps a rotated refresh token (marked used, to catch a replay) only until it would have expired, and the grant with the live one', async () => {
    const clock = testClock();
    const d = await startTestDaemon({ clock, config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    try {
      const admin = await new Api(d.url).login('admin', d.adminPassword);
      const alice = await userApi(d.url, admin, 'alice', 'user');
      const { clientId } = await registerClient(admin, { public: true });
      const config = await oidcConfig(d, clientId);
      const approve = async (id: string) => {
        expect((await alice.put(`/svc/v1/access-requests/${id}/approve`, { approved_role: 'scope_user_user' })).status).toBe(200);
      };
      const first = await authorize(config, alice, 'scope_user_user', {}, undefined, approve);
      let token = first.tokens!.refresh_token!;
      const rowsOf = async (model: string) => (await stored(d.dataDir)).oauth_state.filter((r: { model: string }) => r.model === model).length;
      expect(await rowsOf('RefreshToken')).toBe(1);
      for (let i = 0; i < 3; i++) token = (await oidc.refreshTokenGrant(config, token)).refresh_token!;
      expect(await rowsOf('RefreshToken')).toBe(4);
      expect(await rowsOf('Grant')).toBe(1);
      // past a refresh token's life (14 days) the sweep removes every one of them, and the grant
      clock.advance(15 * 24 * 60 * 60 * 1000);
      await sweepOAuthState(d.deps.repos, clock(), 10 * 60 * 1000);
      expect(await rowsOf('RefreshToken')).toBe(0);
      expect(await rowsOf('Grant')).toBe(0);
    } finally {
      await d.stop();
    }
  });
});

describe('bounded intake', () => {
  it('caps undecided drafts per app_client_id and in all with 429, storing nothing; a decision makes room', async () => {
    const d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, maxDraftsPerClient: 3, maxDrafts: 5 } });
    try {
      const admin = await new Api(d.url).login('admin', d.adminPassword);
      const app = new Api(d.url);
      const create = (client: string) => app.post('/svc/v1/apps/request-access', createBody({ app_client_id: client }));
      const a = [];
      for (let i = 0; i < 3; i++) a.push((await create('app-a')).body.id);
      const over = await create('app-a');
      expect(over.status).toBe(429);
      expect(over.body.error).toMatchObject({ type: 'rate_limit_error', code: 'too_many_drafts' });
      expect(over.headers.get('retry-after')).toBeTruthy();
      expect((await create('app-b')).status).toBe(201);
      expect((await create('app-c')).status).toBe(201);
      const full = await create('app-d');
      expect(full.status).toBe(429);
      expect(full.body.error.message).toMatch(/svc already holds 5/);
      expect((await stored(d.dataDir)).access_requests).toHaveLength(5);
      expect((await admin.post(`/svc/v1/access-requests/${a[0]}/deny`)).status).toBe(200);
      expect((await create('app-a')).status).toBe(201);
    } finally {
      await d.stop();
    }
  });

  it('refuses a requested URL longer than 2048 characters, also once normalised', async () => {
    const d = await startTestDaemon();
    try {
      const app = new Api(d.url);
      const long = `http://127.0.0.1:1/${'a'.repeat(2100)}`;
      const grows = `http://127.0.0.1:1/a${' '.repeat(1000)}b`; // 1,022 characters, 3,022 once percent-encoded
      for (const url of [long, grows]) {
        const res = await app.post('/svc/v1/apps/request-access', createBody({ requested: { version: '1', mcp_servers: [{ url }] } }));
        expect(res.status).toBe(400);
        expect(res.body.error.code).toBe('invalid_body');
      }
      expect((await stored(d.dataDir)).access_requests).toHaveLength(0);
    } finally {
      await d.stop();
    }
  });
});

function ids(db: { access_requests: { id: string }[] }): string[] {
  return db.access_requests.map((r) => r.id);
}
