import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { BIN, cleanEnv, REPO, requireFreshDist } from './helpers/cli.js';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api } from './helpers/http.js';

/**
 * `npm run demo` as a person runs it: its servers added to their daemon, used, then Ctrl-C. The
 * steps keep their order when the suite is shuffled: Ctrl-C comes last.
 */
describe('npm run demo', { shuffle: false }, () => {
  let d: TestDaemon;
  let admin: Api;
  let demo: ChildProcess;
  let out = '';
  let err = '';
  let exited: Promise<number | null>;

  beforeAll(async () => {
    requireFreshDist(); // it talks to the daemon through the built CLI client
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    const script = JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')).scripts.demo as string;
    expect(script).toBe('node demo/run.mjs');
    demo = spawn(process.execPath, ['demo/run.mjs'], { cwd: REPO, env: cleanEnv({ SVC_HOME: d.dataDir }), stdio: ['ignore', 'pipe', 'pipe'] });
    demo.stdout!.on('data', (c) => (out += c));
    demo.stderr!.on('data', (c) => (err += c));
    exited = new Promise((resolve) => demo.once('exit', (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      demo.stdout!.on('data', () => out.includes('Ctrl-C stops the demo') && resolve());
      void exited.then((code) => reject(new Error(`the demo exited (${code}) before it was ready\n${out}\n${err}`)));
    });
  }, 60_000);

  afterAll(async () => {
    if (demo.exitCode === null) demo.kill('SIGKILL');
    await d?.stop();
  });

  const instance = async () => ((await admin.get('/svc/v1/mcps')).body.data as { id: string; name: string; url: string; proxy_url: string }[]).find((m) => m.name.startsWith('demo-'));

  it('adds its model server as the provider demo and its MCP server as demo-..., and says what to do next', async () => {
    const providers = (await admin.get('/svc/v1/providers')).body.data as { name: string; discovered_models: string[] }[];
    expect(providers.find((p) => p.name === 'demo')?.discovered_models).toEqual(['demo-chat', 'demo-embed']);
    const mcp = await instance();
    expect(mcp?.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    expect(out).toContain(`SVC=$(svc status --url) MCP=${mcp!.url} INSTANCE=${mcp!.id}\n`);
    expect(out).toContain('KEY=$(svc keys create demo --mcp "$MCP=$INSTANCE" --expires 1h)');
    expect(out).toContain(mcp!.proxy_url);
  });

  it('the openai client works through svc against the demo provider: models, chat (streamed and not), embeddings', async () => {
    const key = (await admin.post('/svc/v1/keys', { name: 'demo-openai' })).body.key as string;
    const openai = new OpenAI({ baseURL: `${d.url}/v1`, apiKey: key, maxRetries: 0, timeout: 10_000 });
    const ids = (await openai.models.list()).data.map((m) => m.id);
    expect(ids).toEqual(expect.arrayContaining(['demo-chat', 'demo-embed']));
    const reply = await openai.chat.completions.create({ model: 'demo-chat', messages: [{ role: 'user', content: 'Hello' }] });
    expect(reply.choices[0].message.content).toBe('Hello from the svc demo model. You said: "Hello"');
    const stream = await openai.chat.completions.create({ model: 'demo-chat', messages: [{ role: 'user', content: 'Hi there' }], stream: true });
    let text = '';
    let chunks = 0;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      chunks++;
    }
    expect(text).toBe('Hello from the svc demo model. You said: "Hi there"');
    expect(chunks).toBeGreaterThan(3);
    const embedding = await openai.embeddings.create({ model: 'demo-embed', input: 'hello' });
    expect(embedding.data[0].embedding).toHaveLength(8);
    const again = await openai.embeddings.create({ model: 'demo-embed', input: 'hello', encoding_format: 'float' });
    expect(again.data[0].embedding.map((x) => Math.round(x * 1e4))).toEqual(embedding.data[0].embedding.map((x) => Math.round(x * 1e4)));
  });

  it('its MCP server, through svc\'s proxy with a key for that instance: a read-only tool and a destructive one, marked so', async () => {
    const mcp = (await instance())!;
    const key = (await admin.post('/svc/v1/keys', { name: 'demo-mcp', mcp_servers: [{ url: mcp.url, instance_ids: [mcp.id] }] })).body.key as string;
    const client = new Client({ name: 'demo-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(mcp.proxy_url), { requestInit: { headers: { Authorization: `Bearer ${key}` } } }));
    try {
      const { tools } = await client.listTools();
      const byName = new Map(tools.map((t) => [t.name, t]));
      expect(byName.get('list_notes')?.annotations).toMatchObject({ readOnlyHint: true });
      expect(byName.get('delete_note')?.annotations).toMatchObject({ destructiveHint: true, readOnlyHint: false });
      const listed = await client.callTool({ name: 'list_notes', arguments: {} });
      expect(JSON.stringify(listed.content)).toContain('groceries');
      // destructive, so the call waits for the person's yes (svc calls approve, the page, svc review)
      const pending = client.callTool({ name: 'delete_note', arguments: { name: 'groceries' } });
      let held: { id: string } | undefined;
      for (const deadline = Date.now() + 10_000; !held; await new Promise((r) => setTimeout(r, 50))) {
        held = ((await admin.get('/svc/v1/calls?status=pending')).body.data as { id: string; tool: string }[]).find((c) => c.tool === 'delete_note');
        if (!held && Date.now() > deadline) throw new Error('the destructive call was not held for the person');
      }
      expect((await admin.post(`/svc/v1/calls/${held.id}/approve`, {})).status).toBe(200);
      const deleted = await pending;
      expect(deleted.isError).toBeFalsy();
      expect(JSON.stringify((await client.callTool({ name: 'list_notes', arguments: {} })).content)).not.toContain('groceries');
    } finally {
      await client.close();
    }
  });

  it('the commands it prints run as printed', async () => {
    const block = out.slice(out.indexOf('Try it from another terminal'), out.indexOf('An MCP host connects to')).split('\n').slice(1).join('\n');
    const script = `svc() { node ${JSON.stringify(BIN)} "$@"; }\nset -e\n${block}`;
    const run = await execa('bash', ['-c', script], { cwd: REPO, env: cleanEnv({ SVC_HOME: d.dataDir }), extendEnv: false, reject: false, timeout: 60_000 });
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stdout).toContain('Hello from the svc demo model. You said: \\"Hello\\"');
    expect(run.stdout).toContain('welcome: svc passed this call on');
  });

  it('Ctrl-C removes what it added and stops', async () => {
    demo.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(out).toContain('Removed the provider demo.');
    expect(out).toMatch(/Removed the MCP instance demo-\d+\./);
    expect(err).toBe('');
    expect(((await admin.get('/svc/v1/providers')).body.data as { name: string }[]).map((p) => p.name)).not.toContain('demo');
    expect(await instance()).toBeUndefined();
  });
});
