import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod/v4';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';

/**
 * The MCP 2026-07-28 era through svc's proxy: stateless requests (no initialize, no session) that
 * carry `Mcp-Method` and `Mcp-Name` headers mirroring the body, with the v2 SDK client and server.
 * svc carries them to the upstream, and where it checks a body (an instance's tool allow-list) the
 * headers must say what the body says: it forwards only what it checked.
 */
async function startModernServer() {
  const ran: string[] = [];
  const seen: Record<string, string | undefined>[] = [];
  const handler = createMcpHandler(() => {
    const s = new McpServer({ name: 'modern-upstream', version: '1.0.0' });
    s.registerTool('echo', { description: 'Echoes', inputSchema: z.object({ text: z.string() }) }, async ({ text }) => {
      ran.push('echo');
      return { content: [{ type: 'text', text }] };
    });
    s.registerTool('secret', { description: 'Must not run', inputSchema: z.object({}) }, async () => {
      ran.push('secret');
      return { content: [{ type: 'text', text: 'ran' }] };
    });
    return s;
  });
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    seen.push({ method: req.headers['mcp-method'] as string | undefined, name: req.headers['mcp-name'] as string | undefined, version: req.headers['mcp-protocol-version'] as string | undefined });
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers.set(k, v);
    const answer = await handler.fetch(
      new Request(`http://127.0.0.1${req.url}`, { method: req.method, headers, body: req.method === 'POST' ? Buffer.concat(chunks) : undefined }),
    );
    res.writeHead(answer.status, Object.fromEntries(answer.headers));
    if (answer.body) for await (const c of answer.body as unknown as AsyncIterable<Uint8Array>) res.write(c);
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    ran,
    seen,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await handler.close();
    },
  };
}

describe('MCP 2026-07-28 (stateless, Mcp-Method / Mcp-Name) through the proxy', () => {
  let d: TestDaemon;
  let upstream: Awaited<ReturnType<typeof startModernServer>>;
  let open: string;
  let limited: string;
  let key: string;

  beforeAll(async () => {
    d = await startTestDaemon();
    upstream = await startModernServer();
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    const alice = await userApi(d.url, admin, 'alice', 'user');
    open = (await alice.post('/svc/v1/mcps', { name: 'open', url: upstream.url })).body.instance.id;
    limited = (await alice.post('/svc/v1/mcps', { name: 'limited', url: upstream.url, allow_tools: ['echo'] })).body.instance.id;
    const created = await alice.post('/svc/v1/keys', { name: 'modern host', mcp_servers: [{ url: upstream.url, instance_ids: [open, limited] }] });
    expect(created.status, created.text).toBe(201);
    key = created.body.key;
  });
  afterAll(async () => {
    await d.stop();
    await upstream.close();
  });

  const proxyUrl = (id: string) => `${d.url}/svc/v1/apps/mcps/${id}/mcp`;
  async function modernClient(id: string) {
    const client = new Client({ name: 'modern-host', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await client.connect(new StreamableHTTPClientTransport(new URL(proxyUrl(id)), { requestInit: { headers: { Authorization: `Bearer ${key}` } } }));
    return client;
  }
  const post = (id: string, body: unknown, headers: Record<string, string>) =>
    fetch(proxyUrl(id), {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Protocol-Version': '2026-07-28', ...headers },
      body: JSON.stringify(body),
    });
  const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' }, 'io.modelcontextprotocol/clientCapabilities': {} };

  it('a pinned 2026-07-28 client lists and calls tools, and the upstream sees the mirrored headers', async () => {
    const client = await modernClient(open);
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(['echo', 'secret']);
    const result = await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
    expect(result.content).toEqual([{ type: 'text', text: 'hi' }]);
    await client.close();
    expect(upstream.seen).toContainEqual({ method: 'tools/call', name: 'echo', version: '2026-07-28' });
  });

  it('the allow-list holds for modern requests: the list is filtered, a forbidden call never runs', async () => {
    const client = await modernClient(limited);
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['echo']);
    const before = upstream.ran.length;
    const refused = await client.callTool({ name: 'secret', arguments: {} }).then(
      (r) => r,
      (err: Error) => ({ isError: true, message: err.message }),
    );
    expect(JSON.stringify(refused)).toMatch(/not allowed|secret/);
    await client.close();
    expect(upstream.ran.slice(before)).not.toContain('secret');
  });

  it('headers that disagree with the checked body are refused, so the upstream cannot be told another story', async () => {
    const before = upstream.ran.length;
    // the body calls the forbidden tool while the headers claim the allowed one
    const lying = await post(limited, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'secret', arguments: {}, _meta: meta } }, { 'Mcp-Method': 'tools/call', 'Mcp-Name': 'echo' });
    expect(lying.status).toBeGreaterThanOrEqual(400);
    // the headers claim a list while the body calls
    const listing = await post(limited, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'echo', arguments: { text: 'x' }, _meta: meta } }, { 'Mcp-Method': 'tools/list' });
    expect(listing.status).toBe(400);
    expect(upstream.ran.slice(before)).toEqual([]);
  });

  it('an Mcp-Name in base64 is decoded strictly, and goes upstream as the name svc checked', async () => {
    const before = upstream.ran.length;
    const call = (id: number) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { text: 'x' }, _meta: meta } });
    // bytes that are not UTF-8, and base64 without its padding (a lenient decoder reads "echo")
    for (const name of ['=?base64?/w==?=', '=?base64?ZWNobw?=', '=?base64?ZW=Nobw==?=']) {
      const res = await post(limited, call(3), { 'Mcp-Method': 'tools/call', 'Mcp-Name': name });
      expect(res.status, name).toBe(400);
      expect((await res.json()).error.code).toBe('header_mismatch');
    }
    expect(upstream.ran.slice(before)).toEqual([]);
    // the canonical base64 of "echo" is the same tool: it runs, and the server is told "echo"
    const seenBefore = upstream.seen.length;
    const ok = await post(limited, call(4), { 'Mcp-Method': 'tools/call', 'Mcp-Name': '=?base64?ZWNobw==?=' });
    expect(ok.status).toBe(200);
    expect(upstream.seen.slice(seenBefore)).toContainEqual(expect.objectContaining({ method: 'tools/call', name: 'echo' }));
  });
});
