/**
 * A tool name with whitespace at an end, or a NUL, against a server that reads names the way
 * Python's `.strip()`, Go's `TrimSpace` and C strings do: `delete_note ` and `delete_note\0x` are
 * `delete_note` there. Whatever svc decides for such a name, the person's `deny` or `ask` on
 * `delete_note` must hold: nothing of it reaches the server's handler, on the proxy or REST execute.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { aliceWithInstanceKey, type Api } from './helpers/http.js';
import { eventually } from './helpers/wait.js';

/** A name as a trimming server reads it: cut at the first NUL, whitespace off both ends. */
const loose = (name: string) => name.split('\u0000')[0]!.trim();

/** A stateless MCP SDK server behind a front that rewrites each tools/call's name as `loose` does. */
async function startTrimmingServer() {
  const ran: string[] = [];
  const build = () => {
    const server = new McpServer({ name: 'trimming', version: '1.0.0' });
    server.registerTool('delete_note', { description: 'Deletes a note', annotations: { destructiveHint: true } }, async () => {
      ran.push('delete_note');
      return { content: [{ type: 'text', text: 'deleted' }] };
    });
    server.registerTool('read_notes', { description: 'Reads', annotations: { readOnlyHint: true } }, async () => {
      ran.push('read_notes');
      return { content: [{ type: 'text', text: 'the notes' }] };
    });
    return server;
  };
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    let body: unknown;
    try {
      body = text ? (JSON.parse(text) as unknown) : undefined;
    } catch {
      res.writeHead(400).end();
      return;
    }
    const m = body as { method?: string; params?: { name?: unknown } } | undefined;
    if (m?.method === 'tools/call' && typeof m.params?.name === 'string') m.params.name = loose(m.params.name);
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
    ran,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const SPELLINGS = ['delete_note ', ' delete_note', 'delete_note\t', 'delete_note\n', 'delete_note\u00a0', 'delete_note\u3000', '\u3000delete_note', 'delete_note\u0000', 'delete_note\u0000x', 'delete_note \u200b'];

let upstream: Awaited<ReturnType<typeof startTrimmingServer>>;
let d: TestDaemon;
let alice: Api;
let instance: string;
let key: string;
let grant: string;

beforeAll(async () => {
  upstream = await startTrimmingServer();
  d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, notify: false, callApprovalTimeoutS: 30 } });
  ({ alice, instance, key, grant } = await aliceWithInstanceKey(d.url, d.adminPassword, upstream.url, 'trimming'));
}, 60_000);

afterAll(async () => {
  await d?.stop();
  await upstream?.close();
});

const proxyCall = async (name: string) => {
  const res = await fetch(`${d.url}/svc/v1/apps/mcps/${instance}/mcp`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': '2025-11-25' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name, arguments: {} } }),
  });
  return { status: res.status, text: await res.text() };
};
const restCall = async (name: string) => {
  const res = await fetch(`${d.url}/svc/v1/apps/mcps/${instance}/tools/${encodeURIComponent(name)}/execute`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ params: {} }),
  });
  return { status: res.status, text: await res.text() };
};

/** Calls `name` one way; a call held for the person is declined, so what runs is what svc let through. */
async function callDeclining(call: (name: string) => Promise<{ status: number; text: string }>, name: string) {
  let done = false;
  const answer = call(name).finally(() => (done = true));
  const held = await eventually(async () => {
    if (done) return 'answered' as const;
    const pending = (await alice.get('/svc/v1/calls?status=pending')).body.data as { id: string }[];
    return pending[0];
  }, 'an answer or a held call');
  if (held !== 'answered') await alice.post(`/svc/v1/calls/${held.id}/deny`, {});
  return answer;
}

async function setChoice(choice: 'deny' | 'ask') {
  const set = await alice.put(`/svc/v1/access-requests/${grant}/tools`, { [instance]: { tools: { delete_note: choice } } });
  expect(set.status, set.text).toBe(200);
}

describe('a tool name with whitespace at an end or a NUL: the choice of the tool it reads as holds', () => {
  for (const choice of ['deny', 'ask'] as const) {
    it(`delete_note set to ${choice}: none of its trimmed or NUL-cut spellings runs it, on the proxy or REST execute`, async () => {
      upstream.ran.length = 0;
      await setChoice(choice);
      for (const name of SPELLINGS) {
        const viaProxy = await callDeclining(proxyCall, name);
        expect(upstream.ran, `proxy ${JSON.stringify(name)}: ${viaProxy.text}`).toEqual([]);
        const viaRest = await callDeclining(restCall, name);
        expect(upstream.ran, `REST ${JSON.stringify(name)}: ${viaRest.text}`).toEqual([]);
      }
    }, 120_000);
  }

  it('a name with a control character or whitespace at an end is refused outright, in the contract\'s shape', async () => {
    upstream.ran.length = 0;
    for (const name of ['read_notes ', 'read_notes\u0000', 'read\u0007_notes', '\tread_notes', 'read_notes\u0085']) {
      const viaProxy = await proxyCall(name);
      expect(viaProxy.status).toBe(200);
      expect(JSON.parse(viaProxy.text).error.message, viaProxy.text).toMatch(/tool name/i);
      const viaRest = await restCall(name);
      expect(viaRest.status, viaRest.text).toBe(400);
      expect(JSON.parse(viaRest.text).error.code).toBe('invalid_body');
    }
    expect(upstream.ran).toEqual([]);
    // the exact name still runs
    const ok = await proxyCall('read_notes');
    expect(ok.text).toContain('the notes');
    expect(upstream.ran).toEqual(['read_notes']);
  }, 60_000);
});
