/**
 * When a command server's processes end, and when they may not start, through the real daemon:
 * a grant that no longer names an instance, an API key revoked with `svc keys revoke`, the bound
 * of processes in all, and a crash loop's back-off (with the daemon's clock moved, not waited).
 */
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { cleanEnv, runSvcInProcess } from './helpers/cli.js';
import { startTestDaemon, testClock } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { HOSTILE, running } from './helpers/command.js';
import { eventually } from './helpers/wait.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const hostile = (name: string) => path.join(HOSTILE, `${name}.mjs`);
const textOf = (result: unknown) => (result as { content: { text: string }[] }).content[0].text;

/** A daemon of its own, with helpers bound to it. */
async function daemonWith(opts: Parameters<typeof startTestDaemon>[0] = {}) {
  const d = await startTestDaemon({ ...opts, config: { rateLimitClient: 0, rateLimitAddress: 0, ...opts.config } });
  const admin = await new Api(d.url).login('admin', d.adminPassword);
  const proxyUrl = (id: string) => `${d.url}/svc/v1/apps/mcps/${id}/mcp`;
  return {
    d,
    admin,
    proxyUrl,
    async addInstance(name: string, script: string): Promise<string> {
      const res = await admin.post('/svc/v1/mcps', { name, command: { command: process.execPath, args: [hostile(script)] }, try: false });
      expect(res.status, res.text).toBe(201);
      return res.body.instance.id;
    },
    async connect(instance: string, key: string) {
      const transport = new StreamableHTTPClientTransport(new URL(proxyUrl(instance)), { requestInit: { headers: { Authorization: `Bearer ${key}` } } });
      const client = new Client({ name: 'test-app', version: '1.0.0' });
      await client.connect(transport);
      return { client, transport };
    },
    /** A stateless (2026-07-28) call of the pid tool: the grant's own process answers it. */
    async statelessPid(instance: string, key: string): Promise<number> {
      const res = await fetch(proxyUrl(instance), {
        method: 'POST',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Protocol-Version': '2026-07-28', 'Mcp-Method': 'tools/call', 'Mcp-Name': 'pid' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'pid', arguments: {} } }),
      });
      expect(res.status).toBe(200);
      return Number(textOf((await res.json()).result));
    },
    initialize: (instance: string, key: string) =>
      fetch(proxyUrl(instance), {
        method: 'POST',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } }),
      }),
    processes: async (instance: string) => (await admin.get(`/svc/v1/mcps/${instance}`)).body.instance.processes,
  };
}

describe('a grant that no longer covers an instance', () => {
  let s: Awaited<ReturnType<typeof daemonWith>>;
  beforeAll(async () => {
    s = await daemonWith();
  });
  afterAll(() => s?.d.stop());

  it("narrowed to leave an instance out, ends the grant's processes of that instance (session and stateless), and only those", async () => {
    const kept = await s.addInstance('kept', 'stateful');
    const dropped = await s.addInstance('dropped', 'stateful');
    const made = await s.admin.post('/svc/v1/keys', { name: 'two servers', mcp_servers: [{ url: 'stdio://kept', instance_ids: [kept] }, { url: 'stdio://dropped', instance_ids: [dropped] }] });
    expect(made.status, made.text).toBe(201);
    const { key, access_request_id: grantId } = made.body;
    const onKept = await s.connect(kept, key);
    const onDropped = await s.connect(dropped, key);
    const keptPid = Number(textOf(await onKept.client.callTool({ name: 'pid', arguments: {} })));
    const droppedPid = Number(textOf(await onDropped.client.callTool({ name: 'pid', arguments: {} })));
    const droppedStateless = await s.statelessPid(dropped, key);
    // another grant's process of the dropped instance is not this grant's to end
    const other = (await s.admin.post('/svc/v1/keys', { name: 'other app', mcp_servers: [{ url: 'stdio://dropped', instance_ids: [dropped] }] })).body.key;
    const otherPid = await s.statelessPid(dropped, other);

    // the grant's record narrowed in svc's store, as any surface that narrows it would write it
    await s.d.deps.repos.accessRequests.update(grantId, (r) => {
      r.approved = { version: '1', mcp_servers: [{ url: 'stdio://kept', instance_ids: [kept] }] };
    });
    await eventually(() => !running(droppedPid) && !running(droppedStateless), "the narrowed grant's processes of the dropped instance to end");
    expect(running(keptPid)).toBe(true);
    expect(running(otherPid)).toBe(true);
    expect(textOf(await onKept.client.callTool({ name: 'pid', arguments: {} }))).toBe(String(keptPid));
    await onKept.transport.terminateSession();
  });

  it('an API key revoked with svc keys revoke ends the processes it had through --mcp', async () => {
    const instance = await s.addInstance('cli-key', 'stateful');
    const env = cleanEnv({ SVC_HOME: s.d.dataDir, NO_COLOR: '1' });
    const created = await runSvcInProcess(['keys', 'create', 'cli app', '--mcp', `stdio://cli-key=${instance}`, '--json'], { env });
    expect(created.exitCode, created.stderr).toBe(0);
    const { key, id } = JSON.parse(created.stdout) as { key: string; id: string };
    const { client } = await s.connect(instance, key);
    const sessionPid = Number(textOf(await client.callTool({ name: 'pid', arguments: {} })));
    const statelessPid = await s.statelessPid(instance, key);
    const revoked = await runSvcInProcess(['keys', 'revoke', id], { env });
    expect(revoked.exitCode, revoked.stderr).toBe(0);
    await eventually(() => !running(sessionPid) && !running(statelessPid), "the revoked key's processes to end");
    await eventually(async () => (await s.processes(instance)).live === 0, 'no live process of the instance');
  });
});

