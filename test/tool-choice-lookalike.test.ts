/**
 * A tool choice against a tool name spelt another way: a server that matches tool names without
 * regard to case (or after Unicode normalization) runs `delete_note` for `DELETE_NOTE`, so svc
 * must not let that spelling past the choice the person set for `delete_note`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { aliceWithInstanceKey, Api } from './helpers/http.js';
import { eventually } from './helpers/wait.js';

/** A bare MCP server (JSON answers, no sessions) whose tools/call finds its tool by the NFKC, lower-case name. */
async function startLenientServer() {
  const ran: string[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      if (req.method !== 'POST') {
        res.writeHead(405).end();
        return;
      }
      const m = JSON.parse(body) as { id?: number; method: string; params?: { name?: string; protocolVersion?: string } };
      const reply = (result: unknown) => {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result }));
      };
      if (m.id === undefined) return void res.writeHead(202).end();
      if (m.method === 'initialize') return reply({ protocolVersion: m.params?.protocolVersion ?? '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'lenient', version: '1' } });
      if (m.method === 'tools/list') {
        return reply({ tools: [
          { name: 'delete_note', description: 'Deletes a note', inputSchema: { type: 'object' }, annotations: { destructiveHint: true } },
          { name: 'read_notes', description: 'Reads', inputSchema: { type: 'object' }, annotations: { readOnlyHint: true } },
        ] });
      }
      if (m.method === 'tools/call') {
        const name = String(m.params?.name ?? '').normalize('NFKC').toLowerCase();
        if (name !== 'delete_note' && name !== 'read_notes') return reply({ content: [{ type: 'text', text: 'unknown tool' }], isError: true });
        ran.push(name);
        return reply({ content: [{ type: 'text', text: `ran ${name}` }] });
      }
      reply({});
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    ran,
    close: () => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
}

let lenient: Awaited<ReturnType<typeof startLenientServer>>;
let d: TestDaemon;
let alice: Api;
let instance: string;
let key: string;
let grant: string;

beforeAll(async () => {
  lenient = await startLenientServer();
  d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, notify: false, callApprovalTimeoutS: 5 } });
  ({ alice, instance, key, grant } = await aliceWithInstanceKey(d.url, d.adminPassword, lenient.url, 'lenient'));
}, 60_000);

afterAll(async () => {
  await d?.stop();
  await lenient?.close();
});

async function callTool(name: string) {
  const res = await fetch(`${d.url}/svc/v1/apps/mcps/${instance}/mcp`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name, arguments: {} } }),
  });
  return { status: res.status, text: await res.text() };
}

describe('a tool choice holds for the tool however the app spells its name', () => {
  it('delete_note denied: DELETE_NOTE, Delete_Note and its full-width spelling do not run it either', async () => {
    const set = await alice.put(`/svc/v1/access-requests/${grant}/tools`, { [instance]: { tools: { delete_note: 'deny' } } });
    expect(set.status, set.text).toBe(200);
    expect((await callTool('delete_note')).text).toMatch(/not allowed/);
    for (const spelling of ['DELETE_NOTE', 'Delete_Note', '\uff44elete_note']) {
      const answer = await callTool(spelling);
      expect(lenient.ran, `${spelling}: ${answer.text}`).toEqual([]);
    }
    // a tool the person allowed still runs
    await callTool('read_notes');
    expect(lenient.ran).toEqual(['read_notes']);
  }, 60_000);

  it('delete_note left to its annotations (ask): Delete_Note is held for the person as well, and shown as spelt', async () => {
    const set = await alice.put(`/svc/v1/access-requests/${grant}/tools`, { [instance]: { tools: { delete_note: null } } });
    expect(set.status, set.text).toBe(200);
    const before = lenient.ran.length;
    const answer = callTool('Delete_Note');
    const call = await eventually(async () => ((await alice.get('/svc/v1/calls?status=pending')).body.data as { id: string; tool: string }[])[0], 'a held call');
    expect(call.tool).toBe('Delete_Note');
    expect((await alice.post(`/svc/v1/calls/${call.id}/deny`, {})).status).toBe(200);
    expect((await answer).text).toMatch(/declined/);
    expect(lenient.ran.length).toBe(before);
  }, 60_000);
});
