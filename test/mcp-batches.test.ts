/**
 * JSON-RPC batches on the MCP proxy. MCP allowed them up to 2025-03-26 and dropped them in
 * 2025-06-18; an MCP SDK server still runs every message of one. A batch must not be one call:
 * each of its messages counts against the grant's calls a minute and is an event of its own in
 * the activity, and where the protocol version has no batches svc refuses them.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { aliceWithInstanceKey, type Api } from './helpers/http.js';
import { eventually } from './helpers/wait.js';

/** A stateless MCP SDK server (JSON answers) with an `echo` tool; counts what ran. */
async function startEchoServer() {
  const ran: string[] = [];
  const server = http.createServer(async (req, res) => {
    const mcp = new McpServer({ name: 'echo', version: '1.0.0' });
    mcp.registerTool('echo', { description: 'Echoes', inputSchema: { text: z.string() }, annotations: { readOnlyHint: true } }, async ({ text }) => {
      ran.push(text);
      return { content: [{ type: 'text', text }] };
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    await mcp.connect(transport);
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
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

let upstream: Awaited<ReturnType<typeof startEchoServer>>;
let d: TestDaemon;
let alice: Api;
let instance: string;

beforeAll(async () => {
  upstream = await startEchoServer();
  d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, notify: false } });
  ({ alice, instance } = await aliceWithInstanceKey(d.url, d.adminPassword, upstream.url, 'echo'));
}, 60_000);

afterAll(async () => {
  await d?.stop();
  await upstream?.close();
});

/** A new API key of alice's for the instance (a grant of its own), with `limits` when given. */
async function newKey(limits?: Record<string, unknown>) {
  const created = await alice.post('/svc/v1/keys', { name: `batch ${Math.random()}`, mcp_servers: [{ url: upstream.url, instance_ids: [instance] }] });
  expect(created.status, created.text).toBe(201);
  const grant = created.body.access_request_id as string;
  if (limits) {
    const set = await alice.put(`/svc/v1/access-requests/${grant}/limits`, limits);
    expect(set.status, set.text).toBe(200);
  }
  return { key: created.body.key as string, grant };
}

const post = (key: string, body: unknown, version?: string) =>
  fetch(`${d.url}/svc/v1/apps/mcps/${instance}/mcp`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...(version ? { 'MCP-Protocol-Version': version } : {}) },
    body: JSON.stringify(body),
  });
const echo = (id: number, text: string) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { text } } });

describe('a JSON-RPC batch on the MCP proxy is as many calls as it has messages', () => {
  it('a batch of 50 tools/call on a grant of 3 calls a minute runs no more than 3 (2025-03-26, and no version header)', async () => {
    for (const version of ['2025-03-26', undefined]) {
      const { key } = await newKey({ requests_per_minute: 3 });
      const tag = `fifty-${version ?? 'none'}`;
      const res = await post(key, Array.from({ length: 50 }, (_, i) => echo(i + 1, tag)), version);
      const text = await res.text();
      expect(upstream.ran.filter((t) => t === tag).length, text).toBeLessThanOrEqual(3);
      expect(res.status, text).toBe(429);
      expect(JSON.parse(text).error.code).toBe('grant_rate_limited');
    }
  }, 60_000);

  it('a batch within the limit runs whole, and the next call is over it', async () => {
    const { key } = await newKey({ requests_per_minute: 3 });
    const res = await post(key, [echo(1, 'two-a'), echo(2, 'two-b')], '2025-03-26');
    expect(res.status).toBe(200);
    expect(((await res.json()) as unknown[]).length).toBe(2);
    expect((await post(key, echo(3, 'two-c'), '2025-03-26')).status).toBe(200);
    expect((await post(key, echo(4, 'two-d'), '2025-03-26')).status).toBe(429);
    expect(upstream.ran.filter((t) => t.startsWith('two-')).sort()).toEqual(['two-a', 'two-b', 'two-c']);
  }, 60_000);

  it('a batch with a member that is no message (an array in it, a string) or with initialize is refused', async () => {
    const { key } = await newKey();
    const bodies = [[[echo(1, 'nested')]], [echo(2, 'nested'), 'tools/call'], [{ jsonrpc: '2.0', id: 3, method: 'initialize', params: {} }, echo(4, 'nested')]];
    for (const body of bodies) {
      const res = await post(key, body, '2025-03-26');
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect((await res.json()).error.code).toBe('invalid_body');
    }
    expect(upstream.ran.filter((t) => t === 'nested')).toEqual([]);
  }, 60_000);

  it('the activity of [ping, tools/call echo] has an event for each, the tools/call with its tool', async () => {
    const { key, grant } = await newKey();
    const res = await post(key, [{ jsonrpc: '2.0', id: 1, method: 'ping' }, echo(2, 'pinged')], '2025-03-26');
    expect(res.status).toBe(200);
    await res.text();
    const events = await eventually(async () => {
      const data = (await alice.get(`/svc/v1/activity?grant=${grant}`)).body.data as { mcp_method?: string; tool?: string }[];
      return data.length >= 2 ? data : undefined;
    }, 'two events');
    expect(events.map((e) => [e.mcp_method, e.tool ?? null]).sort()).toEqual([['ping', null], ['tools/call', 'echo']]);
  }, 60_000);

  it('a batch where the protocol version has none (2025-06-18 and later) is refused, and nothing of it runs', async () => {
    const { key } = await newKey();
    for (const version of ['2025-06-18', '2025-11-25', '2026-07-28']) {
      const res = await post(key, [{ jsonrpc: '2.0', id: 1, method: 'ping' }, echo(2, `new-era-${version}`)], version);
      const body = await res.json();
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(body.error.code).toBe('invalid_body');
      expect(body.error.message).toMatch(/batch/i);
    }
    expect(upstream.ran.filter((t) => t.startsWith('new-era-'))).toEqual([]);
    // a single message in the same era goes on
    expect((await post(key, echo(3, 'single'), '2025-11-25')).status).toBe(200);
  }, 60_000);
});
