/**
 * MCP servers with three tools for the tool-choice tests: `read_notes` (read-only), `delete_note`
 * (destructive) and `touch` (no annotations). Each counts what it ran, with the arguments, so a
 * test can say the upstream never ran a call. One is a v1 SDK server with sessions, SSE answers
 * and an event store (resumable with Last-Event-ID); the other a v2 SDK server for the stateless
 * 2026-07-28 era.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { EventStore } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { createMcpHandler, McpServer as ModernServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { sessionRouter } from './mcp-servers.js';
import * as z4 from 'zod/v4';

export interface Ran {
  tool: string;
  args: unknown;
}

export const TOOL_NAMES = ['read_notes', 'delete_note', 'touch'] as const;

function legacyServer(ran: Ran[]) {
  const server = new McpServer({ name: 'risky', version: '1.0.0' });
  server.registerTool('read_notes', { description: 'Reads the notes', annotations: { readOnlyHint: true } }, async () => {
    ran.push({ tool: 'read_notes', args: {} });
    return { content: [{ type: 'text', text: 'the notes' }] };
  });
  server.registerTool(
    'delete_note',
    { description: 'Deletes a note for good', inputSchema: { id: z.string(), note: z.string().optional() }, annotations: { destructiveHint: true, title: 'Delete a note' } },
    async (args) => {
      ran.push({ tool: 'delete_note', args });
      return { content: [{ type: 'text', text: `deleted ${args.id}` }] };
    },
  );
  server.registerTool('touch', { description: 'Touches a file', inputSchema: { path: z.string() } }, async (args) => {
    ran.push({ tool: 'touch', args });
    return { content: [{ type: 'text', text: `touched ${args.path}` }] };
  });
  return server;
}

/**
 * An event store whose ids sort in the order the events were stored. The SDK's example store
 * orders by `<stream>_<ms>_<random>`, so two events of one millisecond (a stream's priming event
 * and the answer after it) replay in a random order, and a resume after the first may miss the
 * second.
 */
class OrderedEventStore implements EventStore {
  private readonly events: { id: string; streamId: string; message: JSONRPCMessage }[] = [];
  private next = 0;

  async storeEvent(streamId: string, message: JSONRPCMessage): Promise<string> {
    const id = `${streamId}_${String(this.next++).padStart(8, '0')}`;
    this.events.push({ id, streamId, message });
    return id;
  }

  async getStreamIdForEventId(eventId: string): Promise<string | undefined> {
    return this.events.find((e) => e.id === eventId)?.streamId;
  }

  async replayEventsAfter(lastEventId: string, { send }: { send: (eventId: string, message: JSONRPCMessage) => Promise<void> }): Promise<string> {
    const at = this.events.findIndex((e) => e.id === lastEventId);
    if (at === -1) return '';
    const { streamId } = this.events[at];
    for (const e of this.events.slice(at + 1)) if (e.streamId === streamId) await send(e.id, e.message);
    return streamId;
  }
}

/**
 * The v1 SDK server: sessions, SSE answers, an event store for resumption: one per session, or
 * (`sharedEvents`) one for all, as a server that keeps its events in one database does.
 */
export async function startRiskyServer(opts: { sharedEvents?: boolean } = {}) {
  const ran: Ran[] = [];
  const shared = new OrderedEventStore();
  const stateful = sessionRouter(() => legacyServer(ran), { eventStore: () => (opts.sharedEvents ? shared : new OrderedEventStore()) });
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    await stateful.handle(req, res, raw ? JSON.parse(raw) : undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    ran,
    runs: (tool: string) => ran.filter((r) => r.tool === tool).length,
    async close() {
      await stateful.closeAll();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** The v2 SDK server of the 2026-07-28 era: stateless, Mcp-Method and Mcp-Name headers. */
export async function startModernRiskyServer() {
  const ran: Ran[] = [];
  const handler = createMcpHandler(() => {
    const s = new ModernServer({ name: 'modern-risky', version: '1.0.0' });
    s.registerTool('read_notes', { description: 'Reads', inputSchema: z4.object({}), annotations: { readOnlyHint: true } }, async () => {
      ran.push({ tool: 'read_notes', args: {} });
      return { content: [{ type: 'text', text: 'the notes' }] };
    });
    s.registerTool('delete_note', { description: 'Deletes', inputSchema: z4.object({ id: z4.string() }), annotations: { destructiveHint: true } }, async (args) => {
      ran.push({ tool: 'delete_note', args });
      return { content: [{ type: 'text', text: `deleted ${args.id}` }] };
    });
    s.registerTool('touch', { description: 'Touches', inputSchema: z4.object({ path: z4.string() }) }, async (args) => {
      ran.push({ tool: 'touch', args });
      return { content: [{ type: 'text', text: `touched ${args.path}` }] };
    });
    return s;
  });
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers.set(k, v);
    const answer = await handler.fetch(new Request(`http://127.0.0.1${req.url}`, { method: req.method, headers, body: req.method === 'POST' ? Buffer.concat(chunks) : undefined }));
    res.writeHead(answer.status, Object.fromEntries(answer.headers));
    if (answer.body) for await (const c of answer.body as unknown as AsyncIterable<Uint8Array>) res.write(c);
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    ran,
    runs: (tool: string) => ran.filter((r) => r.tool === tool).length,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await handler.close();
    },
  };
}
