/**
 * Command MCP servers run by the real daemon and reached through its proxy and REST endpoints with
 * the MCP SDK client and an API key's token: the real filesystem server over a temp dir, and the
 * small servers of test/helpers/hostile-stdio (a counter per process, a crash on a call).
 */
import { writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestDaemon, tempDir, type TestDaemon } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { cleanEnv, runSvcInProcess } from './helpers/cli.js';
import { authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { HOSTILE, running } from './helpers/command.js';
import { eventually } from './helpers/wait.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const require = createRequire(import.meta.url);
const FILESYSTEM = require.resolve('@modelcontextprotocol/server-filesystem/dist/index.js');
const MEMORY = require.resolve('@modelcontextprotocol/server-memory/dist/index.js');
const hostile = (name: string) => path.join(HOSTILE, `${name}.mjs`);
const node = (script: string, ...args: string[]) => ({ command: process.execPath, args: [script, ...args] });

let d: TestDaemon;
let admin: Api;
let files: string;
let dir: string;

async function addInstance(name: string, command: { command: string; args: string[] }): Promise<string> {
  const res = await admin.post('/svc/v1/mcps', { name, command });
  expect(res.status, res.text).toBe(201);
  return res.body.instance.id;
}

async function keyFor(instance: string, url: string, name: string): Promise<{ key: string; id: string }> {
  const res = await admin.post('/svc/v1/keys', { name, mcp_servers: [{ url, instance_ids: [instance] }] });
  expect(res.status, res.text).toBe(201);
  return { key: res.body.key, id: res.body.id ?? res.body.api_key?.id };
}

const proxyUrl = (id: string) => `${d.url}/svc/v1/apps/mcps/${id}/mcp`;

/** An MCP host's sign-in for the instance's proxy URL, approved by the admin: a grant's token. */
async function grantToken(instance: string, url: string): Promise<string> {
  const { clientId, secret } = await registerClient(admin, { name: `Host ${instance.slice(0, 8)}` });
  const config = await oidcConfig(d, clientId, secret);
  const { tokens, error } = await authorize(config, admin, 'scope_user_user', { resource: proxyUrl(instance) }, undefined, async (id) => {
    const approved = await admin.put(`/svc/v1/access-requests/${id}/approve`, { approved_role: 'scope_user_user', approved: { version: '1', mcp_servers: [{ url, instance_ids: [instance] }] } });
    expect(approved.status, approved.text).toBe(200);
  });
  expect(error).toBeUndefined();
  return tokens!.access_token;
}

async function connect(instance: string, key: string) {
  const transport = new StreamableHTTPClientTransport(new URL(proxyUrl(instance)), { requestInit: { headers: { Authorization: `Bearer ${key}` } } });
  const client = new Client({ name: 'test-app', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

const live = async (instance: string): Promise<number> => (await admin.get(`/svc/v1/mcps/${instance}`)).body.instance.processes?.live ?? -1;
const textOf = (result: unknown) => (result as { content: { text: string }[] }).content[0].text;

beforeAll(async () => {
  d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, stdioMaxProcesses: 3 } });
  admin = await new Api(d.url).login('admin', d.adminPassword);
  dir = await tempDir('svc-fs-');
  await writeFile(path.join(dir, 'note.txt'), 'hello from a command server');
  files = await addInstance('files', node(FILESYSTEM, dir));
});
afterAll(() => d?.stop());

// each test has instances of its own: the tests run in any order, and bounds are per instance
const counterOf = (name: string) => addInstance(name, node(hostile('stateful')));

describe('command servers through the proxy', () => {
  it('the filesystem server lists its tools and reads a file of its directory', async () => {
    const { key } = await keyFor(files, 'stdio://files', 'fs app');
    const { client } = await connect(files, key);
    const tools = (await client.listTools()).tools.map((t) => t.name);
    expect(tools).toContain('list_directory');
    const listing = await client.callTool({ name: 'list_directory', arguments: { path: dir } });
    expect(textOf(listing)).toContain('note.txt');
    expect(await live(files)).toBe(1);
    // svc status counts the processes (of every test's instances: at least this one)
    const status = await runSvcInProcess(['status', '--json'], { env: cleanEnv({ SVC_HOME: d.dataDir, NO_COLOR: '1' }) });
    expect(status.exitCode, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout).command_processes).toBeGreaterThanOrEqual(1);
    await client.close();
  });

  it("the memory server keeps what a grant's token wrote, in that session's process", async () => {
    const memory = await tempDir('svc-memory-');
    const res = await admin.post('/svc/v1/mcps', { name: 'memory', command: { ...node(MEMORY), env: [{ name: 'MEMORY_FILE_PATH', value: path.join(memory, 'graph.jsonl') }] } });
    expect(res.status, res.text).toBe(201);
    const instance = res.body.instance.id;
    const { client, transport } = await connect(instance, await grantToken(instance, 'stdio://memory'));
    await client.callTool({ name: 'create_entities', arguments: { entities: [{ name: 'svc', entityType: 'gateway', observations: ['runs command servers'] }] } });
    const graph = await client.callTool({ name: 'read_graph', arguments: {} });
    expect(JSON.stringify(graph)).toContain('runs command servers');
    await transport.terminateSession();
  });

  it('two apps get two processes: the state of one is not the other\'s; DELETE ends the session\'s process', async () => {
    const counter = await counterOf('counter');
    const a = await connect(counter, (await keyFor(counter, 'stdio://counter', 'app a')).key);
    const b = await connect(counter, (await keyFor(counter, 'stdio://counter', 'app b')).key);
    expect(textOf(await a.client.callTool({ name: 'count', arguments: {} }))).toBe('1');
    expect(textOf(await a.client.callTool({ name: 'count', arguments: {} }))).toBe('2');
    expect(textOf(await b.client.callTool({ name: 'count', arguments: {} }))).toBe('1');
    const pidA = Number(textOf(await a.client.callTool({ name: 'pid', arguments: {} })));
    const pidB = Number(textOf(await b.client.callTool({ name: 'pid', arguments: {} })));
    expect(pidA).not.toBe(pidB);
    await a.transport.terminateSession();
    await eventually(() => !running(pidA), 'the closed session\'s process to end');
    expect(running(pidB)).toBe(true);
    await b.transport.terminateSession();
    await eventually(async () => (await live(counter)) === 0, 'no process of the counter');
  });

  it('a revoked key ends its processes', async () => {
    const counter = await counterOf('revoked');
    const { key } = await keyFor(counter, 'stdio://revoked', 'to revoke');
    const { client } = await connect(counter, key);
    const pid = Number(textOf(await client.callTool({ name: 'pid', arguments: {} })));
    const keys = await admin.get('/svc/v1/keys');
    const made = keys.body.data.find((k: { name: string }) => k.name === 'to revoke');
    const revoked = await admin.post(`/svc/v1/keys/${made.id}/revoke`, {});
    expect(revoked.status, revoked.text).toBeLessThan(300);
    await eventually(() => !running(pid), 'the revoked grant\'s process to end');
  });

  it('disabling the instance ends its processes', async () => {
    const counter = await counterOf('disabled');
    const { client } = await connect(counter, (await keyFor(counter, 'stdio://disabled', 'disable app')).key);
    const pid = Number(textOf(await client.callTool({ name: 'pid', arguments: {} })));
    expect((await admin.patch(`/svc/v1/mcps/${counter}`, { enabled: false })).status).toBe(200);
    await eventually(() => !running(pid), 'the disabled instance\'s process to end');
  });

  it('adding a command that does not run is refused, naming it, and nothing is stored', async () => {
    const res = await admin.post('/svc/v1/mcps', { name: 'missing', command: { command: 'no-such-mcp-server-here' } });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('mcp_command_failed');
    expect(res.body.error.message).toContain('no-such-mcp-server-here');
    expect((await admin.get('/svc/v1/mcps')).body.data.map((m: { name: string }) => m.name)).not.toContain('missing');
  });

  it('a held call to a command server runs once the person approves it in the API', async () => {
    const counter = await counterOf('held');
    const made = await admin.post('/svc/v1/keys', { name: 'held app', mcp_servers: [{ url: 'stdio://held', instance_ids: [counter] }] });
    const asks = await admin.put(`/svc/v1/access-requests/${made.body.access_request_id}/tools`, { [counter]: { default: 'ask', tools: {} } });
    expect(asks.status, asks.text).toBe(200);
    const { client, transport } = await connect(counter, made.body.key);
    const answer = client.callTool({ name: 'count', arguments: {} });
    const call = await eventually(async () => ((await admin.get('/svc/v1/calls?status=pending')).body.data as { id: string; instance_id: string }[]).find((c) => c.instance_id === counter), 'the held call');
    expect((await admin.post(`/svc/v1/calls/${call.id}/approve`, {})).status).toBe(200);
    expect(textOf(await answer)).toBe('1');
    await transport.terminateSession();
  });

  it('a crash on a call answers a JSON-RPC error at once, and the next session has a fresh process', async () => {
    const crasher = await addInstance('crasher', node(hostile('crash-on-call')));
    const { key } = await keyFor(crasher, 'stdio://crasher', 'crash app');
    const first = await connect(crasher, key);
    const failed = await first.client.callTool({ name: 'count', arguments: {} }).then(
      () => null,
      (err: Error) => err,
    );
    expect(failed?.message).toMatch(/exited with code 3/);
    const next = await connect(crasher, key);
    expect((await next.client.listTools()).tools.length).toBeGreaterThan(0);
    await next.transport.terminateSession();
  });

  it('past --stdio-max-processes a new session gets 503 with Retry-After at once', async () => {
    const counter = await counterOf('busy');
    const { key } = await keyFor(counter, 'stdio://busy', 'busy app');
    const held = await Promise.all([0, 1, 2].map(() => connect(counter, key)));
    const res = await fetch(proxyUrl(counter), {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } }),
    });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('5');
    expect((await res.json()).error.code).toBe('mcp_servers_busy');
    for (const h of held) await h.transport.terminateSession();
    await eventually(async () => (await live(counter)) === 0, 'the busy sessions to end');
  });

  it('a stateless (2026-07-28) request reaches a process of its grant, without a session', async () => {
    const counter = await counterOf('stateless');
    const { key } = await keyFor(counter, 'stdio://stateless', 'stateless app');
    const call = (id: number) =>
      fetch(proxyUrl(counter), {
        method: 'POST',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Protocol-Version': '2026-07-28', 'Mcp-Method': 'tools/call', 'Mcp-Name': 'count' },
        body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'count', arguments: {} } }),
      });
    const one = await call(7);
    expect(one.status).toBe(200);
    expect(await one.json()).toMatchObject({ id: 7, result: { content: [{ text: '1' }] } });
    // the same id again: the grant's one process answers it, its counter kept
    expect(await (await call(7)).json()).toMatchObject({ id: 7, result: { content: [{ text: '2' }] } });
  });

  it('the REST endpoints reach a kept process of the grant', async () => {
    const counter = await counterOf('rest');
    const { key } = await keyFor(counter, 'stdio://rest', 'rest app');
    const auth = { Authorization: `Bearer ${key}` };
    const refreshed = await fetch(`${d.url}/svc/v1/apps/mcps/${counter}/tools/refresh`, { method: 'POST', headers: auth });
    expect(refreshed.status).toBe(200);
    expect((await refreshed.json()).tools.map((t: { name: string }) => t.name)).toEqual(['count', 'pid']);
    const run = async () => {
      const res = await fetch(`${d.url}/svc/v1/apps/mcps/${counter}/tools/count/execute`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: '{"params":{}}' });
      expect(res.status).toBe(200);
      return textOf((await res.json()).result);
    };
    expect(await run()).toBe('1');
    expect(await run()).toBe('2');
  });

});

