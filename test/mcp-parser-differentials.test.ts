/**
 * Bodies that svc's JSON.parse reads one way and another MCP server's parser reads another. Go's
 * encoding/json (v1) matches object keys to struct fields case-insensitively, folds `ſ` to `s` and
 * the Kelvin sign to `k`, and lets the last matching key win; the Go MCP SDK read messages that way
 * until it was fixed, and other servers and gateways still do. Some parsers keep the first of two
 * equal keys. The upstream here is a real MCP SDK server behind a front that first reads each
 * message as Go's encoding/json would, so a test sees what such a server would run.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { eventually } from './helpers/wait.js';

/** Go's folding of a key for a field match: ASCII case, and ſ and K that fold onto s and k. */
const goFold = (key: string) => key.toLowerCase().replace(/\u017f/g, 's');

/** An object's keys matched onto `fields` as Go's encoding/json does: any case, the last one wins. */
function goFields(obj: Record<string, unknown>, fields: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(obj)) {
    const field = fields.find((f) => goFold(f) === goFold(key));
    if (field) out[field] = value;
    else if (!(key in out)) out[key] = value;
  }
  return out;
}

/** A JSON-RPC message as a Go server would read it (its envelope and a tools/call's params). */
function goRead(message: unknown): unknown {
  if (!message || typeof message !== 'object' || Array.isArray(message)) return message;
  const m = goFields(message as Record<string, unknown>, ['jsonrpc', 'id', 'method', 'params', 'result', 'error']);
  if (m.method === 'tools/call' && m.params && typeof m.params === 'object') m.params = goFields(m.params as Record<string, unknown>, ['name', 'arguments', '_meta']);
  return m;
}

