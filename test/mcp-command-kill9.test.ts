/**
 * What svc starts, svc ends, even when it is killed with SIGKILL: a real `svc serve` with a command
 * MCP server that ignores SIGTERM and the end of its input, reached by an app's MCP SDK client;
 * the daemon is killed with -9 while the child serves, and the child is gone soon after (svc's
 * watchdog), and a start on the same data dir serves the instance again with a fresh process.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { cleanEnv, type ServeProcess, startServe } from './helpers/cli.js';
import { tempDir } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { eventually } from './helpers/wait.js';

vi.setConfig({ testTimeout: 90_000 });

const STUBBORN = path.join(import.meta.dirname, 'helpers', 'hostile-stdio', 'stubborn.mjs');
/**
 * An argument only this file's children carry: other files run the same server at the same time
 * (the supervisor's and the reaping tests), and this file counts and kills only its own.
 */
const TAG = `--kill9-test-${randomUUID()}`;

/** Whether `pid` still runs (a zombie has exited: only its parent's wait is left). */
async function alive(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  return stat !== null && !/\) Z /.test(stat);
}

/** The pids of live processes running `script`, read from /proc. */
async function pidsRunning(script: string): Promise<number[]> {
  // the script with this file's tag after it: a child of this file
  const { readdir } = await import('node:fs/promises');
  const out: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const cmdline = await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '');
    const stat = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    // a zombie has exited: only its parent's wait is left
    const args = cmdline.split('\0');
    if (args.includes(script) && args.includes(TAG) && !/\) Z /.test(stat)) out.push(Number(name));
  }
  return out;
}

async function callEcho(base: string, instanceId: string, key: string): Promise<{ client: Client; text: string }> {
  const client = new Client({ name: 'kill9-app', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/svc/v1/apps/mcps/${instanceId}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${key}` } } }));
  const tools = await client.listTools();
  return { client, text: tools.tools.map((t) => t.name).join(',') };
}

describe.skipIf(process.platform !== 'linux')('command servers when svc is killed with SIGKILL', () => {
  const running: ServeProcess[] = [];
  afterEach(async () => {
    for (const s of running.splice(0)) await s.stop().catch(() => undefined);
    for (const pid of await pidsRunning(STUBBORN)) process.kill(pid, 'SIGKILL');
  });

  it('a child that ignores SIGTERM and its input closing is gone after kill -9 of svc, and the next start serves the instance again', async () => {
    const dataDir = path.join(await tempDir(), 'data');
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    const env = cleanEnv({ SVC_KEYCHAIN: 'file', SVC_HOME: dataDir, SVC_RATE_LIMIT_CLIENT: '0', SVC_RATE_LIMIT_ADDRESS: '0' });
    const first = await startServe(dataDir, env);
    running.push(first);
    const password = first.stdout().match(/shown only once\):\s*\n\s*\n\s+(\S+)\s*\n/)?.[1];
    expect(password, first.stdout()).toBeTruthy();
    const admin = await new Api(first.url).login('admin', password!);
    const made = await admin.post('/svc/v1/mcps', { name: 'Stubborn', command: { command: process.execPath, args: [STUBBORN, TAG] } });
    expect(made.status, made.text).toBe(201);
    const id = made.body.instance.id as string;
    const key = await admin.post('/svc/v1/keys', { name: 'app', mcp_servers: [{ url: 'stdio://stubborn', instance_ids: [id] }] });
    expect(key.status, key.text).toBe(201);

    const { text } = await callEcho(first.url, id, key.body.key);
    expect(text.length).toBeGreaterThan(0);
    const children = await pidsRunning(STUBBORN);
    expect(children).toHaveLength(1);

    process.kill(first.pid, 'SIGKILL');
    await first.exited;
    // the watchdog sends TERM, then KILL after 1.5 s, to what svc started
    await eventually(async () => !(await alive(children[0])), 'the child to be gone after kill -9 of svc', 10_000);

    const second = await startServe(dataDir, env);
    running.push(second);
    const again = await callEcho(second.url, id, key.body.key);
    expect(again.text).toBe(text);
    const fresh = await pidsRunning(STUBBORN);
    expect(fresh).toHaveLength(1);
    expect(fresh[0]).not.toBe(children[0]);
    await again.client.close();
  });
});
