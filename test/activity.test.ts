/**
 * After consent: what each app does with its grant is recorded (never content), the person reads
 * it through the API and the CLI, and sets limits that hold on the very next call.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { BIN, cleanEnv, runSvcInProcess } from './helpers/cli.js';
import { startTestDaemon, tempDir, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { startMcpServer } from './helpers/mcp-servers.js';
import { authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { startUpstream } from './helpers/upstream.js';

const PROMPT_MARKER = `prompt-marker-${Math.random().toString(36).slice(2)}`;
const TOOL_MARKER = `tool-marker-${Math.random().toString(36).slice(2)}`;

/** Polls `check` until it holds; a deadline that passes fails with what was last seen. */
async function until<T>(what: string, read: () => Promise<T>, check: (v: T) => boolean, ms = 5000): Promise<T> {
  const deadline = Date.now() + ms;
  let last: T = await read();
  while (!check(last)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(last).slice(0, 500)}`);
    await new Promise((r) => setTimeout(r, 50));
    last = await read();
  }
  return last;
}

describe('activity and per-grant limits', () => {
  let d: TestDaemon;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let mcp: Awaited<ReturnType<typeof startMcpServer>>;
  let admin: Api;
  let alice: Api;
  let bob: Api;
  let instanceId: string;
  let clientId: string;
  let config: Awaited<ReturnType<typeof oidcConfig>>;
  const logs = () => d.logs.join('');

  /** An approved grant of the app (User, with the instance) and a token for it. */
  async function grant(limits?: Record<string, unknown>) {
    const created = await new Api(d.url).post('/svc/v1/apps/request-access', {
      app_client_id: clientId,
      flow_type: 'popup',
      requested_role: 'scope_user_user',
      requested: { version: '1', mcp_servers: [{ url: mcp.url }] },
    });
    const approved = await alice.put(`/svc/v1/access-requests/${created.body.id}/approve`, {
      approved_role: 'scope_user_user',
      approved: { version: '1', mcp_servers: [{ url: mcp.url, instance_ids: [instanceId] }] },
      ...(limits ? { limits } : {}),
    });
    expect(approved.status, approved.text).toBe(200);
    const token = (await authorize(config, alice, approved.body.access_request_scope)).tokens!.access_token;
    return { id: created.body.id as string, token, openai: new OpenAI({ baseURL: `${d.url}/v1`, apiKey: token, maxRetries: 0, timeout: 10_000 }) };
  }
  const activityOf = async (who: Api, grantId: string) => (await who.get(`/svc/v1/activity?grant=${grantId.slice(0, 8)}`)).body.data as Record<string, unknown>[];
  const sdk = async (token: string) => {
    const client = new Client({ name: 'activity-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${d.url}/svc/v1/apps/mcps/${instanceId}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
    return client;
  };

  beforeAll(async () => {
    upstream = await startUpstream({ chunks: 3 });
    mcp = await startMcpServer({ stateful: true });
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, logFormat: 'json' } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    alice = await userApi(d.url, admin, 'alice', 'power_user');
    bob = await userApi(d.url, admin, 'bob', 'user');
    expect((await alice.post('/svc/v1/providers', { name: 'local', base_url: upstream.url })).status).toBe(201);
    instanceId = (await alice.post('/svc/v1/mcps', { name: 'tools', url: mcp.url, allow_tools: ['echo'] })).body.instance.id;
    const registered = await registerClient(admin, { name: 'Activity App', public: true });
    clientId = registered.clientId;
    config = await oidcConfig(d, clientId);
  });
  afterAll(async () => {
    await d.stop();
    await upstream.close();
    await mcp.close();
  });

  it('records chats, streams (with and without include_usage) and embeddings with their token counts, and the app sees exactly the stream it asked for', async () => {
    const g = await grant();
    await g.openai.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: PROMPT_MARKER }] });
    const raw = await fetch(`${d.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${g.token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'fake-model', stream: true, messages: [{ role: 'user', content: PROMPT_MARKER }] }),
    });
    const streamed = await raw.text();
    // svc asked the upstream for usage on the app's behalf, and took it out again
    expect(upstream.seen.at(-1)!.body).toMatchObject({ stream_options: { include_usage: true } });
    expect(streamed).not.toContain('usage');
    expect(streamed).toContain('data: [DONE]');
    const asked = await g.openai.chat.completions.create({ model: 'fake-model', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'x' }] });
    const chunks = [];
    for await (const c of asked) chunks.push(c);
    expect(chunks.at(-1)!.usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 7 });
    await g.openai.embeddings.create({ model: 'embed-model', input: PROMPT_MARKER });

    const events = await until('four events', () => activityOf(alice, g.id), (e) => e.length >= 4);
    expect(events.map((e) => e.kind)).toEqual(['embeddings', 'chat', 'chat', 'chat']);
    expect(events[0]).toMatchObject({ kind: 'embeddings', model: 'embed-model', outcome: 'ok', status: 200, tokens_in: 3, user: 'alice', app_client_id: clientId, access_request_id: g.id });
    expect(events[1]).toMatchObject({ endpoint: '/v1/chat/completions', tokens_in: 5, tokens_out: 7 });
    expect(events[2]).toMatchObject({ tokens_in: 5, tokens_out: 7 });
    expect(events[3]).toMatchObject({ model: 'fake-model', tokens_in: 1, tokens_out: 1, outcome: 'ok' });
    expect(Number(events[0].id)).toBeGreaterThan(Number(events[1].id));

    // the daemon's log line names the app, the grant and the model, at info in the JSON format too
    const lines = logs().split('\n').filter((l) => l.includes('"msg":"request"') && l.includes(`"grant":"${g.id.slice(0, 8)}"`));
    expect(lines.length).toBeGreaterThanOrEqual(4);
    expect(JSON.parse(lines[0])).toMatchObject({ level: 30, app: clientId, grant: g.id.slice(0, 8), model: 'fake-model', path: '/v1/chat/completions' });

    const review = (await alice.get(`/svc/v1/access-requests/${g.id}/review`)).body;
    expect(review.usage).toMatchObject({ calls: 4, refused: 0, tokens_in: 14, tokens_out: 15, today: { calls: 4, tokens: 29 } });
    expect(review.limits).toEqual({ requests_per_minute: null, tokens_per_day: null });
  });

  it('a stream cut off before its usage counts an estimate of its tokens, marked as one', async () => {
    const g = await grant();
    const res = await fetch(`${d.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${g.token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'break', stream: true, messages: [{ role: 'user', content: 'x' }] }),
    });
    await res.text().catch(() => '');
    const [event] = await until('the event', () => activityOf(alice, g.id), (e) => e.length >= 1);
    expect(event).toMatchObject({ kind: 'chat', model: 'break', tokens_estimated: true });
    // a token for each 4 bytes of the request, and for each chunk passed on before the break
    expect(event.tokens_in).toBeGreaterThan(0);
    expect(event.tokens_out).toBeGreaterThanOrEqual(0);
    const usage = (await alice.get(`/svc/v1/access-requests/${g.id}/review`)).body.usage;
    expect(usage).toMatchObject({ calls: 1, tokens_in: event.tokens_in, tokens_out: event.tokens_out });
  });

  it('records MCP calls through the proxy and REST, a refused tool, and a revoked grant’s refused call', async () => {
    const g = await grant();
    const client = await sdk(g.token);
    await client.callTool({ name: 'echo', arguments: { text: TOOL_MARKER } });
    await client.close();
    const rest = await new Api(d.url).post(`/svc/v1/apps/mcps/${instanceId}/tools/echo/execute`, { params: { text: TOOL_MARKER } }, { Authorization: `Bearer ${g.token}` });
    expect(rest.status).toBe(200);
    // a tool outside the instance's allow-list: svc answers for the server and sends nothing on
    const refused = await fetch(`${d.url}/svc/v1/apps/mcps/${instanceId}/mcp`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${g.token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Protocol-Version': '2025-06-18' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'add', arguments: { a: 1, b: 2 } } }),
    });
    expect(refused.status).toBe(200);
    expect((await alice.post(`/svc/v1/access-requests/${g.id}/revoke`)).status).toBe(200);
    expect((await new Api(d.url).get('/svc/v1/apps/mcps', { Authorization: `Bearer ${g.token}` })).status).toBe(401);

    const events = await until('the refused call of the revoked grant', () => activityOf(alice, g.id), (e) => e[0]?.reason === 'invalid_token');
    expect(events[0]).toMatchObject({ kind: 'mcp', endpoint: '/svc/v1/apps/mcps', outcome: 'refused', status: 401, reason: 'invalid_token' });
    expect(events[1]).toMatchObject({ kind: 'mcp', mcp_method: 'tools/call', tool: 'add', outcome: 'refused', reason: 'tool_not_allowed', instance_id: instanceId });
    expect(events[2]).toMatchObject({ kind: 'mcp', mcp_method: 'tools/call', tool: 'echo', outcome: 'ok', endpoint: '/svc/v1/apps/mcps/{id}/tools/{tool_name}/execute' });
    const proxied = events.find((e) => e.endpoint === '/svc/v1/apps/mcps/{id}/mcp' && e.tool === 'echo');
    expect(proxied).toMatchObject({ mcp_method: 'tools/call', outcome: 'ok', instance_id: instanceId });
    expect(events.some((e) => e.mcp_method === 'initialize')).toBe(true);
    expect((await alice.get(`/svc/v1/access-requests/${g.id}/review`)).body.usage.refused).toBe(2);
  });

  it('never keeps a prompt or a tool argument: not in the data dir, not in the log', async () => {
    const g = await grant();
    await g.openai.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: PROMPT_MARKER }] });
    await (await sdk(g.token)).callTool({ name: 'echo', arguments: { text: TOOL_MARKER } });
    await until('the events', () => activityOf(alice, g.id), (e) => e.length >= 2);
    // written off the request path: wait until they are on disk
    await until('the events on disk', () => readFile(path.join(d.dataDir, 'activity.jsonl'), 'utf8'), (text) => text.split(g.id).length > 2);
    const files: string[] = [];
    const walk = async (dir: string) => {
      for (const entry of await readdir(dir, { withFileTypes: true })) {
        if (entry.isDirectory()) await walk(path.join(dir, entry.name));
        else if (entry.isFile()) files.push(path.join(dir, entry.name));
      }
    };
    await walk(d.dataDir);
    expect(files.map((f) => path.basename(f))).toContain('activity.jsonl');
    for (const file of files) {
      const text = await readFile(file, 'latin1');
      expect(text.includes(PROMPT_MARKER), file).toBe(false);
      expect(text.includes(TOOL_MARKER), file).toBe(false);
    }
    expect(logs().includes(PROMPT_MARKER)).toBe(false);
    expect(logs().includes(TOOL_MARKER)).toBe(false);
  });

  it('shows a person only the grants they approved; another user’s grant is 404; an admin sees all', async () => {
    const g = await grant();
    await g.openai.models.list();
    await until('the event', () => activityOf(alice, g.id), (e) => e.length >= 1);
    expect((await bob.get(`/svc/v1/activity?grant=${g.id}`)).status).toBe(404);
    expect((await bob.get('/svc/v1/activity')).body.data).toEqual([]);
    expect((await admin.get(`/svc/v1/activity?grant=${g.id}`)).body.data[0]).toMatchObject({ kind: 'models', access_request_id: g.id });
    expect((await alice.get('/svc/v1/activity?since=1h&limit=1')).body.data).toHaveLength(1);
    expect((await alice.get('/svc/v1/activity?since=yesterday-ish')).status).toBe(400);
    expect((await alice.get('/svc/v1/activity?limit=0')).status).toBe(400);
    expect((await new Api(d.url).get('/svc/v1/activity')).status).toBe(401);
  });

  it('holds a grant to the calls a minute set at approval: 429 grant_rate_limited with Retry-After, other grants untouched, the refusal recorded', async () => {
    const limited = await grant({ requests_per_minute: 2 });
    const other = await grant();
    await limited.openai.models.list();
    await limited.openai.models.list();
    const third = await fetch(`${d.url}/v1/models`, { headers: { Authorization: `Bearer ${limited.token}` } });
    expect(third.status).toBe(429);
    expect(Number(third.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await third.json()).toMatchObject({ error: { type: 'rate_limit_error', code: 'grant_rate_limited' } });
    await other.openai.models.list();
    const events = await until('the refusal', () => activityOf(alice, limited.id), (e) => e.length >= 3);
    expect(events[0]).toMatchObject({ outcome: 'refused', reason: 'grant_rate_limited', status: 429 });
    // lifted: the next call goes through
    expect((await alice.put(`/svc/v1/access-requests/${limited.id}/limits`, { requests_per_minute: null })).body.limits).toEqual({ requests_per_minute: null, tokens_per_day: null });
    expect((await fetch(`${d.url}/v1/models`, { headers: { Authorization: `Bearer ${limited.token}` } })).status).toBe(200);
  });

  it('holds a grant to its tokens a day, set later: the call that crosses the budget ends, the next is refused until midnight', async () => {
    const g = await grant();
    const set = await alice.put(`/svc/v1/access-requests/${g.id}/limits`, { tokens_per_day: 3 });
    expect(set.status, set.text).toBe(200);
    expect(set.body.limits).toEqual({ requests_per_minute: null, tokens_per_day: 3 });
    await g.openai.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'a' }] }); // 2 tokens
    await g.openai.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'b' }] }); // 4: over it
    const refused = await fetch(`${d.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${g.token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'fake-model', messages: [{ role: 'user', content: 'c' }] }),
    });
    expect(refused.status).toBe(429);
    expect(await refused.json()).toMatchObject({ error: { code: 'grant_token_budget_exhausted' } });
    const retry = Number(refused.headers.get('retry-after'));
    expect(retry).toBeGreaterThan(0);
    expect(retry).toBeLessThanOrEqual(24 * 3600);
  });

  it('refuses bad limits with 400 and changes nothing; only the approver or an admin may set them', async () => {
    const g = await grant({ requests_per_minute: 5 });
    for (const bad of [{ requests_per_minute: 0 }, { requests_per_minute: -1 }, { tokens_per_day: 1.5 }, { tokens_per_day: 'x' }, { other: 1 }]) {
      const res = await alice.put(`/svc/v1/access-requests/${g.id}/limits`, bad);
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.body.error.code).toBe('invalid_body');
    }
    expect((await alice.get(`/svc/v1/access-requests/${g.id}/review`)).body.limits).toEqual({ requests_per_minute: 5, tokens_per_day: null });
    expect((await bob.put(`/svc/v1/access-requests/${g.id}/limits`, { requests_per_minute: 1 })).status).toBe(404);
    expect((await admin.put(`/svc/v1/access-requests/${g.id}/limits`, { requests_per_minute: 7 })).body.limits.requests_per_minute).toBe(7);
    const badAtApproval = await new Api(d.url).post('/svc/v1/apps/request-access', { app_client_id: clientId, flow_type: 'popup', requested_role: 'scope_user_user', requested: { version: '1' } });
    const res = await alice.put(`/svc/v1/access-requests/${badAtApproval.body.id}/approve`, { approved_role: 'scope_user_user', limits: { tokens_per_day: 0 } });
    expect(res.status).toBe(400);
    expect((await alice.get(`/svc/v1/access-requests/${badAtApproval.body.id}/review`)).body.status).toBe('draft');
  });

  it('the review surfaces’ polling is logged at debug, so it does not fill the log at info', async () => {
    await alice.get('/svc/v1/access-requests?status=draft', { 'x-svc-quiet': '1' });
    await alice.get('/svc/v1/access-requests?status=approved');
    const requestLines = logs()
      .split('\n')
      .filter((l) => l.includes('"msg":"request"') && l.includes('/svc/v1/access-requests'))
      .map((l) => JSON.parse(l) as { level: number; path: string });
    expect(requestLines.filter((l) => l.level === 20).length).toBeGreaterThanOrEqual(1);
    expect(requestLines.at(-1)!.level).toBe(30);
  });

  it('svc requests show --json carries the usage and the limits', async () => {
    const g = await grant({ tokens_per_day: 1000 });
    await g.openai.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'a' }] });
    await until('the event', () => activityOf(alice, g.id), (e) => e.length >= 1);
    const shown = await runSvcInProcess(['requests', 'show', g.id.slice(0, 8), '--json'], { env: cleanEnv({ SVC_HOME: d.dataDir }) });
    expect(shown.exitCode, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ usage: { calls: 1, tokens_in: 1, tokens_out: 1 }, limits: { requests_per_minute: null, tokens_per_day: 1000 } });
  });
});

