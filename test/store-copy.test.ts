/**
 * `svc store copy`: a real file-store daemon's data dir, used as an app and a person use it, then
 * stopped and copied into a real PostgreSQL database; a team replica started on that database
 * must honour everything issued before the move (the app's access and refresh tokens, the API
 * key, the admin's password and browser session) and reach the provider and the MCP server with
 * their secrets, sealed again with the team's key. Both daemons sit behind one loopback balancer,
 * as one public URL that moves from the old daemon to the team (tokens name their issuer).
 */
import { randomBytes } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import OpenAI from 'openai';
import * as oidc from 'openid-client';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../src/config.js';
import { FIRST_START_HOLDER } from '../src/store/postgres/copy-target.js';
import { LOCK_NAMESPACE, LOCKS } from '../src/store/postgres/migrations.js';
import { type Balancer, startBalancer } from './helpers/balancer.js';
import { cleanEnv, runSvc, runSvcInProcess } from './helpers/cli.js';
import { startTestDaemon, tempDir, type TestDaemon } from './helpers/daemon.js';
import { Api, createBody } from './helpers/http.js';
import { startMcpServer } from './helpers/mcp-servers.js';
import { authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { postgresBinDir, startPostgres, type TestPostgres } from './helpers/postgres.js';
import { needs } from './helpers/requirements.js';
import { startUpstream } from './helpers/upstream.js';
import { eventually } from './helpers/wait.js';

const available = needs(postgresBinDir() !== null, 'svc store copy (into PostgreSQL)', "PostgreSQL's server (initdb, pg_ctl)");

const PROVIDER_KEY = 'sk-upstream-only-svc-knows';
const MCP_SECRET = 'mcp-header-only-svc-knows';

/** Every public table's rows, as text: what a refused copy must leave exactly as it was. */
async function databaseContents(url: string): Promise<Record<string, string[]>> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    const tables = (await client.query<{ tablename: string }>("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")).rows.map((r) => r.tablename);
    const out: Record<string, string[]> = {};
    for (const t of tables) out[t] = (await client.query<{ row: string }>(`SELECT x::text AS row FROM ${t} x ORDER BY 1`)).rows.map((r) => r.row);
    return out;
  } finally {
    await client.end();
  }
}

interface Issued {
  admin: Api;
  password: string;
  instanceId: string;
  config: oidc.Configuration;
  tokens: oidc.TokenEndpointResponse;
  apiKey: string;
}

