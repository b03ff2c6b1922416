import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { startMcpServer } from './helpers/mcp-servers.js';
import { startUpstream } from './helpers/upstream.js';

/**
 * An outside review's MCP proxy findings, each reproduced against a real upstream on 127.0.0.1: another
 * charset that spells a forbidden call (items 1), an upstream quoting the instance's credential
 * (3), REST tool calls leaving sessions open (9), and upstreams that stall or break off (10).
 */
const INSTANCE_SECRET = `sk-inst-${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;

/** The MCP SDK's own Express app (express.json decodes UTF-7 and UTF-16), stateless, recording the tools it runs. */
async function startExpressMcp() {
  const ran: string[] = [];
  const app = createMcpExpressApp({ host: '127.0.0.1' });
  app.post('/mcp', async (req, res) => {
    const server = new McpServer({ name: 'express-upstream', version: '1.0.0' });
    server.registerTool('echo', { description: 'allowed' }, async () => {
      ran.push('echo');
      return { content: [{ type: 'text', text: 'echo' }] };
    });
    server.registerTool('secret_tool', { description: 'forbidden' }, async () => {
      ran.push('secret_tool');
      return { content: [{ type: 'text', text: 'ran the forbidden tool' }] };
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });
  const server = await new Promise<http.Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    ran,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const endless = { sent: 0, closed: false };
const MCP_TIMEOUT_MS = 1500;

/** An upstream that misbehaves on purpose, per path: quotes the credential, stalls, breaks off, or never ends an event. */
async function startBadMcp() {
  const server = http.createServer((req, res) => {
    const auth = String(req.headers.authorization ?? '');
    if (req.url === '/refuses') {
      res.writeHead(401, { 'Content-Type': 'application/json', 'WWW-Authenticate': 'Bearer' });
      res.end(JSON.stringify({ error: `token ${auth} is not valid here` }));
    } else if (req.url === '/echoes') {
      // PHP's json_encode spelling: every slash escaped, and the credential in \u escapes
      const spelled = [...auth].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
      res.writeHead(400, { 'Content-Type': 'application/json' });
      res.end(`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"bad header \\/ ${spelled}"}}`);
    } else if (req.url === '/echoes-ok') {
      // a success that quotes it: raw in one string, \u-spelled in another
      const spelled = [...auth].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(`{"jsonrpc":"2.0","id":1,"result":{"seen":${JSON.stringify(auth)},"again":"${spelled}"}}`);
    } else if (req.url === '/echoes-headers') {
      // a success whose headers quote it: a media type's parameter, and the session id itself
      res.writeHead(200, { 'Content-Type': `application/json; charset=utf-8; x="${auth}"`, 'Mcp-Session-Id': auth });
      res.end('{"jsonrpc":"2.0","id":1,"result":{}}');
    } else if (req.url === '/echoes-sse') {
      // an event stream that quotes it in an event's id, and in data cut across two writes
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      const data = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { seen: auth } });
      res.write(`id: ${auth}\ndata: ${data.slice(0, 40)}`);
      setTimeout(() => res.end(`${data.slice(40)}\n\n`), 20);
    } else if (req.url === '/echoes-mcp') {
      // just enough of an MCP server for the SDK client of REST execute, with one tool that quotes it
      if (req.method !== 'POST') {
        res.writeHead(405).end();
        return;
      }
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        const m = JSON.parse(body) as { id?: number; method: string; params?: { protocolVersion?: string } };
        if (m.id === undefined) {
          res.writeHead(202).end();
          return;
        }
        const result =
          m.method === 'initialize'
            ? { protocolVersion: m.params?.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'echoes', version: '1' } }
            : m.method === 'tools/list'
              ? { tools: [{ name: 'whoami', inputSchema: { type: 'object' } }] }
              : { content: [{ type: 'text', text: `you sent ${auth}` }] };
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result }));
      });
    } else if (req.url === '/stalls') {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': '400' });
      res.write('{"jsonrpc":"2.0","id":1,');
    } else if (req.url === '/endless') {
      // one SSE event that never ends: 1 MiB at a time, until svc hangs up (or 16 MiB, the test's bound)
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.write('data: ');
      const chunk = Buffer.alloc(1024 * 1024, 'x');
      const more = () => {
        while (endless.sent < 16 * 1024 * 1024 && !res.destroyed) {
          endless.sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end();
      };
      res.on('close', () => (endless.closed = true));
      more();
    } else if (req.url === '/silent') {
      // takes the request and never answers, not even with headers
    } else if (req.url === '/quiet' && req.method === 'GET') {
      // a GET stream that opens at once, then says nothing for longer than svc's MCP timeout
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.write(': open\n\n');
      setTimeout(() => res.end('data: {"late":true}\n\n'), 2 * MCP_TIMEOUT_MS).unref();
    } else if (req.url === '/resets') {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': '400' });
      res.write('{"jsonrpc":"2.0","id":1,', () => req.socket.destroy());
    } else {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.write('{"jsonrpc":"2.0","id":1,"result":{"too');
      req.socket.destroy();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: (path: string) => `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe('MCP proxy hardening', () => {
  let d: TestDaemon;
  let alice: Api;
  let express: Awaited<ReturnType<typeof startExpressMcp>>;
  let bad: Awaited<ReturnType<typeof startBadMcp>>;
  let sdk: Awaited<ReturnType<typeof startMcpServer>>;
  const ids: Record<string, string> = {};
  let key: string;

  beforeAll(async () => {
    d = await startTestDaemon({ config: { mcpTimeoutMs: MCP_TIMEOUT_MS } });
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    alice = await userApi(d.url, admin, 'alice', 'user');
    [express, bad, sdk] = await Promise.all([startExpressMcp(), startBadMcp(), startMcpServer({ stateful: true })]);
    const add = async (name: string, url: string, extra: Record<string, unknown> = {}) => {
      const res = await alice.post('/svc/v1/mcps', { name, url, ...extra });
      expect(res.status, res.text).toBe(201);
      ids[name] = res.body.instance.id;
    };
    await add('express', express.url, { allow_tools: ['echo'] });
    for (const p of ['refuses', 'echoes', 'echoes-ok', 'echoes-headers', 'echoes-sse', 'echoes-mcp', 'stalls', 'resets', 'cut', 'silent', 'quiet']) await add(p, bad.url(`/${p}`), { headers: [{ name: 'Authorization', value: `Bearer ${INSTANCE_SECRET}` }] });
    await add('endless', bad.url('/endless'), { allow_tools: ['echo'] });
    await add('sdk', sdk.url);
    const grants = Object.entries(ids).map(([name, id]) => ({ name, id }));
    const byUrl = new Map<string, string[]>();
    for (const g of grants) {
      const url = (await alice.get(`/svc/v1/mcps/${g.id}`)).body.instance.url as string;
      byUrl.set(url, [...(byUrl.get(url) ?? []), g.id]);
    }
    const created = await alice.post('/svc/v1/keys', { name: 'hardening', mcp_servers: [...byUrl].map(([url, instance_ids]) => ({ url, instance_ids })) });
    expect(created.status, created.text).toBe(201);
    key = created.body.key;
  });
  afterAll(async () => {
    await d.stop();
    await Promise.all([express.close(), bad.close(), sdk.close()]);
  });

  const proxy = (name: string) => `${d.url}/svc/v1/apps/mcps/${ids[name]}/mcp`;
  const post = (name: string, body: string | Buffer, contentType = 'application/json') =>
    fetch(proxy(name), { method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': contentType, Accept: 'application/json, text/event-stream' }, body: typeof body === 'string' ? body : new Uint8Array(body) });
  const call = (tool: string) => JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: tool, arguments: {} } });

  it('an SSE event that never ends, in a tools/list answer svc must filter, stops the stream at 8 MiB instead of growing svc', async () => {
    // counted from this call: adding the instance probed the server (whether it signs in with OAuth) once already
    Object.assign(endless, { sent: 0, closed: false });
    const res = await post('endless', JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' }));
    expect(res.status).toBe(200);
    const body = await res.text(); // ends: svc gave up on the event
    expect(body.length).toBeLessThan(1024);
    await expect.poll(() => endless.closed, { timeout: 5000 }).toBe(true);
    expect(endless.sent).toBeLessThan(16 * 1024 * 1024);
  });

  describe('item 1: the allow-list cannot be bypassed with another encoding', () => {
    it('control: the allowed tool runs, the forbidden one is refused before it goes upstream', async () => {
      const ok = await post('express', call('echo'));
      expect(ok.status).toBe(200);
      expect(express.ran).toContain('echo');
      const refused = await (await post('express', call('secret_tool'))).json();
      expect(refused.error.message).toMatch(/not allowed/);
      expect(express.ran).not.toContain('secret_tool');
    });

    it('a UTF-7 body ("tools/+AGM-all") is 415 and never reaches the upstream that would decode it', async () => {
      const utf7 = '{"jsonrpc":"2.0","id":8,"method":"tools/+AGM-all","params":{"name":"secret+AF8-tool","arguments":{}}}';
      for (const type of ['application/json; charset=utf-7', 'application/json;charset="UTF-7"', 'application/json; charset=utf-16le', 'text/plain']) {
        const res = await post('express', utf7, type);
        expect(res.status, type).toBe(415);
        expect((await res.json()).error.code).toBe('unsupported_media_type');
      }
      const list = await post('express', '{"jsonrpc":"2.0","id":9,"method":"tools/+AGw-ist"}', 'application/json; charset=utf-7');
      expect(list.status).toBe(415);
      expect(express.ran).not.toContain('secret_tool');
    });

    it('UTF-16 bytes, invalid UTF-8 and JSON escapes: refused or seen for what they are', async () => {
      const utf16 = Buffer.from(`\ufeff${call('secret_tool')}`, 'utf16le');
      expect((await post('express', utf16)).status).toBe(400);
      expect((await post('express', Buffer.from([0x7b, 0xff, 0xfe, 0x7d]))).status).toBe(400);
      // "tools/\u0063all" and "secret\u005ftool" are tools/call of secret_tool once decoded: refused
      const escaped = await (await post('express', '{"jsonrpc":"2.0","id":10,"method":"tools/\\u0063all","params":{"name":"secret\\u005ftool","arguments":{}}}')).json();
      expect(escaped.error.message).toMatch(/not allowed/);
      // an explicit utf-8 charset is fine, and is what goes upstream
      expect((await post('express', call('echo'), 'application/json; charset=UTF-8')).status).toBe(200);
      expect(express.ran).not.toContain('secret_tool');
    });
  });

  describe("item 3: the instance's credential never comes back", () => {
    it('an upstream 401 quoting it is a 502 upstream_rejected that does not', async () => {
      const res = await post('refuses', call('x'));
      expect(res.status).toBe(502);
      const text = await res.text();
      expect(JSON.parse(text).error).toMatchObject({ type: 'upstream_error', code: 'upstream_rejected' });
      expect(text).not.toContain(INSTANCE_SECRET);
      expect(res.headers.get('www-authenticate')).toBeNull();
    });

    it('an upstream error quoting it with \\u escapes is relayed scrubbed', async () => {
      const res = await post('echoes', call('x'));
      expect(res.status).toBe(400);
      const text = await res.text();
      expect(JSON.parse(text).error.message).toContain('[redacted]');
      expect(JSON.stringify(JSON.parse(text))).not.toContain(INSTANCE_SECRET);
    });

    const ping = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });

    it('a successful answer quoting it, raw and \\u-spelled, is relayed scrubbed', async () => {
      const res = await post('echoes-ok', ping);
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(JSON.parse(text).result).toEqual({ seen: '[redacted]', again: '[redacted]' });
      expect(JSON.stringify(JSON.parse(text))).not.toContain(INSTANCE_SECRET);
    });

    it('headers quoting it do not go on: the media type as its type and charset, a session id that holds it not at all', async () => {
      const res = await post('echoes-headers', ping);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(res.headers.get('mcp-session-id')).toBeNull();
      expect([...res.headers.values()].join('\n')).not.toContain(INSTANCE_SECRET);
      expect((await res.json()).result).toEqual({});
    });

    it('an event stream quoting it in an id and in data cut across writes is relayed scrubbed, event by event', async () => {
      const res = await post('echoes-sse', ping);
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).not.toContain(INSTANCE_SECRET);
      // the id is scrubbed, then bound to the grant (session-ids.ts): what it wraps is the scrubbed text
      const id = /^id: svc1\.([A-Za-z0-9_-]+)\.[A-Za-z0-9_-]+$/m.exec(text)![1];
      expect(Buffer.from(id, 'base64url').toString()).toBe('[redacted]');
      const data = /^data: (.*)$/m.exec(text)![1];
      expect(JSON.parse(data).result).toEqual({ seen: '[redacted]' });
    });

    it("a tool's result through REST execute quoting it comes back scrubbed", async () => {
      const res = await fetch(`${d.url}/svc/v1/apps/mcps/${ids['echoes-mcp']}/tools/whoami/execute`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ params: {} }),
      });
      const text = await res.text();
      expect(res.status, text).toBe(200);
      expect(JSON.parse(text).result.content[0].text).toBe('you sent [redacted]');
      expect(text).not.toContain(INSTANCE_SECRET);
    });
  });

  // Each of these waits out the MCP timeout on a connection of its own: they wait together.
  describe.concurrent('item 10: an upstream that stalls or breaks off never hangs the app or hands it half an answer', () => {
    it('headers then silence: 504 in the contract shape', async ({ expect }) => {
      const res = await post('stalls', call('x'));
      expect(res.status).toBe(504);
      expect((await res.json()).error.code).toBe('upstream_timeout');
    });

    it('a GET stream whose upstream never sends its headers: 504 within the MCP timeout, not a day later', async ({ expect }) => {
      const started = performance.now();
      const res = await fetch(`${d.url}/svc/v1/apps/mcps/${ids.silent}/mcp`, { headers: { Authorization: `Bearer ${key}`, Accept: 'text/event-stream' }, signal: AbortSignal.timeout(15_000) });
      expect(res.status).toBe(504);
      expect((await res.json()).error.code).toBe('upstream_timeout');
      expect(performance.now() - started).toBeLessThan(MCP_TIMEOUT_MS + 3_000);
    });

    it('an established GET stream may stay quiet for longer than the MCP timeout: what the upstream says later still arrives', async ({ expect }) => {
      const res = await fetch(`${d.url}/svc/v1/apps/mcps/${ids.quiet}/mcp`, { headers: { Authorization: `Bearer ${key}`, Accept: 'text/event-stream' }, signal: AbortSignal.timeout(15_000) });
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('data: {"late":true}');
    });

    it('a reset mid-body, with or without Content-Length: 502, never a truncated 200', async ({ expect }) => {
      for (const name of ['resets', 'cut']) {
        const res = await post(name, call('x'));
        expect(res.status, name).toBe(502);
        expect((await res.json()).error.code).toBe('upstream_unavailable');
      }
    });
  });

  it('item 9: the REST tool endpoints end their upstream session after each call', async () => {
    for (let i = 0; i < 5; i++) {
      const res = await new Api(d.url).post(`/svc/v1/apps/mcps/${ids.sdk}/tools/echo/execute`, { params: { message: `hi ${i}` } }, { Authorization: `Bearer ${key}` });
      expect(res.status, res.text).toBe(200);
    }
    expect((await new Api(d.url).post(`/svc/v1/apps/mcps/${ids.sdk}/tools/refresh`, undefined, { Authorization: `Bearer ${key}` })).status).toBe(200);
    expect(sdk.seen.filter((r) => r.method === 'DELETE').length).toBeGreaterThanOrEqual(6);
    expect(sdk.sessions.size).toBe(0);
  });
});