describe('--stdio-max-processes-total alone', () => {
  let s: Awaited<ReturnType<typeof daemonWith>>;
  beforeAll(async () => {
    // the bound of one instance is far off: only the bound in all can refuse
    s = await daemonWith({ config: { stdioMaxProcesses: 16, stdioMaxProcessesTotal: 2 } });
  });
  afterAll(() => s?.d.stop());

  it('refuses a session past the bound in all with 503 and Retry-After at once, across instances, and takes one again once a process ends', async () => {
    const one = await s.addInstance('one', 'stateful');
    const two = await s.addInstance('two', 'stateful');
    const key = (await s.admin.post('/svc/v1/keys', { name: 'bounded', mcp_servers: [{ url: 'stdio://one', instance_ids: [one] }, { url: 'stdio://two', instance_ids: [two] }] })).body.key;
    const a = await s.connect(one, key);
    const b = await s.connect(two, key);
    for (const instance of [one, two]) {
      const res = await s.initialize(instance, key);
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      const body = await res.json();
      expect(body.error.code).toBe('mcp_servers_busy');
      expect(body.error.message).toContain('svc already runs 2 command server processes');
    }
    expect((await s.processes(one)).live).toBe(1);
    await a.transport.terminateSession();
    await eventually(async () => (await s.processes(one)).live === 0, "the first session's process to end");
    const again = await s.connect(one, key);
    expect(textOf(await again.client.callTool({ name: 'count', arguments: {} }))).toBe('1');
    await again.transport.terminateSession();
    await b.transport.terminateSession();
  });
});

describe('a crash loop', () => {
  const clock = testClock();
  let s: Awaited<ReturnType<typeof daemonWith>>;
  beforeAll(async () => {
    s = await daemonWith({ clock });
  });
  afterAll(() => s?.d.stop());

  it('backs starts off with 503 and Retry-After, says why in the API and svc mcp list, and starts again once the wait is over', async () => {
    const instance = await s.addInstance('crashy', 'exit-at-start');
    const key = (await s.admin.post('/svc/v1/keys', { name: 'crashy app', mcp_servers: [{ url: 'stdio://crashy', instance_ids: [instance] }] })).body.key;
    // each start fails (the child exits with code 2 at once) until svc stops starting it
    let refused: Response | undefined;
    for (let i = 0; i < 20 && !refused; i++) {
      const res = await s.initialize(instance, key);
      if (res.status === 503) refused = res;
      else await res.body?.cancel();
    }
    expect(refused, 'a start refused within 20 tries').toBeDefined();
    expect(refused!.headers.get('retry-after')).toBe('10');
    const body = await refused!.json();
    expect(body.error.code).toBe('mcp_server_backoff');
    expect(body.error.message).toMatch(/keeps failing \(5 failures within 60 s, the last exited with code 2\)/);
    // the last child's process group may take a moment to be gone after its exit was answered
    const processes = await eventually(async () => {
      const p = await s.processes(instance);
      return p.live === 0 ? p : null;
    }, 'the failed children to be gone');
    expect(processes.status).toBe('backing off for 10 s: 5 failures within 60 s, the last exited with code 2');
    expect(processes.last_exit).toMatchObject({ code: 2, reason: 'crash' });
    const listed = await runSvcInProcess(['mcp', 'list'], { env: cleanEnv({ SVC_HOME: s.d.dataDir, NO_COLOR: '1' }) });
    expect(listed.exitCode, listed.stderr).toBe(0);
    expect(listed.stdout.split('\n').find((l) => l.startsWith(instance))).toContain('backing off for 10 s: 5 failures within 60 s, the last exited with code 2');
    // a refused start ran nothing and counts as no failure: still the same wait
    expect((await s.initialize(instance, key)).status).toBe(503);
    expect((await s.processes(instance)).status).toBe('backing off for 10 s: 5 failures within 60 s, the last exited with code 2');
    clock.advance(10_001);
    const tried = await s.initialize(instance, key);
    expect(tried.status).not.toBe(503);
    expect(JSON.stringify(await tried.json())).toMatch(/exited with code 2/);
    await eventually(async () => (await s.processes(instance)).status === 'not running; the last one exited with code 2', 'the status after the new start failed');
  });
});