describe('the CLI: svc activity, and limits from svc requests', () => {
  let d: TestDaemon;
  let admin: Api;
  let clientId: string;
  const env = () => cleanEnv({ SVC_HOME: d.dataDir });

  beforeAll(async () => {
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    clientId = (await registerClient(admin, { name: 'CLI App', public: true })).clientId;
  });
  afterAll(() => d.stop());

  const draft = async () =>
    (await new Api(d.url).post('/svc/v1/apps/request-access', { app_client_id: clientId, flow_type: 'popup', requested_role: 'scope_user_user', requested: { version: '1' } })).body.id as string;

  it('approve --rpm --tokens-per-day sets both; limits shows and changes them; none removes one; bad values are usage errors', async () => {
    const id = await draft();
    const approved = await runSvcInProcess(['requests', 'approve', id.slice(0, 8), '--rpm', '2', '--tokens-per-day', '100'], { env: env() });
    expect(approved.exitCode, approved.stderr).toBe(0);
    const shown = await runSvcInProcess(['requests', 'limits', id.slice(0, 8)], { env: env() });
    expect(shown.stdout).toBe('2 calls a minute; 100 tokens a day\n');
    const changed = await runSvcInProcess(['requests', 'limits', id.slice(0, 8), '--rpm', 'none', '--json'], { env: env() });
    expect(JSON.parse(changed.stdout).limits).toEqual({ requests_per_minute: null, tokens_per_day: 100 });
    for (const bad of [['--rpm', '0'], ['--tokens-per-day', '-5'], ['--rpm', '1.5']]) {
      const res = await runSvcInProcess(['requests', 'limits', id.slice(0, 8), ...bad], { env: env() });
      expect(res.exitCode, bad.join(' ')).toBe(2);
    }
    expect((await admin.get(`/svc/v1/access-requests/${id}/review`)).body.limits).toEqual({ requests_per_minute: null, tokens_per_day: 100 });
  });

  it('svc status says how many requests wait, how many grants and keys are active, and each provider’s last discovery', async () => {
    const waiting = await draft();
    const granted = await draft();
    await admin.put(`/svc/v1/access-requests/${granted}/approve`, { approved_role: 'scope_user_user' });
    expect((await admin.post('/svc/v1/keys', { name: 'status key', role: 'scope_user_user', mcp_servers: [], expires_in: null })).status).toBe(201);
    expect((await admin.post('/svc/v1/providers', { name: 'gone', base_url: 'http://127.0.0.1:9/v1' })).status).toBe(201);
    const status = await runSvcInProcess(['status', '--json'], { env: env() });
    expect(status.exitCode, status.stderr).toBe(0);
    const body = JSON.parse(status.stdout);
    expect(body.requests_waiting).toBeGreaterThanOrEqual(1);
    expect(body.grants_active).toBeGreaterThanOrEqual(1);
    expect(body.keys_active).toBeGreaterThanOrEqual(1);
    expect(body.providers).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'gone', discovery_error: expect.any(String) })]));
    const table = await runSvcInProcess(['status'], { env: env() });
    expect(table.stdout).toMatch(/waiting\t\d+ access requests?/);
    expect(table.stdout).toContain('provider gone\tdiscovery failed');
    void waiting;
  });

  it('svc activity lists a grant’s events (a short id works), and --follow prints new ones as they happen', async () => {
    const id = await draft();
    const scope = (await admin.put(`/svc/v1/access-requests/${id}/approve`, { approved_role: 'scope_user_user' })).body.access_request_scope;
    const token = (await authorize(await oidcConfig(d, clientId), admin, scope)).tokens!.access_token;
    const call = () => fetch(`${d.url}/v1/models`, { headers: { Authorization: `Bearer ${token}` } });
    expect((await call()).status).toBe(200);
    const listed = await until('the event in svc activity', async () => runSvcInProcess(['activity', '--request', id.slice(0, 8), '--json'], { env: env() }), (r) => r.stdout.includes('"kind": "models"'));
    expect(JSON.parse(listed.stdout)[0]).toMatchObject({ access_request_id: id, kind: 'models', outcome: 'ok' });
    const table = await runSvcInProcess(['activity', '--request', id.slice(0, 8)], { env: env() });
    expect(table.stdout.split('\t')).toContain('models');

    const follow = execa('node', [BIN, 'activity', '--follow', '--json', '--request', id], { env: env(), extendEnv: false, reject: false });
    let out = '';
    follow.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    try {
      await until('the first event printed', async () => out, (o) => o.split('\n').filter(Boolean).length >= 1, 10_000);
      expect((await call()).status).toBe(200);
      expect((await call()).status).toBe(200);
      await until('two more events, as they happen', async () => out, (o) => o.split('\n').filter(Boolean).length >= 3, 10_000);
      const lines = out.trim().split('\n').map((l) => JSON.parse(l));
      expect(lines.every((e) => e.access_request_id === id)).toBe(true);
      expect(Number(lines[2].id)).toBeGreaterThan(Number(lines[1].id));
    } finally {
      follow.kill('SIGTERM');
      await follow;
    }
  });
});