describe.skipIf(!available)("svc store copy: a data dir's store into a team's PostgreSQL", () => {
  let pgServer: TestPostgres;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let mcp: Awaited<ReturnType<typeof startMcpServer>>;
  const teamKey = randomBytes(32).toString('base64url');
  const running: { stop(): Promise<unknown> }[] = [];

  beforeAll(async () => {
    [pgServer, upstream, mcp] = await Promise.all([startPostgres(), startUpstream({ apiKey: PROVIDER_KEY }), startMcpServer({ stateful: false })]);
  }, 40_000);
  afterEach(async () => {
    for (const r of running.splice(0).reverse()) await r.stop().catch(() => undefined);
  }, 40_000);
  afterAll(async () => {
    await Promise.all([upstream?.close(), mcp?.close()]);
    await pgServer?.close();
  }, 40_000);

  /** What a person and an app set up on the file-store daemon: a provider, an MCP instance, a grant with tokens, an API key. */
  async function useFileStore(d: TestDaemon, balancer: Balancer): Promise<Issued> {
    const admin = await new Api(balancer.url).login('admin', d.adminPassword);
    expect((await admin.post('/svc/v1/providers', { name: 'up', base_url: upstream.url, api_key: PROVIDER_KEY })).status).toBe(201);
    const instance = await admin.post('/svc/v1/mcps', { name: 'tools', url: mcp.url, headers: [{ name: 'X-Team-Secret', value: MCP_SECRET }] });
    expect(instance.status).toBe(201);
    const instanceId = instance.body.instance.id as string;
    const { clientId, secret } = await registerClient(admin);
    const created = await new Api(balancer.url).post(
      '/svc/v1/apps/request-access',
      createBody({ app_client_id: clientId, requested_role: 'scope_user_user', requested: { version: '1', mcp_servers: [{ url: mcp.url }] } }),
    );
    expect(created.status).toBe(201);
    const approved = await admin.put(`/svc/v1/access-requests/${created.body.id}/approve`, {
      approved_role: 'scope_user_user',
      approved: { version: '1', mcp_servers: [{ url: mcp.url, instance_ids: [instanceId] }] },
    });
    expect(approved.status).toBe(200);
    const config = await oidcConfig({ baseUrl: balancer.url } as TestDaemon, clientId, secret);
    const { tokens, error } = await authorize(config, admin, approved.body.access_request_scope);
    expect(error).toBeUndefined();
    const key = await admin.post('/svc/v1/keys', { name: 'script' });
    expect(key.status).toBe(201);
    return { admin, password: d.adminPassword, instanceId, config, tokens: tokens!, apiKey: key.body.key as string };
  }

  const chat = (baseUrl: string, bearer: string) =>
    new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: bearer, maxRetries: 0 }).chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'hi' }] });

  /** An MCP tool call through svc's gateway with `bearer`, as an app's MCP SDK client makes it. */
  async function callEcho(baseUrl: string, bearer: string, instanceId: string): Promise<string> {
    const client = new Client({ name: 'moved-app', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${baseUrl}/svc/v1/apps/mcps/${instanceId}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${bearer}` } } }));
    try {
      const result = await client.callTool({ name: 'echo', arguments: { message: 'moved' } });
      return (result.content as { text: string }[])[0].text;
    } finally {
      await client.close();
    }
  }

  it('moves every grant and secret: tokens, the API key, the password and the session issued before work on the team', async () => {
    const dataDir = await tempDir();
    running.push({ stop: () => rm(dataDir, { recursive: true, force: true }) });
    const balancer = await startBalancer();
    running.push({ stop: () => balancer.close() });
    const file = await startTestDaemon({ dataDir, config: { baseUrl: balancer.url } });
    running.push({ stop: () => file.close() });
    balancer.targets.push(file.url);
    const issued = await useFileStore(file, balancer);
    expect((await chat(balancer.url, issued.tokens.access_token)).choices[0].message.content).toContain('hi');

    const database = await pgServer.createDatabase();
    const env = cleanEnv({ SVC_MASTER_KEY: teamKey });
    const args = ['store', 'copy', '--to', database, '--data-dir', dataDir];
    // a running daemon holds the data dir: refused, and the database not even touched
    const busy = await runSvcInProcess(args, { env });
    expect(busy.exitCode).toBe(1);
    expect(busy.stderr).toMatch(/A daemon \(pid \d+\) is using .+\. Stop it first/);
    expect(await databaseContents(database)).toEqual({});

    await file.close();
    const copied = await runSvcInProcess(args, { env });
    expect(copied.stderr).toMatch(/Copied the store of .+ into postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/\w+: 1 user, 2 sessions, 2 access requests, 1 API key, 1 OAuth client, 2 stored grants and tokens, 1 provider, 1 MCP instance/);
    expect(copied.exitCode).toBe(0);
    expect(copied.stdout + copied.stderr).not.toContain(pgServer.password);
    expect(copied.stdout + copied.stderr).not.toContain(teamKey);

    // the replica on this machine keeps the data dir (its activity log, its downloads, the CLI's login)
    const team = await startTestDaemon({ dataDir, config: { database: new Secret(database), masterKey: { value: new Secret(teamKey) }, baseUrl: balancer.url } });
    running.push(team);
    balancer.targets.splice(0, balancer.targets.length, team.url);
    expect(team.initialAdminPassword).toBeUndefined();
    expect(team.notices.join('\n')).not.toMatch(/Created the user/);

    // the access token, signed by the file store's key, works on /v1 and on the MCP instance of its grant
    const seenBefore = upstream.seen.length;
    expect((await chat(balancer.url, issued.tokens.access_token)).choices[0].message.content).toContain('hi');
    // the provider's key was opened and sealed again: the upstream (which checks it) got it
    expect(upstream.seen.slice(seenBefore).some((r) => r.path === '/v1/chat/completions' && r.headers.authorization === `Bearer ${PROVIDER_KEY}`)).toBe(true);
    const mcpBefore = mcp.seen.length;
    expect(await callEcho(balancer.url, issued.tokens.access_token, issued.instanceId)).toBe('echo: moved');
    expect(mcp.seen.slice(mcpBefore).some((r) => r.headers['x-team-secret'] === MCP_SECRET)).toBe(true);

    // the refresh token (a grant stored sealed; the client's secret too) refreshes, and the new token works
    const refreshed = await oidc.refreshTokenGrant(issued.config, issued.tokens.refresh_token!);
    expect((await new Api(balancer.url).get('/svc/v1/apps/mcps', { Authorization: `Bearer ${refreshed.access_token}` })).body.data.map((m: { id: string }) => m.id)).toEqual([issued.instanceId]);

    // the API key, the admin's browser session (cookie keys moved) and the password
    expect((await chat(balancer.url, issued.apiKey)).choices[0].message.content).toContain('hi');
    expect((await issued.admin.get('/svc/v1/auth/me')).body.user.username).toBe('admin');
    expect((await new Api(balancer.url).post('/svc/v1/auth/login', { username: 'admin', password: issued.password })).status).toBe(200);
    // and this machine's CLI, logged in by the first start, still is
    const users = await runSvcInProcess(['users', 'list', '--json'], { env: cleanEnv({ SVC_HOME: dataDir }) });
    expect(users.exitCode).toBe(0);
    expect(JSON.parse(users.stdout).map((u: { username: string }) => u.username)).toEqual(['admin']);

    // a second copy into the now used database is refused (by the binary, with its exit code) and writes nothing
    await team.close();
    const before = await databaseContents(database);
    const again = await runSvc(args, { env });
    expect(again.exitCode).toBe(1);
    expect(again.stderr).toMatch(/The database at postgres:\/\/postgres:\*\*\*@.+ is not empty \(it holds users, .+\).+nothing was written/);
    expect(await databaseContents(database)).toEqual(before);
  }, 90_000);

  it("moves a command MCP instance: its env values sealed again with the team's key, its command and URL as they were", async () => {
    const marker = `env-only-svc-knows-${randomBytes(6).toString('hex')}`;
    const dataDir = await tempDir();
    running.push({ stop: () => rm(dataDir, { recursive: true, force: true }) });
    const file = await startTestDaemon({ dataDir });
    running.push({ stop: () => file.close() });
    const admin = await new Api(file.url).login('admin', file.adminPassword);
    const made = await admin.post('/svc/v1/mcps', { name: 'Filesystem', command: { command: 'npx', args: ['-y', 'server-filesystem', '/srv'], env: [{ name: 'FS_TOKEN', value: marker }], cwd: '/srv' }, try: false });
    expect(made.status, made.text).toBe(201);
    const id = made.body.instance.id as string;
    await file.close();
    const database = await pgServer.createDatabase();
    const copied = await runSvcInProcess(['store', 'copy', '--to', database, '--data-dir', dataDir], { env: cleanEnv({ SVC_MASTER_KEY: teamKey }) });
    expect(copied.exitCode, copied.stderr).toBe(0);
    expect(JSON.stringify(await databaseContents(database))).not.toContain(marker);
    const team = await startTestDaemon({ dataDir, config: { database: new Secret(database), masterKey: { value: new Secret(teamKey) } } });
    running.push(team);
    const onTeam = await new Api(team.url).login('admin', file.adminPassword);
    const answer = await onTeam.get(`/svc/v1/mcps/${id}`);
    expect(answer.body.instance).toMatchObject({ url: 'stdio://filesystem', transport: 'command', command: { command: 'npx', args: ['-y', 'server-filesystem', '/srv'], env_names: ['FS_TOKEN'], cwd: '/srv' } });
    expect(answer.text).not.toContain(marker);
    // the team replica opens the value with the team's key, as it would to start the process
    const record = (await team.deps.repos.mcpInstances.get(id))!;
    expect(team.app.instances.openEnv(record)).toEqual({ FS_TOKEN: marker });
  }, 90_000);

  it("carries each limited grant's tokens spent today, and refuses a damaged count file, writing nothing", async () => {
    const dataDir = await tempDir();
    running.push({ stop: () => rm(dataDir, { recursive: true, force: true }) });
    const file = await startTestDaemon({ dataDir });
    await file.close();
    const today = new Date().toISOString().slice(0, 10);
    await writeFile(path.join(dataDir, 'grant-days.json'), `${JSON.stringify({ version: 1, days: { ar_spent: { day: today, tokens: 1234 } } })}\n`);
    const damagedAt = await pgServer.createDatabase();
    await writeFile(path.join(dataDir, 'grant-days.json'), '{"version":1,"days":{"ar_spent":{"day":');
    const before = await databaseContents(damagedAt);
    const refused = await runSvcInProcess(['store', 'copy', '--to', damagedAt, '--data-dir', dataDir], { env: cleanEnv({ SVC_MASTER_KEY: teamKey }) });
    expect(refused.exitCode).not.toBe(0);
    expect(refused.stderr).toMatch(/grant-days\.json/);
    expect(await databaseContents(damagedAt)).toEqual(before);

    await writeFile(path.join(dataDir, 'grant-days.json'), `${JSON.stringify({ version: 1, days: { ar_spent: { day: today, tokens: 1234 } } })}\n`);
    const database = await pgServer.createDatabase();
    const copied = await runSvcInProcess(['store', 'copy', '--to', database, '--data-dir', dataDir], { env: cleanEnv({ SVC_MASTER_KEY: teamKey }) });
    expect(copied.exitCode, copied.stderr).toBe(0);
    const client = new pg.Client(database);
    await client.connect();
    try {
      const rows = (await client.query('SELECT grant_id, day, day_tokens::int AS tokens FROM grant_usage')).rows;
      expect(rows).toEqual([{ grant_id: 'ar_spent', day: today, tokens: 1234 }]);
    } finally {
      await client.end();
    }
  }, 90_000);

  it('waits for a replica in the middle of its first start on the same database, then finds its store and refuses, writing nothing', async () => {
    const dataDir = await tempDir();
    running.push({ stop: () => rm(dataDir, { recursive: true, force: true }) });
    await (await startTestDaemon({ dataDir })).stop();
    const database = await pgServer.createDatabase();
    // a replica's first start, as far as the database sees it: the first-start lock held while it
    // makes its store
    const replica = new pg.Client(database);
    await replica.connect();
    running.push({ stop: () => replica.end() });
    await replica.query('SELECT pg_advisory_lock($1, $2)', [LOCK_NAMESPACE, LOCKS.firstStart]);
    const copy = runSvcInProcess(['store', 'copy', '--to', database, '--data-dir', dataDir], { env: cleanEnv({ SVC_MASTER_KEY: teamKey }) });
    await eventually(async () => (await replica.query('SELECT 1 FROM pg_stat_activity WHERE application_name = $1', [FIRST_START_HOLDER])).rowCount === 1, 'the copy to wait for the first-start lock');
    const before = await databaseContents(database);
    // the replica makes its first admin, then lets the lock go
    await replica.query("INSERT INTO users (key, record, username_lower) VALUES ('u-replica', '{\"id\":\"u-replica\"}'::jsonb, 'admin')");
    await replica.query('SELECT pg_advisory_unlock($1, $2)', [LOCK_NAMESPACE, LOCKS.firstStart]);
    const refused = await copy;
    expect(refused.exitCode, refused.stderr).toBe(1);
    expect(refused.stderr).toMatch(/is not empty \(it holds users\): svc store copy writes only into a database no svc has used, so nothing was written/);
    const after = await databaseContents(database);
    expect(after.users).toHaveLength(1);
    expect(Object.values(after).flat()).toHaveLength(Object.values(before).flat().length + 1);
  });

  it('refuses without the team key, with a malformed URL, and on a data dir with no store, writing nothing', async () => {
    const dataDir = await tempDir();
    running.push({ stop: () => rm(dataDir, { recursive: true, force: true }) });
    const database = await pgServer.createDatabase();
    const noKey = await runSvcInProcess(['store', 'copy', '--to', database, '--data-dir', dataDir], { env: cleanEnv() });
    expect(noKey.exitCode).toBe(2);
    expect(noKey.stderr).toMatch(/needs the team's master key, the one every replica is given: set SVC_MASTER_KEY/);
    const badUrl = await runSvcInProcess(['store', 'copy', '--to', 'mysql://db/svc', '--data-dir', dataDir], { env: cleanEnv({ SVC_MASTER_KEY: teamKey }) });
    expect(badUrl.exitCode).toBe(2);
    expect(badUrl.stderr).toMatch(/--to must be a postgres:\/\/ URL/);
    const empty = await runSvcInProcess(['store', 'copy', '--to', database, '--data-dir', dataDir], { env: cleanEnv({ SVC_MASTER_KEY: teamKey }) });
    expect(empty.exitCode).toBe(1);
    expect(empty.stderr).toMatch(/There is no svc store in .+ yet: nothing to copy/);
    expect(await databaseContents(database)).toEqual({});
  });
});
