/**
 * A held call runs as the person saw it: the upstream (a small MCP server that writes down every
 * JSON-RPC message it gets, whole) receives the tool and the arguments shown, and nothing the app
 * put beside them: no other `_meta` member, no other key of `params`, no other key of the message.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { aliceWithInstanceKey, type Api } from './helpers/http.js';
import { eventually } from './helpers/wait.js';

/** An MCP server answering in plain JSON, with one destructive tool, that keeps each message it got. */
async function recordingServer() {
  const got: Record<string, unknown>[] = [];
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    if (req.method !== 'POST') return void res.writeHead(405).end();
    const m = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id?: unknown; method?: string; params?: { protocolVersion?: string } };
    got.push(m as Record<string, unknown>);
    if (m.id === undefined) return void res.writeHead(202).end();
    const result =
      m.method === 'initialize'
        ? { protocolVersion: m.params?.protocolVersion ?? '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'recorder', version: '1.0.0' } }
        : m.method === 'tools/list'
          ? { tools: [{ name: 'delete_note', inputSchema: { type: 'object' }, annotations: { destructiveHint: true } }] }
          : { content: [{ type: 'text', text: 'done' }] };
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    calls: () => got.filter((m) => m.method === 'tools/call'),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe('a held call sends upstream what the person was shown', () => {
  let d: TestDaemon;
  let upstream: Awaited<ReturnType<typeof recordingServer>>;
  let alice: Api;
  let instance: string;
  let key: string;

  beforeAll(async () => {
    upstream = await recordingServer();
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, callApprovalTimeoutS: 30 } });
    ({ alice, instance, key } = await aliceWithInstanceKey(d.url, d.adminPassword, upstream.url, 'notes'));
  }, 60_000);
  afterAll(async () => {
    await d.stop();
    await upstream.close();
  });

  const call = (message: unknown, accept = 'application/json, text/event-stream') =>
    fetch(`${d.url}/svc/v1/apps/mcps/${instance}/mcp`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Accept: accept },
      body: JSON.stringify(message),
    });

  it('with _meta, an extra key in params and one beside them, the upstream gets the tool and the arguments shown (and the progress token and the connection\'s protocol members), nothing else', async () => {
    const before = upstream.calls().length;
    const sent = call({
      jsonrpc: '2.0',
      id: 7,
      method: 'tools/call',
      params: { name: 'delete_note', arguments: { id: 'n1' }, _meta: { progressToken: 'p-1', 'vendor/run-as': 'root', 'io.modelcontextprotocol/related-task': { taskId: 't' }, 'io.modelcontextprotocol/protocolVersion': '2026-07-28' }, task: { ttl: 1 }, confirm: true },
      dryRun: false,
    });
    const held = await eventually(async () => ((await alice.get('/svc/v1/calls?status=pending')).body.data as { id: string; tool: string; arguments: unknown }[])[0], 'a held call');
    expect(held.tool).toBe('delete_note');
    expect(held.arguments).toEqual({ id: 'n1' });
    expect(upstream.calls().length).toBe(before);
    expect((await alice.post(`/svc/v1/calls/${held.id}/approve`, {})).status).toBe(200);
    const res = await sent;
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('done');
    expect(upstream.calls().slice(before)).toEqual([{ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'delete_note', arguments: { id: 'n1' }, _meta: { progressToken: 'p-1', 'io.modelcontextprotocol/protocolVersion': '2026-07-28' } } }]);
  });

  it('a call without arguments is shown with none and sent with none; a progress token that is not a token does not go on', async () => {
    const sent = call({ jsonrpc: '2.0', id: 'b', method: 'tools/call', params: { name: 'delete_note', _meta: { progressToken: { nested: 'x' } } } }, 'application/json');
    const held = await eventually(async () => ((await alice.get('/svc/v1/calls?status=pending')).body.data as { id: string; arguments: unknown }[])[0], 'a held call');
    expect(held.arguments).toEqual({});
    await alice.post(`/svc/v1/calls/${held.id}/approve`, {});
    expect((await sent).status).toBe(200);
    expect(upstream.calls().at(-1)).toEqual({ jsonrpc: '2.0', id: 'b', method: 'tools/call', params: { name: 'delete_note', arguments: {} } });
  });
});
