/**
 * A team server end to end: real daemons (replicas), each with a data dir of its own, on one
 * real PostgreSQL database, behind a round-robin loopback balancer that sends each request to
 * the next replica. What one replica does, the other sees at once: the first admin, sessions,
 * access requests, revokes; and while the database is down they answer 503 and recover by
 * themselves.
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import * as oidc from 'openid-client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Secret } from '../src/config.js';
import { replicaOf } from '../src/models/downloads.js';
import { localDay } from '../src/activity/log.js';
import { MasterKeyError } from '../src/store/master-key.js';
import type { PullRecord } from '../src/store/records.js';
import { cleanEnv, closedPort, runSvc, serveExpectingFailure, startServe } from './helpers/cli.js';
import { startTestDaemon, tempDir, testClock, type TestDaemon } from './helpers/daemon.js';
import { startTcpProxy } from './helpers/tcp-proxy.js';
import { startUpstream } from './helpers/upstream.js';
import { startRiskyServer } from './helpers/risky-mcp.js';
import { startMcpServer } from './helpers/mcp-servers.js';
import { eventually } from './helpers/wait.js';
import { Api, createBody } from './helpers/http.js';
import { authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { postgresBinDir } from './helpers/postgres.js';
import { type Team, useTeamServer } from './helpers/team.js';
import { needs } from './helpers/requirements.js';

const execFileAsync = promisify(execFile);
const available = needs(postgresBinDir() !== null, 'team server (replicas on PostgreSQL)', "PostgreSQL's server (initdb, pg_ctl)");


describe.skipIf(!available)('a team server: replicas on one PostgreSQL behind a balancer', () => {
  const { pg, teamKey, running, replica, startTeam } = useTeamServer();

  /** Which replica answered a control-plane call. */
  const instanceOf = (res: { headers: Headers }) => res.headers.get('x-svc-instance');

  it('replicas starting together on an empty database make exactly one admin, and exactly one prints its password', async () => {
    const team = await startTeam(3);
    const passwords = team.replicas.map((r) => r.initialAdminPassword).filter(Boolean);
    expect(passwords).toHaveLength(1);
    const printed = team.replicas.flatMap((r) => r.notices).filter((line) => line.includes(passwords[0]!));
    expect(printed).toHaveLength(1);
    expect(team.replicas.flatMap((r) => r.notices).filter((line) => /Created the user/.test(line))).toHaveLength(1);
    expect((await team.replicas[0].deps.repos.users.list()).map((u) => u.username)).toEqual(['admin']);
    // the password works on every replica
    for (let i = 0; i < 3; i++) expect((await team.api().post('/svc/v1/auth/login', { username: 'admin', password: team.password })).status).toBe(200);
    expect(new Set(team.balancer.history).size).toBe(3);
    // Each replica makes the ID-token key when its authorization server is first built; built on
    // all three at once, they still publish one set of keys.
    const published = await Promise.all(team.replicas.map(async (r) => (await (await fetch(`${r.url}/oauth/jwks`)).json()) as { keys: { kid: string; alg: string }[] }));
    expect(published[0].keys.map((k) => k.alg).sort()).toEqual(['ES256', 'RS256']);
    for (const p of published) expect(p.keys.map((k) => k.kid).sort()).toEqual(published[0].keys.map((k) => k.kid).sort());
  });

  it('a session made on one replica works on the others (no sticky sessions)', async () => {
    const team = await startTeam();
    const admin = team.api();
    const login = await admin.post('/svc/v1/auth/login', { username: 'admin', password: team.password });
    expect(login.status).toBe(200);
    const seen = new Set([instanceOf(login)]);
    for (let i = 0; i < 4; i++) {
      const me = await admin.get('/svc/v1/auth/me');
      expect(me.status).toBe(200);
      expect(me.body.user.username).toBe('admin');
      seen.add(instanceOf(me));
    }
    expect(seen.size).toBe(2);
    // and a logout on one ends it on the other
    const out = await admin.post('/svc/v1/auth/logout');
    const after = await admin.request('GET', '/svc/v1/auth/me', undefined, { Cookie: login.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ') });
    expect(instanceOf(after)).not.toBe(instanceOf(out));
    expect(after.status).toBe(401);
  });

  it('a `svc open` link made on one replica signs a browser in through the other, once on any replica', async () => {
    const team = await startTeam();
    const admin = await team.api().login('admin', team.password);
    const made = await admin.post('/svc/v1/auth/login-links');
    expect(made.status).toBe(201);
    const path = new URL(made.body.url).pathname + new URL(made.body.url).search;
    const madeOn = team.balancer.history.at(-1);
    const browser = team.api();
    const used = await browser.get(path);
    expect(team.balancer.history.at(-1)).not.toBe(madeOn);
    expect(used.status).toBe(303);
    expect((await browser.get('/svc/v1/auth/me')).body.user.username).toBe('admin');
    // used once through either replica, it works on neither again
    for (let i = 0; i < 2; i++) expect((await team.api().get(path)).status).toBe(400);
    expect(new Set(team.balancer.history.slice(-2)).size).toBe(2);
    // two browsers using one link at once, one on each replica: exactly one is signed in
    const raced = new URL((await admin.post('/svc/v1/auth/login-links')).body.url);
    const answers = await Promise.all([0, 1].map(() => team.api().get(raced.pathname + raced.search)));
    expect(answers.map((a) => a.status).sort()).toEqual([303, 400]);
  });

  it('an access request created on one replica is approved on the other, and its app sees the grant on either', async () => {
    const team = await startTeam();
    const admin = await team.api().login('admin', team.password);
    const app = team.api();
    const created = await app.post('/svc/v1/apps/request-access', createBody({ requested_role: 'scope_user_user' }));
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const approved = await admin.put(`/svc/v1/access-requests/${id}/approve`, { approved_role: 'scope_user_user', approved: { version: '1', mcp_servers: [] } });
    expect(approved.status).toBe(200);
    const [createdOn, approvedOn] = team.balancer.history.slice(-2);
    expect(createdOn).not.toBe(approvedOn);
    for (let i = 0; i < 2; i++) {
      const poll = await app.get(`/svc/v1/apps/access-requests/${id}?app_client_id=demo-app`);
      expect(poll.status).toBe(200);
      expect(poll.body.status).toBe('approved');
    }
  });

  it('a revoke answered by one replica refuses the very next call on the other', async () => {
    const team = await startTeam();
    const admin = await team.api().login('admin', team.password);
    const key = await admin.post('/svc/v1/keys', { name: 'team key' });
    expect(key.status).toBe(201);
    const app = team.api();
    const bearer = { Authorization: `Bearer ${key.body.key}` };
    for (let i = 0; i < 2; i++) expect((await app.get('/v1/models', bearer)).status).toBe(200);
    const revoked = await admin.post(`/svc/v1/keys/${key.body.id}/revoke`);
    expect(revoked.status).toBe(200);
    const refused = await app.get('/v1/models', bearer);
    const [revokedOn, refusedOn] = team.balancer.history.slice(-2);
    expect(refusedOn).not.toBe(revokedOn);
    expect(refused.status).toBe(401);
    expect((await app.get('/v1/models', bearer)).status).toBe(401);
  });

  it('login backoff counts the failures of every replica: guesses spread over both are slowed as on one', async () => {
    // one clock for both replicas, standing still: the delay is decided by the count, not by how fast the test runs
    const clock = testClock();
    const team = await startTeam(2, undefined, clock);
    const guess = () => team.api().post('/svc/v1/auth/login', { username: 'admin', password: 'not-the-password' });
    for (let i = 0; i < 5; i++) expect((await guess()).status).toBe(401);
    expect(new Set(team.balancer.history).size).toBe(2);
    // the fifth failure (on either replica) blocks the pair for a second, on both
    for (let i = 0; i < 2; i++) {
      const blocked = await team.api().post('/svc/v1/auth/login', { username: 'admin', password: team.password });
      expect(blocked.status).toBe(429);
      expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    }
    clock.advance(1_001);
    expect((await team.api().post('/svc/v1/auth/login', { username: 'admin', password: team.password })).status).toBe(200);
  });

  /** An approved grant of a new app (User, with `mcp_servers`), its limits set, and an OAuth token for it through the balancer. */
  async function teamGrant(team: Team, admin: Api, opts: { limits?: Record<string, unknown>; mcp_servers?: { url: string; instance_ids: string[] }[] } = {}) {
    const { clientId, secret } = await registerClient(admin);
    const created = await team.api().post('/svc/v1/apps/request-access', {
      app_client_id: clientId,
      flow_type: 'popup',
      requested_role: 'scope_user_user',
      requested: { version: '1', mcp_servers: (opts.mcp_servers ?? []).map((m) => ({ url: m.url })) },
    });
    expect(created.status, created.text).toBe(201);
    const approved = await admin.put(`/svc/v1/access-requests/${created.body.id}/approve`, {
      approved_role: 'scope_user_user',
      approved: { version: '1', mcp_servers: opts.mcp_servers ?? [] },
      ...(opts.limits ? { limits: opts.limits } : {}),
    });
    expect(approved.status, approved.text).toBe(200);
    const config = await oidcConfig({ baseUrl: team.balancer.url } as TestDaemon, clientId, secret);
    const { tokens } = await authorize(config, admin, approved.body.access_request_scope);
    return { id: created.body.id as string, bearer: { Authorization: `Bearer ${tokens!.access_token}` } };
  }

  it("a grant's calls a minute are counted by every replica together: spread over both, the budget is the approver's, not twice it", async () => {
    const team = await startTeam();
    const admin = await team.api().login('admin', team.password);
    const g = await teamGrant(team, admin, { limits: { requests_per_minute: 3 } });
    const statuses: number[] = [];
    const servedBy: string[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await team.api().get('/v1/models', g.bearer);
      statuses.push(res.status);
      servedBy.push(team.balancer.history[team.balancer.history.length - 1]);
    }
    expect(statuses).toEqual([200, 200, 200, 429, 429, 429]);
    // the refusals came from both replicas: neither had counted its own share only
    expect(new Set(servedBy.slice(3)).size).toBe(2);
    const refused = await team.api().get('/v1/models', g.bearer);
    expect(refused.body).toMatchObject({ error: { code: 'grant_rate_limited' } });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    // the grant's row goes once it says nothing (its window over, its day past), not before
    const usage = team.replicas[0].deps.repos.grantUsage!;
    expect(await usage.forgetIdle(Date.now() - 120_000, 'another-day')).toBe(0);
    expect(await usage.forgetIdle(Date.now() + 120_000, 'another-day')).toBe(1);
  });

  it("a grant's tokens a day are counted by every replica together", async () => {
    const upstream = await startUpstream();
    running.push({ stop: () => upstream.close() });
    const team = await startTeam();
    const admin = await team.api().login('admin', team.password);
    expect((await admin.post('/svc/v1/providers', { name: 'shared', base_url: upstream.url })).status).toBe(201);
    const g = await teamGrant(team, admin, { limits: { tokens_per_day: 3 } });
    for (const r of team.replicas) {
      await eventually(async () => ((await new Api(r.url).get('/v1/models', g.bearer)).body.data ?? []).length > 0, 'the model on every replica');
    }
    const chat = () => team.api().post('/v1/chat/completions', { model: 'fake-model', messages: [{ role: 'user', content: 'a' }] }, g.bearer);
    // two tokens each, one on each replica: 4 counted, over the budget of 3
    for (let i = 0; i < 2; i++) expect((await chat()).status).toBe(200);
    // each answer's count is written as it ends, where every replica reads it
    const usage = team.replicas[0].deps.repos.grantUsage!;
    await eventually(async () => (await usage.tokensOn(g.id, localDay(Date.now()))) >= 4, 'both answers counted');
    // neither replica alone saw more than 2: both refuse now
    for (let i = 0; i < 2; i++) {
      const refused = await chat();
      expect(refused.status).toBe(429);
      expect(refused.body).toMatchObject({ error: { code: 'grant_token_budget_exhausted' } });
    }
    expect(new Set(team.balancer.history.slice(-2)).size).toBe(2);
  });

  it('an MCP session begun through one replica goes on through the other, and stays its grant\'s on both', async () => {
    const mcp = await startMcpServer({ stateful: true });
    running.push({ stop: () => mcp.close() });
    const team = await startTeam();
    const admin = await team.api().login('admin', team.password);
    const instance = (await admin.post('/svc/v1/mcps', { name: 'files', url: mcp.url })).body.instance.id as string;
    const servers = [{ url: mcp.url, instance_ids: [instance] }];
    const [a, b] = [await teamGrant(team, admin, { mcp_servers: servers }), await teamGrant(team, admin, { mcp_servers: servers })];
    const url = new URL(`${team.balancer.url}/svc/v1/apps/mcps/${instance}/mcp`);
    const client = new Client({ name: 'app-a', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: a.bearer } });
    await client.connect(transport);
    const from = team.balancer.history.length;
    for (let i = 0; i < 4; i++) await client.callTool({ name: 'echo', arguments: { message: `call ${i}` } });
    // round robin: the session's calls went through both replicas
    expect(new Set(team.balancer.history.slice(from)).size).toBe(2);
    for (let i = 0; i < 2; i++) {
      const other = await fetch(url, {
        method: 'POST',
        headers: { ...b.bearer, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Session-Id': transport.sessionId!, 'Mcp-Protocol-Version': '2025-11-25' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
      });
      expect(other.status).toBe(404);
    }
    expect(new Set(team.balancer.history.slice(-2)).size).toBe(2);
    await client.close();
  });

  it('a tool call held by one replica is decided through the other, and the holding replica answers the app at once', async () => {
    const risky = await startRiskyServer();
    running.push({ stop: () => risky.close() });
    const team = await startTeam();
    const admin = await team.api().login('admin', team.password);
    const instance = (await admin.post('/svc/v1/mcps', { name: 'notes', url: risky.url })).body.instance.id as string;
    const g = await teamGrant(team, admin, { mcp_servers: [{ url: risky.url, instance_ids: [instance] }] });
    // delete_note is destructive: its default choice is ask
    const call = team.api().post(`/svc/v1/apps/mcps/${instance}/tools/delete_note/execute`, { params: { id: 'n1' } }, g.bearer);
    const holder = await eventually(async () => {
      for (const r of team.replicas) if ((await r.deps.repos.heldCalls!.list()).some((c) => c.view.status === 'pending')) return r;
      return undefined;
    }, 'the held call on the holding replica');
    const other = team.replicas.find((r) => r !== holder)!;
    const person = await new Api(other.url).login('admin', team.password);
    const pending = (await person.get('/svc/v1/calls?status=pending')).body.data as { id: string; tool: string; arguments: unknown }[];
    expect(pending).toHaveLength(1);
    expect(pending[0]).toMatchObject({ tool: 'delete_note', arguments: { id: 'n1' } });
    expect(risky.runs('delete_note')).toBe(0);
    const decidedAt = Date.now();
    const approved = await person.post(`/svc/v1/calls/${pending[0].id}/approve`, {});
    expect(approved.status, approved.text).toBe(200);
    const answer = await call;
    // at once: well before the call would have expired (30 s), through the change notice
    expect(Date.now() - decidedAt).toBeLessThan(5_000);
    expect(answer.status, answer.text).toBe(200);
    expect(JSON.stringify(answer.body)).toContain('deleted n1');
    expect(risky.runs('delete_note')).toBe(1);
    // decided once, on every replica
    const again = await new Api(holder.url).login('admin', team.password);
    expect((await again.post(`/svc/v1/calls/${pending[0].id}/deny`, {})).status).toBe(409);
    expect((await again.get('/svc/v1/calls')).body.data[0]).toMatchObject({ id: pending[0].id, status: 'approved', decided_by: 'admin' });
  });

  it('a backup made with pg_dump, restored with pg_restore into an empty database, is the team: its keys, users and grants work there', async () => {
    const team = await startTeam(1);
    const admin = await team.api().login('admin', team.password);
    const key = await admin.post('/svc/v1/keys', { name: 'kept in the backup' });
    expect(key.status).toBe(201);
    const dump = path.join(await tempDir(), 'svc.dump');
    const bin = postgresBinDir()!;
    await execFileAsync(path.join(bin, 'pg_dump'), ['--format=custom', `--file=${dump}`, team.database], { timeout: 30_000 });
    const restored = await pg.createDatabase();
    await execFileAsync(path.join(bin, 'pg_restore'), ['--no-owner', `--dbname=${restored}`, dump], { timeout: 30_000 });
    const after = await replica(restored, 'http://127.0.0.1:1');
    expect(after.initialAdminPassword).toBeFalsy();
    expect((await new Api(after.url).get('/v1/models', { Authorization: `Bearer ${key.body.key}` })).status).toBe(200);
    const again = await new Api(after.url).login('admin', team.password);
    expect((await again.get('/svc/v1/keys')).body.data.map((k: { name: string }) => k.name)).toContain('kept in the backup');
  });

  it("a provider added or removed on one replica reaches the other's model catalog by itself", async () => {
    const upstream = await startUpstream();
    running.push({ stop: () => upstream.close() });
    const team = await startTeam();
    const admin = await team.api().login('admin', team.password);
    const key = await admin.post('/svc/v1/keys', { name: 'catalog' });
    const bearer = { Authorization: `Bearer ${key.body.key}` };
    const app = team.api();
    // both replicas have built their catalog, with no provider in it
    for (let i = 0; i < 2; i++) expect((await app.get('/v1/models', bearer)).body.data).toEqual([]);
    const added = await admin.post('/svc/v1/providers', { name: 'shared', base_url: upstream.url });
    expect(added.status).toBe(201);
    const listedOnBoth = async (present: boolean) => {
      const answers = [await app.get('/v1/models', bearer), await app.get('/v1/models', bearer)];
      return answers.every((a) => a.body.data.some((m: { owned_by: string }) => m.owned_by === 'shared') === present);
    };
    await eventually(() => listedOnBoth(true), 'both replicas to list the new provider\'s models');
    expect((await admin.delete('/svc/v1/providers/shared')).status).toBe(204);
    await eventually(() => listedOnBoth(false), 'both replicas to drop them');
  });

  it('an authorization started on one replica finishes on another, and its tokens work, refresh and end on every replica', async () => {
    const team = await startTeam();
    const admin = await team.api().login('admin', team.password);
    const { clientId, secret } = await registerClient(admin);
    const app = team.api();
    const created = await app.post('/svc/v1/apps/request-access', createBody({ app_client_id: clientId, flow_type: 'redirect', redirect_url: 'http://127.0.0.1:65010/callback', requested_role: 'scope_user_user' }));
    expect(created.status).toBe(201);
    const approved = await admin.put(`/svc/v1/access-requests/${created.body.id}/approve`, { approved_role: 'scope_user_user', approved: { version: '1', mcp_servers: [] } });
    expect(approved.status).toBe(200);
    const config = await oidcConfig({ baseUrl: team.balancer.url } as TestDaemon, clientId, secret);
    const before = team.balancer.history.length;
    // every hop of the dance (authorize, interaction, consent, callback, token) goes to the next replica
    const result = await authorize(config, admin, approved.body.access_request_scope);
    expect(result.error).toBeUndefined();
    expect(new Set(team.balancer.history.slice(before)).size).toBe(2);
    const tokens = result.tokens!;
    const bearer = { Authorization: `Bearer ${tokens.access_token}` };
    for (let i = 0; i < 2; i++) expect((await app.get('/svc/v1/apps/mcps', bearer)).status).toBe(200);
    const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token!);
    await expect(oidc.refreshTokenGrant(config, tokens.refresh_token!)).rejects.toThrow();
    const revoked = await admin.post(`/svc/v1/access-requests/${created.body.id}/revoke`);
    expect(revoked.status).toBe(200);
    for (let i = 0; i < 2; i++) expect((await app.get('/svc/v1/apps/mcps', { Authorization: `Bearer ${refreshed.access_token}` })).status).toBe(401);
  });

  it("after a restart a replica picks up its own unfinished downloads, not another replica's (whose file it does not have)", async () => {
    const body = randomBytes(64 * 1024);
    const asked: string[] = [];
    const files = http.createServer((req, res) => {
      asked.push(req.url ?? '');
      res.writeHead(200, { 'Content-Length': body.length }).end(body);
    });
    await new Promise<void>((r) => files.listen(0, '127.0.0.1', r));
    running.push({ stop: () => new Promise<void>((r) => files.close(() => r())) });
    const base = `http://127.0.0.1:${(files.address() as AddressInfo).port}`;
    const database = await pg.createDatabase();
    const dataDir = await tempDir();
    running.push({ stop: () => rm(dataDir, { recursive: true, force: true }) });
    const first = await startTestDaemon({ dataDir, config: { database: new Secret(database), masterKey: { value: new Secret(teamKey) }, downloadAllowNetworks: ['127.0.0.0/8'] } });
    running.push(first);
    const now = new Date().toISOString();
    const pull = (id: string, replica: string): PullRecord => ({
      id,
      url: `${base}/${id}.bin`,
      filename: `${id}.bin`,
      sha256: null,
      status: 'downloading',
      bytes_done: 0,
      bytes_total: null,
      error: null,
      created_at: now,
      updated_at: now,
      user_id: null,
      replica,
    });
    await first.deps.repos.modelPulls.put(pull('mine', replicaOf(os.hostname(), dataDir)));
    await first.deps.repos.modelPulls.put(pull('theirs', replicaOf(os.hostname(), '/elsewhere/svc')));
    await first.close();
    const restarted = await startTestDaemon({ dataDir, config: { database: new Secret(database), masterKey: { value: new Secret(teamKey) }, downloadAllowNetworks: ['127.0.0.0/8'] } });
    running.push(restarted);
    await eventually(async () => (await restarted.deps.repos.modelPulls.get('mine'))?.status === 'done', 'its own download to finish');
    expect(createHash('sha256').update(body).digest('hex')).toBe((await restarted.deps.repos.modelPulls.get('mine'))?.sha256);
    expect(asked).toEqual(['/mine.bin']);
    expect((await restarted.deps.repos.modelPulls.get('theirs'))?.status).toBe('downloading');
  });

  it('while the database is down every replica answers 503 store_unavailable within 5 s, stays up, and recovers by itself', async () => {
    const team = await startTeam();
    const admin = await team.api().login('admin', team.password);
    await pg.stopServer();
    try {
      for (let i = 0; i < 2; i++) {
        const started = Date.now();
        const res = await admin.get('/svc/v1/auth/me');
        expect(Date.now() - started).toBeLessThan(5_000);
        expect(res.status).toBe(503);
        expect(res.body.error.code).toBe('store_unavailable');
      }
      expect(new Set(team.balancer.history.slice(-2)).size).toBe(2);
    } finally {
      await pg.startServer();
    }
    await eventually(async () => {
      const answers = [await admin.get('/svc/v1/auth/me'), await admin.get('/svc/v1/auth/me')];
      return answers.every((a) => a.status === 200);
    }, 'both replicas to serve the session again');
    // each replica follows the other's changes again (its listening connection came back by itself)
    const upstream = await startUpstream();
    running.push({ stop: () => upstream.close() });
    const key = await admin.post('/svc/v1/keys', { name: 'after the outage' });
    const bearer = { Authorization: `Bearer ${key.body.key}` };
    for (let i = 0; i < 2; i++) expect((await team.api().get('/v1/models', bearer)).body.data).toEqual([]);
    expect((await admin.post('/svc/v1/providers', { name: 'after', base_url: upstream.url })).status).toBe(201);
    await eventually(async () => {
      const answers = [await team.api().get('/v1/models', bearer), await team.api().get('/v1/models', bearer)];
      return answers.every((a) => a.body.data.length > 0);
    }, 'both replicas to list the provider added after the outage');
    for (const r of team.replicas) {
      const logs = r.logs.join('\n');
      expect(logs).not.toContain(pg.password);
      expect(logs).not.toContain(teamKey);
    }
  }, 40_000);

  it('while the database does not answer at all (a partition), calls answer 503 within 5 s, never hang, and succeed once it answers again', async () => {
    const proxy = await startTcpProxy(pg.port);
    running.push({ stop: () => proxy.close() });
    const team = await startTeam(2, (url) => url.replace(`:${pg.port}/`, `:${proxy.port}/`));
    const admin = await team.api().login('admin', team.password);
    expect((await admin.get('/svc/v1/auth/me')).status).toBe(200);
    proxy.freeze();
    try {
      const calls = [() => admin.get('/svc/v1/auth/me'), () => admin.get('/svc/v1/auth/me'), () => admin.post('/svc/v1/keys', { name: 'during the partition' })];
      for (const call of calls) {
        const started = Date.now();
        const res = await call();
        expect(Date.now() - started).toBeLessThan(5_000);
        expect(res.status).toBe(503);
        expect(res.body.error.code).toBe('store_unavailable');
      }
    } finally {
      proxy.thaw();
    }
    await eventually(async () => {
      const answers = [await admin.get('/svc/v1/auth/me'), await admin.get('/svc/v1/auth/me')];
      return answers.every((a) => a.status === 200);
    }, 'both replicas to serve the session again');
  }, 60_000);

  it('a replica whose master key does not open the database refuses to start, naming the master key', async () => {
    const team = await startTeam(1);
    const wrong = randomBytes(32).toString('base64url');
    const err = await replica(team.database, team.balancer.url, wrong).then(
      () => null,
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(MasterKeyError);
    expect(err!.message).toMatch(/master key \(SVC_MASTER_KEY or --master-key-file\) does not open this database/);
    expect(err!.message).not.toContain(wrong);
    // nothing of the team changed: its admin still logs in
    expect((await team.api().post('/svc/v1/auth/login', { username: 'admin', password: team.password })).status).toBe(200);
  });

  it('two teams (two master keys) starting together on one empty database: one team takes it, the other is refused naming its key', async () => {
    for (let round = 0; round < 3; round++) {
      const database = await pg.createDatabase();
      const keys = [teamKey, randomBytes(32).toString('base64url')];
      const started = await Promise.allSettled(keys.map((key) => replica(database, 'http://127.0.0.1:1', key)));
      const up = started.filter((r) => r.status === 'fulfilled');
      const refused = started.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(up).toHaveLength(1);
      expect(refused).toHaveLength(1);
      expect(refused[0].reason).toBeInstanceOf(MasterKeyError);
      for (const r of running.splice(0).reverse()) await r.stop();
    }
  });

  it('a file-store daemon and a replica given the same data dir at once: only one of them runs', async () => {
    const database = await pg.createDatabase();
    const dataDir = await tempDir();
    const started = await Promise.allSettled([
      startTestDaemon({ dataDir }).then((d) => (running.push(d), d)),
      startTestDaemon({ dataDir, config: { database: new Secret(database), masterKey: { value: new Secret(teamKey) } } }).then((d) => (running.push(d), d)),
    ]);
    expect(started.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(String((started.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason)).toMatch(/already using the data dir/);
  });

  it('`svc serve --database --master-key-file` runs a replica whose CLI works over its socket; an unreachable database is named without its password', async () => {
    const database = await pg.createDatabase();
    const dir = await tempDir();
    running.push({ stop: () => rm(dir, { recursive: true, force: true }) });
    const keyFile = path.join(dir, 'team.key');
    await writeFile(keyFile, `${teamKey}\n`, { mode: 0o600 });
    const dataDir = path.join(dir, 'replica');
    const serve = await startServe(dataDir, cleanEnv(), ['--database', database, '--master-key-file', keyFile]);
    running.push({ stop: async () => void (await serve.stop()) });
    expect(serve.stdout()).toMatch(/first start\. Created the user "admin"/);
    const users = await runSvc(['users', 'list', '--json'], { env: cleanEnv({ SVC_HOME: dataDir }) });
    expect(users.exitCode).toBe(0);
    expect(JSON.parse(users.stdout).map((u: { username: string }) => u.username)).toEqual(['admin']);
    expect(serve.stdout() + serve.stderr()).not.toContain(pg.password);
    expect(serve.stdout() + serve.stderr()).not.toContain(teamKey);

    const nowhere = `postgres://postgres:${pg.password}@127.0.0.1:${await closedPort()}/svc`;
    const refused = await serveExpectingFailure(path.join(dir, 'other'), cleanEnv({ SVC_DATABASE_URL: nowhere, SVC_MASTER_KEY: teamKey }));
    expect(refused.exitCode).not.toBe(0);
    expect(refused.stderr).toMatch(/Cannot use the database at postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/svc: .*ECONNREFUSED/);
    expect(refused.stdout + refused.stderr).not.toContain(pg.password);
  }, 60_000);

  it('a replica killed (SIGKILL) in the middle of a burst of writes loses nothing it acknowledged: another replica finds it all', async () => {
    const database = await pg.createDatabase();
    const dir = await tempDir();
    running.push({ stop: () => rm(dir, { recursive: true, force: true }) });
    const env = cleanEnv({ SVC_MASTER_KEY: teamKey, SVC_RATE_LIMIT_ADDRESS: '0', SVC_RATE_LIMIT_CLIENT: '0', SVC_MAX_DRAFTS: '100000' });
    const serve = await startServe(path.join(dir, 'killed'), env, ['--database', database]);
    running.push({ stop: async () => void (await serve.stop()) });
    const acknowledged: string[] = [];
    let killed = false;
    const writer = async (w: number) => {
      for (let i = 0; !killed; i++) {
        const res = await fetch(`${serve.url}/svc/v1/apps/request-access`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify(createBody({ app_client_id: `burst-${w}-${i}` })),
        }).catch(() => null);
        if (!res) return;
        const body = await res.json().catch(() => null);
        if (res.status === 201 && body) acknowledged.push(body.id);
      }
    };
    const writers = Array.from({ length: 8 }, (_, w) => writer(w));
    await eventually(async () => acknowledged.length >= 60, '60 acknowledged writes', 20_000);
    process.kill(serve.pid, 'SIGKILL');
    killed = true;
    await Promise.all(writers);
    await serve.exited;
    const other = await replica(database, 'http://127.0.0.1:1');
    const stored = new Set((await other.deps.repos.accessRequests.list()).map((r) => r.id));
    expect(acknowledged.filter((id) => !stored.has(id))).toEqual([]);
  }, 60_000);

  it('a replica with no master key, or one that is not 32 bytes, refuses to start and says how to make one', async () => {
    const database = await pg.createDatabase();
    await expect(startTestDaemon({ config: { database: new Secret(database), masterKey: null } })).rejects.toThrow(/needs the team's master key: set SVC_MASTER_KEY/);
    await expect(startTestDaemon({ config: { database: new Secret(database), masterKey: { value: new Secret('c2hvcnQ') } } })).rejects.toThrow(/SVC_MASTER_KEY is not 32 bytes of base64url/);
  });
});