/** A stateless MCP SDK server behind a Go-style reader; records the raw bodies and what ran. */
async function startGoStyleServer() {
  const raw: string[] = [];
  const ran: { tool: string; args: unknown }[] = [];
  const build = () => {
    const server = new McpServer({ name: 'go-style', version: '1.0.0' });
    server.registerTool('read_notes', { description: 'Reads', annotations: { readOnlyHint: true } }, async () => {
      ran.push({ tool: 'read_notes', args: {} });
      return { content: [{ type: 'text', text: 'the notes' }] };
    });
    server.registerTool('delete_note', { description: 'Deletes', inputSchema: { id: z.string() }, annotations: { destructiveHint: true } }, async (args) => {
      ran.push({ tool: 'delete_note', args });
      return { content: [{ type: 'text', text: `deleted ${args.id}` }] };
    });
    server.registerTool('touch', { description: 'Owner-denied', inputSchema: { path: z.string() } }, async (args) => {
      ran.push({ tool: 'touch', args });
      return { content: [{ type: 'text', text: `touched ${args.path}` }] };
    });
    return server;
  };
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    if (text) raw.push(text);
    let body: unknown;
    try {
      const parsed = text ? (JSON.parse(text) as unknown) : undefined;
      body = Array.isArray(parsed) ? parsed.map(goRead) : goRead(parsed);
    } catch {
      res.writeHead(400).end();
      return;
    }
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    const mcp = build();
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    await mcp.connect(transport);
    await transport.handleRequest(req, res, body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    raw,
    ran,
    runs: (tool: string) => ran.filter((r) => r.tool === tool).length,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe('MCP proxy: bodies another parser reads differently', () => {
  let d: TestDaemon;
  let alice: Api;
  let go: Awaited<ReturnType<typeof startGoStyleServer>>;
  let instance: string;
  let key: string;

  beforeAll(async () => {
    go = await startGoStyleServer();
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, callApprovalTimeoutS: 30 } });
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    alice = await userApi(d.url, admin, 'alice', 'user');
    const created = await alice.post('/svc/v1/mcps', { name: 'go', url: go.url, allow_tools: ['read_notes', 'delete_note'] });
    expect(created.status, created.text).toBe(201);
    instance = created.body.instance.id;
    const k = await alice.post('/svc/v1/keys', { name: 'differentials', mcp_servers: [{ url: go.url, instance_ids: [instance] }] });
    expect(k.status, k.text).toBe(201);
    key = k.body.key;
  }, 60_000);

  afterAll(async () => {
    await d.stop();
    await go.close();
  });

  const post = (body: string) =>
    fetch(`${d.url}/svc/v1/apps/mcps/${instance}/mcp`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
      body,
    });

  it('control: the allowed tool runs, the owner-denied one is refused and never reaches the server', async () => {
    const before = go.runs('read_notes');
    const ok = await post('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_notes","arguments":{}}}');
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain('the notes');
    expect(go.runs('read_notes')).toBe(before + 1);
    const refused = await (await post('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"touch","arguments":{"path":"/x"}}}')).json();
    expect(refused.error.message).toMatch(/not allowed/);
    expect(go.runs('touch')).toBe(0);
  });

  it('a key spelt in another case, or with ſ for s, never runs a tool svc did not check', async () => {
    const bodies = [
      // the name svc checks is "read_notes"; a Go server takes the later "Name"
      '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_notes","Name":"touch","arguments":{"path":"/a"}}}',
      // svc sees no method at all, so checks nothing; a Go server sees tools/call
      '{"jsonrpc":"2.0","id":4,"Method":"tools/call","params":{"name":"touch","arguments":{"path":"/b"}}}',
      // svc checks the params it knows; a Go server takes "paramſ"
      '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"read_notes","arguments":{}},"param\u017f":{"name":"touch","arguments":{"path":"/c"}}}',
      // the same, in a batch
      '[{"jsonrpc":"2.0","id":6,"method":"ping","METHOD":"tools/call","params":{"name":"touch","arguments":{"path":"/d"}}}]',
    ];
    for (const body of bodies) {
      const res = await post(body);
      expect(res.status, body).toBe(400);
      expect((await res.json()).error.code).toBe('invalid_body');
    }
    expect(go.runs('touch')).toBe(0);
  });

  it('a held call runs with the arguments the person was shown, not a case-variant "Arguments"', async () => {
    const pending = post('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_note","arguments":{"id":"draft"},"Arguments":{"id":"precious"}}}');
    let answered = false;
    void pending.finally(() => (answered = true));
    // held for the person, or refused at once
    const call = await eventually(async () => {
      if (answered) return 'refused' as const;
      const list = await alice.get('/svc/v1/calls?status=pending');
      return (list.body.data as { id: string; tool: string; arguments: unknown }[]).find((c) => c.tool === 'delete_note');
    }, 'a held call of delete_note, or its refusal');
    if (call !== 'refused') {
      // the person sees only the harmless argument...
      expect(call.arguments).toEqual({ id: 'draft' });
      expect((await alice.post(`/svc/v1/calls/${call.id}/approve`, {})).status).toBe(200);
    }
    await (await pending).text();
    // ...and whatever ran, it was not another note than the one shown
    expect(go.ran.filter((r) => r.tool === 'delete_note').map((r) => r.args)).not.toContainEqual({ id: 'precious' });
  });

  it('pinned safe: a tool name in another case or with a space runs nothing; another instance is not reached by another spelling of its path', async () => {
    for (const name of ['Touch', 'TOUCH', 'touch ', ' touch', 'touch\u0000', 'to\u0075ch']) {
      const res = await post(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"${name}","arguments":{"path":"/f"}}}`);
      await res.text();
    }
    // a batch and a notification with the denied tool, and a method in another case
    await (await post('[{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"read_notes"}},{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"touch","arguments":{"path":"/g"}}}]')).text();
    await (await post('{"jsonrpc":"2.0","method":"tools/call","params":{"name":"touch","arguments":{"path":"/h"}}}')).text();
    await (await post('{"jsonrpc":"2.0","id":12,"method":"Tools/Call","params":{"name":"touch","arguments":{"path":"/i"}}}')).text();
    expect(go.runs('touch')).toBe(0);

    // an instance of the same owner and server outside this key's grant
    const other = (await alice.post('/svc/v1/mcps', { name: 'go-other', url: go.url })).body.instance.id as string;
    const before = go.raw.length;
    const bodyText = '{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"read_notes","arguments":{}}}';
    for (const path of [`${other}/mcp`, `${other}/mcp/`, `${other.toUpperCase()}/mcp`, `${instance}%2F..%2F${other}/mcp`, `${instance}/..%2F${other}/mcp`, `${encodeURIComponent(other)}%20/mcp`]) {
      const res = await fetch(`${d.url}/svc/v1/apps/mcps/${path}`, { method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' }, body: bodyText });
      expect(res.status, path).toBeGreaterThanOrEqual(400);
      await res.text();
    }
    expect(go.raw.length).toBe(before);
  });

  it('a key given twice goes upstream once: a parser that keeps the first one sees what svc checked', async () => {
    const before = go.raw.length;
    // svc (last key wins) reads a ping; a first-key-wins parser would read tools/call of touch
    const res = await post('{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"touch","arguments":{"path":"/e"}},"method":"ping"}');
    await res.text();
    for (const sent of go.raw.slice(before)) expect(sent.match(/"method"/g)?.length ?? 0).toBeLessThanOrEqual(1);
  });
});

describe('a held call approved after its instance changed', () => {
  let d: TestDaemon;
  let alice: Api;
  let go: Awaited<ReturnType<typeof startGoStyleServer>>;

  beforeAll(async () => {
    go = await startGoStyleServer();
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, callApprovalTimeoutS: 30 } });
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    alice = await userApi(d.url, admin, 'alice', 'user');
  }, 60_000);

  afterAll(async () => {
    await d.stop();
    await go.close();
  });

  /** A new instance of the server and a key for it; a held delete_note of `note`, waiting. */
  async function held(note: string, via: 'mcp' | 'rest' = 'mcp') {
    const created = await alice.post('/svc/v1/mcps', { name: `go-${note}`, url: go.url });
    const instance = created.body.instance.id as string;
    const key = (await alice.post('/svc/v1/keys', { name: note, mcp_servers: [{ url: go.url, instance_ids: [instance] }] })).body.key as string;
    const headers = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
    const answer =
      via === 'rest'
        ? fetch(`${d.url}/svc/v1/apps/mcps/${instance}/tools/delete_note/execute`, { method: 'POST', headers, body: JSON.stringify({ params: { id: note } }) })
        : fetch(`${d.url}/svc/v1/apps/mcps/${instance}/mcp`, {
            method: 'POST',
            headers,
            body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'delete_note', arguments: { id: note } } }),
          });
    const call = await eventually(async () => {
      const list = await alice.get('/svc/v1/calls?status=pending');
      return (list.body.data as { id: string; arguments: { id?: string } }[]).find((c) => c.arguments.id === note);
    }, `the held call of ${note}`);
    return { instance, call, answer };
  }

  const ended = async (id: string) => ((await alice.get('/svc/v1/calls')).body.data as { id: string }[]).find((c) => c.id === id);
  const ranNote = (note: string) => go.ran.some((r) => r.tool === 'delete_note' && (r.args as { id?: string }).id === note);

  it('control: approved while nothing changed, it runs', async () => {
    const h = await held('unchanged');
    expect((await alice.post(`/svc/v1/calls/${h.call.id}/approve`, {})).status).toBe(200);
    expect(await (await h.answer).text()).toContain('deleted unchanged');
    expect(ranNote('unchanged')).toBe(true);
  });

  it('the owner disabled the instance while the call waited: approving it runs nothing', async () => {
    const h = await held('disabled');
    expect((await alice.patch(`/svc/v1/mcps/${h.instance}`, { enabled: false })).status).toBe(200);
    await alice.post(`/svc/v1/calls/${h.call.id}/approve`, {});
    expect(await (await h.answer).text()).not.toContain('deleted disabled');
    expect(ranNote('disabled')).toBe(false);
    expect(await ended(h.call.id)).toMatchObject({ status: 'failed', reason: expect.stringMatching(/disabled/) });
  });

  it('the owner took the tool off the allow-list while the call waited: approving it runs nothing', async () => {
    const h = await held('delisted');
    expect((await alice.patch(`/svc/v1/mcps/${h.instance}`, { allow_tools: ['read_notes'] })).status).toBe(200);
    await alice.post(`/svc/v1/calls/${h.call.id}/approve`, {});
    expect(await (await h.answer).text()).not.toContain('deleted delisted');
    expect(ranNote('delisted')).toBe(false);
    expect(await ended(h.call.id)).toMatchObject({ status: 'failed', reason: expect.stringMatching(/denied/) });
  });

  it('the owner deleted the instance while the call waited: approving it runs nothing', async () => {
    const h = await held('deleted');
    expect((await alice.delete(`/svc/v1/mcps/${h.instance}`)).status).toBeLessThan(300);
    await alice.post(`/svc/v1/calls/${h.call.id}/approve`, {});
    expect(await (await h.answer).text()).not.toContain('deleted deleted');
    expect(ranNote('deleted')).toBe(false);
    expect(await ended(h.call.id)).toMatchObject({ status: 'failed', reason: expect.stringMatching(/gone/) });
  });

  it('over REST too: the instance disabled while the call waited, approving it runs nothing', async () => {
    const h = await held('rest-disabled', 'rest');
    expect((await alice.patch(`/svc/v1/mcps/${h.instance}`, { enabled: false })).status).toBe(200);
    await alice.post(`/svc/v1/calls/${h.call.id}/approve`, {});
    const res = await h.answer;
    expect(await res.text()).not.toContain('deleted rest-disabled');
    expect(ranNote('rest-disabled')).toBe(false);
    expect(await ended(h.call.id)).toMatchObject({ status: 'failed', reason: expect.stringMatching(/disabled/) });
  });
});

describe("the instance's credential in a JSON-RPC error answered with 200", () => {
  const secret = `sk-inst-${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
  let d: TestDaemon;
  let upstream: http.Server;
  let instance: string;
  let key: string;

  beforeAll(async () => {
    // MCP servers answer a JSON-RPC error with HTTP 200; this one quotes the header it was sent
    upstream = http.createServer((req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code: -32603, message: `backend refused ${String(req.headers.authorization)}` } }));
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/mcp`;
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    const alice = await userApi(d.url, admin, 'alice', 'user');
    instance = (await alice.post('/svc/v1/mcps', { name: 'echoes', url, headers: [{ name: 'Authorization', value: `Bearer ${secret}` }] })).body.instance.id;
    key = (await alice.post('/svc/v1/keys', { name: 'echo', mcp_servers: [{ url, instance_ids: [instance] }] })).body.key;
  }, 60_000);

  afterAll(async () => {
    await d.stop();
    upstream.closeAllConnections();
    await new Promise<void>((r) => upstream.close(() => r()));
  });

  it('is scrubbed as it is in a 4xx answer', async () => {
    const res = await fetch(`${d.url}/svc/v1/apps/mcps/${instance}/mcp`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(JSON.parse(text).error.message).toContain('backend refused');
    expect(text).not.toContain(secret);
  });
});
