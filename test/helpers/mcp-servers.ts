import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { type EventStore, StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

export interface SeenMcpRequest {
  method: string;
  headers: http.IncomingHttpHeaders;
  body: any;
}

function buildServer(seenCalls: string[]) {
  const server = new McpServer({ name: 'test-upstream', version: '1.0.0' }, { capabilities: { logging: {} } });
  server.registerTool('echo', { description: 'Echoes its message', inputSchema: { message: z.string() } }, async ({ message }) => {
    seenCalls.push('echo');
    return { content: [{ type: 'text', text: `echo: ${message}` }] };
  });
  server.registerTool('add', { description: 'Adds', inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => {
    seenCalls.push('add');
    return { content: [{ type: 'text', text: String(a + b) }] };
  });
  server.registerTool('secret_tool', { description: 'Must stay hidden behind an allow-list' }, async () => {
    seenCalls.push('secret_tool');
    return { content: [{ type: 'text', text: 'the secret' }] };
  });
  server.registerTool('fails', { description: 'A tool whose own failure is a result' }, async () => ({ isError: true, content: [{ type: 'text', text: 'it failed' }] }));
  server.registerTool('slow', { description: 'Reports progress', inputSchema: { steps: z.number() } }, async ({ steps }, extra) => {
    seenCalls.push('slow');
    for (let i = 1; i <= steps; i++) {
      if (extra._meta?.progressToken !== undefined) {
        await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: extra._meta.progressToken, progress: i, total: steps } });
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    return { content: [{ type: 'text', text: 'done' }] };
  });
  server.registerTool('ask_llm', { description: 'Asks the client to sample (a server-to-client request)' }, async () => {
    const answer = await server.server.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: 'hello?' } }], maxTokens: 10 });
    return { content: [{ type: 'text', text: `client said: ${(answer.content as { text?: string }).text}` }] };
  });
  server.registerResource('readme', 'test://readme', { description: 'A resource', mimeType: 'text/plain' }, async (uri) => ({
    contents: [{ uri: uri.href, text: 'read me' }],
  }));
  server.registerPrompt('greet', { description: 'A prompt', argsSchema: { name: z.string() } }, ({ name }) => ({
    messages: [{ role: 'user', content: { type: 'text', text: `Hello ${name}` } }],
  }));
  return server;
}

/**
 * A stateful server's sessions: each request goes to its session's transport; an initialize makes
 * a session (and a server by `build`), an unknown session id gets 404 as the SDK's servers answer.
 */
export function sessionRouter(build: () => McpServer, opts: { eventStore?: () => EventStore } = {}) {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  return {
    sessions,
    async handle(req: http.IncomingMessage, res: http.ServerResponse, body: unknown) {
      const sid = req.headers['mcp-session-id'] as string | undefined;
      let transport = sid ? sessions.get(sid) : undefined;
      if (!transport) {
        if (sid) {
          res.writeHead(404, { 'Content-Type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } }));
          return;
        }
        const created = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          ...(opts.eventStore ? { eventStore: opts.eventStore() } : {}),
          onsessioninitialized: (id) => {
            sessions.set(id, created);
          },
        });
        created.onclose = () => {
          if (created.sessionId) sessions.delete(created.sessionId);
        };
        await build().connect(created);
        transport = created;
      }
      await transport.handleRequest(req, res, body);
    },
    async closeAll() {
      for (const t of sessions.values()) await t.close().catch(() => undefined);
    },
  };
}

/**
 * A real MCP SDK server over Streamable HTTP on 127.0.0.1: stateful (sessions, SSE) or stateless
 * JSON mode. It records what reaches it, so tests can see what svc forwards.
 */
export async function startMcpServer(opts: { stateful: boolean; stall?: boolean } = { stateful: true }) {
  const seen: SeenMcpRequest[] = [];
  const calls: string[] = [];
  const stateful = sessionRouter(() => buildServer(calls));
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const body = raw ? JSON.parse(raw) : undefined;
    seen.push({ method: req.method ?? '', headers: req.headers, body });
    if (opts.stall) return; // never answers
    if (!opts.stateful) {
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      const mcp = buildServer(calls);
      res.on('close', () => {
        void transport.close();
        void mcp.close();
      });
      await mcp.connect(transport);
      await transport.handleRequest(req, res, body);
      return;
    }
    await stateful.handle(req, res, body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  return {
    url,
    seen,
    calls,
    sessions: stateful.sessions,
    async close() {
      await stateful.closeAll();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/**
 * @modelcontextprotocol/server-everything held to loopback on a free port: in streamableHttp mode
 * (`/mcp`), or in the older HTTP+SSE mode (`/sse` and `/message`).
 */
export async function startEverything(mode: 'streamableHttp' | 'sse' = 'streamableHttp') {
  const child = spawn(process.execPath, ['--import', new URL('./loopback-only.mjs', import.meta.url).pathname, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js', mode], {
    env: { ...process.env, PORT: '0' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let err = '';
    const timer = setTimeout(() => reject(new Error(`server-everything did not start: ${err}`)), 20_000);
    child.stderr.on('data', (d) => {
      err += d;
      const m = /LISTENING (\d+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.on('exit', (code) => reject(new Error(`server-everything exited ${code}: ${err}`)));
  });
  return {
    url: `http://127.0.0.1:${port}/${mode === 'sse' ? 'sse' : 'mcp'}`,
    async close() {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}