describe('a long session', () => {
  // the heap of this process, the daemon's, after full collections
  v8.setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const heapUsed = () => {
    gc();
    gc();
    return process.memoryUsage().heapUsed;
  };

  it('serves thousands of calls with svc keeping nothing of each one', async () => {
    const counter = await counterOf('long');
    const { client, transport } = await connect(counter, (await keyFor(counter, 'stdio://long', 'long app')).key);
    const calls = async (n: number) => {
      for (let i = 0; i < n; i++) await client.callTool({ name: 'count', arguments: {} });
    };
    await calls(300);
    const before = heapUsed();
    await calls(3000);
    const grown = heapUsed() - before;
    expect(textOf(await client.callTool({ name: 'count', arguments: {} }))).toBe('3301');
    // what each call left for good was about 6 KiB (18 MiB here) before svc dropped what the SDK's transport kept
    expect(grown).toBeLessThan(4 * 1024 * 1024);
    await transport.terminateSession();
  }, 120_000);
});

describe('a stop of svc', () => {
  it('ends every child', async () => {
    const own = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    const ownAdmin = await new Api(own.url).login('admin', own.adminPassword);
    const made = await ownAdmin.post('/svc/v1/mcps', { name: 'counter', command: node(hostile('stateful')) });
    const instance = made.body.instance.id;
    const key = (await ownAdmin.post('/svc/v1/keys', { name: 'stop app', mcp_servers: [{ url: 'stdio://counter', instance_ids: [instance] }] })).body.key;
    const transport = new StreamableHTTPClientTransport(new URL(`${own.url}/svc/v1/apps/mcps/${instance}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${key}` } } });
    const client = new Client({ name: 'test-app', version: '1.0.0' });
    await client.connect(transport);
    const pid = Number(textOf(await client.callTool({ name: 'pid', arguments: {} })));
    expect(running(pid)).toBe(true);
    await own.stop();
    expect(running(pid)).toBe(false);
  });
});