describe('item 6: one grant cannot starve the others', () => {
  it('past its share of calls in flight or open MCP streams a grant gets 429 with Retry-After, while another grant goes straight through', async () => {
    const d = await startTestDaemon({ config: { grantConcurrency: 3, grantStreams: 2 } });
    const slow = await startUpstream({ chunkDelayMs: 400, chunks: 4 });
    // an MCP server whose GET stream stays open, as a listening host's does
    const held = http.createServer((req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.write(': open\n\n');
    });
    await new Promise<void>((r) => held.listen(0, '127.0.0.1', r));
    const streams: AbortController[] = [];
    try {
      const admin = await new Api(d.url).login('admin', d.adminPassword);
      expect((await admin.post('/svc/v1/providers', { name: 'slow', base_url: slow.url })).status).toBe(201);
      const mcpUrl = `http://127.0.0.1:${(held.address() as AddressInfo).port}/mcp`;
      const instance = (await admin.post('/svc/v1/mcps', { name: 'held', url: mcpUrl })).body.instance.id as string;
      const keyFor = async (name: string) =>
        (await admin.post('/svc/v1/keys', { name, mcp_servers: [{ url: mcpUrl, instance_ids: [instance] }] })).body.key as string;
      const [hog, other] = [await keyFor('hog'), await keyFor('other')];
      const chat = (key: string) =>
        fetch(`${d.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
          body: JSON.stringify({ model: 'fake-model', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
        });
      const running = [chat(hog), chat(hog), chat(hog)];
      const started = await Promise.all(running);
      expect(started.map((r) => r.status)).toEqual([200, 200, 200]);
      const refused = await chat(hog);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect((await refused.json()).error.code).toBe('rate_limited');
      const others = await chat(other);
      expect(others.status).toBe(200);
      await Promise.all([...started, others].map((r) => r.text()));
      // the slots come back once the calls are over
      const again = await chat(hog);
      expect(again.status).toBe(200);
      await again.text();

      const listen = (key: string) => {
        const ac = new AbortController();
        streams.push(ac);
        return fetch(`${d.url}/svc/v1/apps/mcps/${instance}/mcp`, { headers: { Authorization: `Bearer ${key}`, Accept: 'text/event-stream' }, signal: ac.signal });
      };
      expect((await listen(hog)).status).toBe(200);
      expect((await listen(hog)).status).toBe(200);
      const third = await listen(hog);
      expect(third.status).toBe(429);
      expect((await third.json()).error.message).toMatch(/open MCP streams/);
      expect((await listen(other)).status).toBe(200);
    } finally {
      for (const ac of streams) ac.abort();
      held.closeAllConnections();
      await new Promise<void>((r) => held.close(() => r()));
      await slow.close();
      await d.stop();
    }
  });
});

describe('open streams are told by the route, not the path', () => {
  it('a GET stream at the MCP proxy URL spelt with a trailing slash counts against the grant\'s open streams, not its calls', async () => {
    const d = await startTestDaemon({ config: { grantConcurrency: 10, grantStreams: 1 } });
    const held = http.createServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.write(': open\n\n');
    });
    await new Promise<void>((r) => held.listen(0, '127.0.0.1', r));
    const streams: AbortController[] = [];
    try {
      const admin = await new Api(d.url).login('admin', d.adminPassword);
      const mcpUrl = `http://127.0.0.1:${(held.address() as AddressInfo).port}/mcp`;
      const instance = (await admin.post('/svc/v1/mcps', { name: 'held', url: mcpUrl })).body.instance.id as string;
      const key = (await admin.post('/svc/v1/keys', { name: 'slash', mcp_servers: [{ url: mcpUrl, instance_ids: [instance] }] })).body.key as string;
      const listen = (suffix: string) => {
        const ac = new AbortController();
        streams.push(ac);
        return fetch(`${d.url}/svc/v1/apps/mcps/${instance}/mcp${suffix}`, { headers: { Authorization: `Bearer ${key}`, Accept: 'text/event-stream' }, signal: ac.signal });
      };
      expect((await listen('/')).status).toBe(200);
      for (const suffix of ['/', '']) {
        const second = await listen(suffix);
        expect(second.status, `mcp${suffix}`).toBe(429);
        expect((await second.json()).error.message).toMatch(/open MCP streams/);
      }
    } finally {
      for (const ac of streams) ac.abort();
      held.closeAllConnections();
      await new Promise<void>((r) => held.close(() => r()));
      await d.stop();
    }
  });
});
