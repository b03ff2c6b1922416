import { readFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import OpenAI from 'openai';
import { expect, it } from 'vitest';
import { localSocketPlace } from '../src/daemon-info.js';
import { startTestDaemon, tempDir } from './helpers/daemon.js';
import { Api, createBody } from './helpers/http.js';
import { approvedScope, authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { startMcpServer } from './helpers/mcp-servers.js';
import { startUpstream } from './helpers/upstream.js';

it('shuts down gracefully: an in-flight stream finishes, acknowledged writes are on disk, new connections are refused', async () => {
  const upstream = await startUpstream({ chunkDelayMs: 150, chunks: 4 });
  const dataDir = await tempDir();
  const d = await startTestDaemon({ dataDir, config: { rateLimitClient: 0, rateLimitAddress: 0 } });
  try {
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    await admin.post('/svc/v1/providers', { name: 'local', base_url: upstream.url });
    const { clientId, secret } = await registerClient(admin);
    const { scope } = await approvedScope(d, admin, clientId);
    const token = (await authorize(await oidcConfig(d, clientId, secret), admin, scope)).tokens!.access_token;
    const openai = new OpenAI({ baseURL: `${d.url}/v1`, apiKey: token, maxRetries: 0 });

    const stream = await openai.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'x' }], stream: true });
    const created = await new Api(d.url).post('/svc/v1/apps/request-access', createBody());
    expect(created.status).toBe(201);

    let closing: Promise<void> | undefined;
    let text = '';
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      closing ??= d.close(); // SIGTERM does exactly this
    }
    expect(text).toBe('part0 part1 part2 part3 ');
    await closing;

    const onDisk = JSON.parse(await readFile(path.join(dataDir, 'db.json'), 'utf8'));
    expect(onDisk.access_requests.some((r: { id: string }) => r.id === created.body.id)).toBe(true);
    await expect(fetch(`${d.url}/svc/v1/health`)).rejects.toThrow();
  } finally {
    await d.stop();
    await upstream.close();
  }
});

it('stops its start steps in the reverse of their order: daemon.json goes last but the lock, once nothing answers', async () => {
  const d = await startTestDaemon();
  const stepsLogged = (msg: string) =>
    d.logs
      .flatMap((chunk) => chunk.split('\n'))
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { msg: string; step?: string })
      .filter((e) => e.msg === msg)
      .map((e) => e.step);
  expect(stepsLogged('start step')).toEqual(['lock', 'daemon.json', 'store', 'listen', 'master key', 'first-start hold', 'key check', 'CLI socket', 'write daemon.json', 'activity', 'command servers', 'app', 'first admin', 'idle memory']);
  await d.stop();
  // the steps with nothing to undo (the key, the file's writing, the first admin) are not listed
  expect(stepsLogged('stop step')).toEqual(['idle memory', 'app', 'command servers', 'activity', 'CLI socket', 'first-start hold', 'listen', 'store', 'daemon.json', 'lock']);
  expect(stepsLogged('shutdown step failed')).toEqual([]);
});

it('closes idle connections at once: a keep-alive socket, one that never sent a request, and an idle CLI connection do not hold shutdown', { timeout: 8_000 }, async () => {
  const d = await startTestDaemon();
  const closed = (s: net.Socket) => new Promise<void>((resolve) => s.once('close', () => resolve()));
  const connect = (path?: string) =>
    new Promise<net.Socket>((resolve, reject) => {
      const s = path ? net.connect(path, () => resolve(s)) : net.connect(d.port, '127.0.0.1', () => resolve(s));
      s.on('error', reject);
    });
  // the CLI's socket: a keep-alive connection left idle after its answer (a `svc review` open)
  const cli = await connect(localSocketPlace(d.dataDir).path);
  cli.on('error', () => undefined);
  cli.write(`GET /svc/v1/health HTTP/1.1\r\nHost: 127.0.0.1:${d.port}\r\nConnection: keep-alive\r\n\r\n`);
  await new Promise((r) => cli.once('data', r));
  const cliClosed = closed(cli);
  // a browser's spare connection: open, nothing sent
  const silent = await connect();
  silent.on('error', () => undefined);
  // a keep-alive connection after one answered request
  const kept = await connect();
  kept.on('error', () => undefined);
  kept.write(`GET /svc/v1/health HTTP/1.1\r\nHost: 127.0.0.1:${d.port}\r\nConnection: keep-alive\r\n\r\n`);
  await new Promise((r) => kept.once('data', r));
  const bothClosed = Promise.all([closed(silent), closed(kept), cliClosed]);
  const stopping = Date.now();
  await d.stop();
  await bothClosed;
  // an idle connection is not waited for until its keep-alive runs out (5 s)
  expect(Date.now() - stopping).toBeLessThan(2_000);
  // the 10 s forced close for busy connections never had to run
  expect(d.logs.join('')).not.toContain('still busy');
});

/** Resolves once `check` holds; a wait that runs out fails the test. */
async function until(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

it('a stop with an MCP host connected (its GET stream open) takes under 2 s, while an ordinary request in flight still finishes', { timeout: 20_000 }, async () => {
  const mcp = await startMcpServer({ stateful: true });
  const upstream = await startUpstream({ chunkDelayMs: 150, chunks: 4 });
  const d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
  let client: Client | undefined;
  try {
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    await admin.post('/svc/v1/providers', { name: 'local', base_url: upstream.url });
    const instance = (await admin.post('/svc/v1/mcps', { name: 'notes', url: mcp.url })).body.instance.id as string;
    const key = (await admin.post('/svc/v1/keys', { name: 'host', mcp_servers: [{ url: mcp.url, instance_ids: [instance] }] })).body.key as string;

    // the SDK client opens its GET stream right after initialization, and keeps it
    client = new Client({ name: 'connected-host', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${d.url}/svc/v1/apps/mcps/${instance}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${key}` } } }));
    await until(() => mcp.seen.some((r) => r.method === 'GET'), 'the host\'s GET stream to reach the MCP server');

    const openai = new OpenAI({ baseURL: `${d.url}/v1`, apiKey: key, maxRetries: 0 });
    const stream = await openai.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'x' }], stream: true });
    let text = '';
    let closing: Promise<void> | undefined;
    let started = 0;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      if (!closing) {
        started = performance.now();
        closing = d.close(); // SIGTERM and Ctrl-C do exactly this
      }
    }
    await closing;
    const took = performance.now() - started;
    expect(text).toBe('part0 part1 part2 part3 ');
    expect(took).toBeLessThan(2_000);
    expect(d.logs.join('')).not.toContain('still busy');
  } finally {
    await client?.close().catch(() => undefined);
    await d.stop();
    await upstream.close();
    await mcp.close();
  }
});