describe('activity retention', () => {
  it('keeps at most --activity-max-events, the oldest going first, and survives a restart', async () => {
    const dataDir = await tempDir();
    const config = { rateLimitClient: 0, rateLimitAddress: 0, activityMaxEvents: 20 };
    let d = await startTestDaemon({ dataDir, config });
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    const { clientId } = await registerClient(admin, { public: true });
    const created = await new Api(d.url).post('/svc/v1/apps/request-access', { app_client_id: clientId, flow_type: 'popup', requested_role: 'scope_user_user', requested: { version: '1' } });
    const approved = await admin.put(`/svc/v1/access-requests/${created.body.id}/approve`, { approved_role: 'scope_user_user' });
    const token = (await authorize(await oidcConfig(d, clientId), admin, approved.body.access_request_scope)).tokens!.access_token;
    for (let i = 0; i < 45; i++) expect((await fetch(`${d.url}/v1/models`, { headers: { Authorization: `Bearer ${token}` } })).status).toBe(200);
    const seen = (await admin.get('/svc/v1/activity?limit=1000')).body.data as { id: string }[];
    expect(seen).toHaveLength(20);
    expect(seen[0].id).toBe('45');
    await d.close();
    const lines = (await readFile(path.join(dataDir, 'activity.jsonl'), 'utf8')).trim().split('\n');
    expect(lines.length).toBeLessThanOrEqual(20 * 1.1 + 100);
    d = await startTestDaemon({ dataDir, config });
    try {
      // the CLI's own session survived the restart, as the store did
      const listed = await runSvcInProcess(['requests', 'show', created.body.id, '--json'], { env: cleanEnv({ SVC_HOME: dataDir }) });
      expect(JSON.parse(listed.stdout).usage.calls).toBe(20);
      const file = (await readFile(path.join(dataDir, 'activity.jsonl'), 'utf8')).trim().split('\n');
      expect(file).toHaveLength(20);
      expect(JSON.parse(file[0]).id).toBe('26');
    } finally {
      await d.stop();
    }
  });
});
