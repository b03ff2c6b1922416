/**
 * Command servers (2025-era programs over stdio) reached in both eras of the protocol through the
 * real daemon: the stateless 2026-07-28 era (server/discover answered from the child's own
 * initialize, results translated to that era), and the 2025 era's GET stream and SSE answers.
 */
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client';
import { ToolListChangedNotificationSchema, LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { eventually } from './helpers/wait.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const hostile = (name: string) => path.join(import.meta.dirname, 'helpers', 'hostile-stdio', `${name}.mjs`);

let d: TestDaemon;
let admin: Api;

beforeAll(async () => {
  d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
  admin = await new Api(d.url).login('admin', d.adminPassword);
});
afterAll(() => d?.stop());

async function addInstance(name: string, script: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await admin.post('/svc/v1/mcps', { name, command: { command: process.execPath, args: [hostile(script)] }, ...extra });
  expect(res.status, res.text).toBe(201);
  return res.body.instance.id;
}

async function keyFor(instance: string, url: string, name: string): Promise<string> {
  const res = await admin.post('/svc/v1/keys', { name, mcp_servers: [{ url, instance_ids: [instance] }] });
  expect(res.status, res.text).toBe(201);
  return res.body.key;
}

const proxyUrl = (id: string) => `${d.url}/svc/v1/apps/mcps/${id}/mcp`;
const MODERN = '2026-07-28';
const meta = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' }, 'io.modelcontextprotocol/clientCapabilities': {} };

/** One raw request of the stateless era: no initialize, no session, the method and name in headers. */
async function modern(instance: string, key: string, id: number, method: string, params: Record<string, unknown> = {}, name?: string, status = 200) {
  const res = await fetch(proxyUrl(instance), {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${key}`,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'Mcp-Protocol-Version': MODERN,
      'Mcp-Method': method,
      ...(name ? { 'Mcp-Name': name } : {}),
    },
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: meta } }),
  });
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  return res.json();
}

describe('the stateless 2026-07-28 era on a command server', () => {
  it('server/discover is answered from the child\'s initialize, and tools/list and tools/call carry the era\'s result fields', async () => {
    const instance = await addInstance('talkative', 'talkative');
    const key = await keyFor(instance, 'stdio://talkative', 'modern app');
    const discovered = await modern(instance, key, 1, 'server/discover');
    expect(discovered).toEqual({
      jsonrpc: '2.0',
      id: 1,
      result: {
        resultType: 'complete',
        supportedVersions: [MODERN],
        // the tasks capability is not of that era; list changes need a stream the stateless era lacks
        capabilities: { tools: {}, logging: {} },
        serverInfo: { name: 'talkative', version: '2.1.0' },
        instructions: 'Call count to count.',
        ttlMs: 0,
        cacheScope: 'private',
        _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'talkative', version: '2.1.0' } },
      },
    });
    const listed = await modern(instance, key, 2, 'tools/list');
    expect(listed.result).toMatchObject({ resultType: 'complete', ttlMs: 0, cacheScope: 'private' });
    expect(listed.result.tools.map((t: { name: string }) => t.name)).toEqual(['count', 'pid']);
    const called = await modern(instance, key, 3, 'tools/call', { name: 'count', arguments: {} }, 'count');
    expect(called).toEqual({ jsonrpc: '2.0', id: 3, result: { resultType: 'complete', content: [{ type: 'text', text: '1' }] } });
    // a result of another method is of the era too; an error stays an error
    expect((await modern(instance, key, 4, 'ping')).result).toEqual({ resultType: 'complete' });
    // a method the child does not implement: 404 with -32601, as that era's servers answer it
    const unknown = await modern(instance, key, 5, 'prompts/list', {}, undefined, 404);
    expect(unknown.error).toMatchObject({ code: -32601 });
    expect(unknown.result).toBeUndefined();
    // the discover was svc's: the child was initialized once and answered the rest
    expect((await admin.get(`/svc/v1/mcps/${instance}`)).body.instance.processes.live).toBe(1);
  });

  it('a GET or DELETE of that era is 405 (it has no stream and no sessions); one of the 2025 era without a session is told to begin one', async () => {
    const instance = await addInstance('talkative-verbs', 'talkative');
    const key = await keyFor(instance, 'stdio://talkative-verbs', 'verbs app');
    for (const method of ['GET', 'DELETE']) {
      const res = await fetch(proxyUrl(instance), { method, headers: { Authorization: `Bearer ${key}`, Accept: 'application/json, text/event-stream', 'Mcp-Protocol-Version': MODERN } });
      expect(res.status, method).toBe(405);
      expect(res.headers.get('allow')).toBe('POST');
      expect((await res.json()).error).toMatchObject({ code: -32000 });
    }
    const old = await fetch(proxyUrl(instance), { headers: { Authorization: `Bearer ${key}`, Accept: 'text/event-stream', 'Mcp-Protocol-Version': '2025-11-25' } });
    expect(old.status).toBe(400);
    expect((await old.json()).error.message).toMatch(/start one with initialize/);
    // no process was started for any of them
    expect((await admin.get(`/svc/v1/mcps/${instance}`)).body.instance.processes.live).toBe(0);
  });

  it('the allow-list still filters the translated tools/list', async () => {
    const instance = await addInstance('talkative-limited', 'talkative', { allow_tools: ['pid'] });
    const key = await keyFor(instance, 'stdio://talkative-limited', 'limited modern app');
    const listed = await modern(instance, key, 1, 'tools/list');
    expect(listed.result).toMatchObject({ resultType: 'complete', ttlMs: 0, cacheScope: 'private', tools: [{ name: 'pid' }] });
    expect(listed.result.tools).toHaveLength(1);
  });

  it('the v2 SDK client pinned to 2026-07-28 discovers, lists and calls a command server', async () => {
    const instance = await addInstance('talkative-sdk', 'talkative');
    const key = await keyFor(instance, 'stdio://talkative-sdk', 'sdk modern app');
    const client = new ModernClient({ name: 'modern-host', version: '1.0.0' }, { versionNegotiation: { mode: { pin: MODERN } } });
    await client.connect(new ModernTransport(new URL(proxyUrl(instance)), { requestInit: { headers: { Authorization: `Bearer ${key}` } } }));
    expect(client.getServerVersion()).toMatchObject({ name: 'talkative', version: '2.1.0' });
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['count', 'pid']);
    expect((await client.callTool({ name: 'count', arguments: {} })).content).toEqual([{ type: 'text', text: '1' }]);
    await client.close();
  });

  it('a request of the 2025 era without a session gets the child\'s answer as it is', async () => {
    const instance = await addInstance('talkative-old', 'talkative');
    const key = await keyFor(instance, 'stdio://talkative-old', 'stateless old app');
    const res = await fetch(proxyUrl(instance), {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Protocol-Version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'count', arguments: {} } }),
    });
    expect(await res.json()).toEqual({ jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: '1' }] } });
  });
});

describe('the 2025 era on a command server: streams', () => {
  /** An SDK client whose notifications of the child (log messages, tool list changes) are kept. */
  async function listening(instance: string, key: string) {
    const heard: string[] = [];
    const transport = new StreamableHTTPClientTransport(new URL(proxyUrl(instance)), { requestInit: { headers: { Authorization: `Bearer ${key}` } } });
    const client = new Client({ name: 'listening-app', version: '1.0.0' });
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void heard.push(`log ${String(n.params.data)}`));
    client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => void heard.push(`tools changed ${String((n.params?._meta as { pid?: number } | undefined)?.pid)}`));
    await client.connect(transport);
    const notify = async () => Number((await client.callTool({ name: 'notify', arguments: {} }) as { content: { text: string }[] }).content[0].text);
    return { client, transport, heard, notify };
  }

  it("the GET stream carries a session's child's notifications to that session, never to another app's", async () => {
    const instance = await addInstance('talkative-streams', 'talkative');
    const a = await listening(instance, await keyFor(instance, 'stdio://talkative-streams', 'app a'));
    const b = await listening(instance, await keyFor(instance, 'stdio://talkative-streams', 'app b'));
    // the SDK opens its GET stream once the session is up: what the child sent before it is not kept
    let pidA = 0;
    await eventually(async () => {
      pidA = await a.notify();
      return a.heard.includes(`tools changed ${pidA}`);
    }, "app a's notifications on its GET stream");
    let pidB = 0;
    await eventually(async () => {
      pidB = await b.notify();
      return b.heard.includes(`tools changed ${pidB}`);
    }, "app b's notifications on its GET stream");
    expect(pidA).not.toBe(pidB);
    expect(a.heard).toContain(`log hello from ${pidA}`);
    expect(b.heard).toContain(`log hello from ${pidB}`);
    expect(a.heard.every((h) => h.endsWith(String(pidA)))).toBe(true);
    expect(b.heard.every((h) => h.endsWith(String(pidB)))).toBe(true);
    await a.transport.terminateSession();
    await b.transport.terminateSession();
  });
});

describe('a POST that accepts only text/event-stream', () => {
  /** The JSON-RPC messages of an SSE body, each event's data. */
  const eventsOf = (text: string) =>
    text
      .split(/\r?\n\r?\n/)
      .filter((e) => e.trim())
      .map((e) => JSON.parse(e.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n')));

  it('is answered as an event stream, in a session and statelessly; one that accepts JSON gets JSON', async () => {
    const instance = await addInstance('talkative-sse', 'talkative', { allow_tools: ['count'] });
    const key = await keyFor(instance, 'stdio://talkative-sse', 'sse app');
    const post = (body: unknown, headers: Record<string, string>) =>
      fetch(proxyUrl(instance), { method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });
    const sse = { Accept: 'text/event-stream' };
    const init = await post({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'sse', version: '1' } } }, sse);
    expect(init.status).toBe(200);
    expect(init.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const sid = init.headers.get('mcp-session-id')!;
    expect(sid).toBeTruthy();
    expect(eventsOf(await init.text())).toMatchObject([{ id: 1, result: { serverInfo: { name: 'talkative' } } }]);
    const session = { ...sse, 'Mcp-Session-Id': sid, 'Mcp-Protocol-Version': '2025-06-18' };
    expect((await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, session)).status).toBe(202);
    const listed = await post({ jsonrpc: '2.0', id: 2, method: 'tools/list' }, session);
    expect(listed.headers.get('content-type')).toMatch(/^text\/event-stream/);
    // the stream goes through the proxy's filter as an HTTP server's does: the allow-list holds
    expect(eventsOf(await listed.text())).toMatchObject([{ id: 2, result: { tools: [{ name: 'count' }] } }]);
    const both = await post({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'count', arguments: {} } }, { ...session, Accept: 'application/json, text/event-stream' });
    expect(both.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await both.json()).toMatchObject({ id: 3, result: { content: [{ text: '1' }] } });
    const stateless = await post(
      { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'count', arguments: {}, _meta: meta } },
      { ...sse, 'Mcp-Protocol-Version': MODERN, 'Mcp-Method': 'tools/call', 'Mcp-Name': 'count' },
    );
    expect(stateless.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(eventsOf(await stateless.text())).toEqual([{ jsonrpc: '2.0', id: 4, result: { resultType: 'complete', content: [{ type: 'text', text: '1' }] } }]);
  });
});
