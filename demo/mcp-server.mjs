// A small MCP server for trying svc, on the MCP SDK (Streamable HTTP, stateless): a notebook with
// a read-only tool and a destructive one, marked as such (readOnlyHint / destructiveHint) so an
// MCP host can tell them apart.
import http from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

export const READ_TOOL = 'list_notes';
export const DESTRUCTIVE_TOOL = 'delete_note';

/** Starts it on 127.0.0.1 (port 0: a free one); answers its URL (…/mcp) and how to stop it. */
export async function startMcpServer({ port = 0 } = {}) {
  const notes = new Map([
    ['welcome', 'svc passed this call on because you granted this MCP instance.'],
    ['groceries', 'eggs, bread, coffee'],
  ]);

  /** One server per request: stateless, so any request may come on its own (as through svc's proxy). */
  function build() {
    const server = new McpServer({ name: 'svc-demo-notes', version: '1.0.0' });
    server.registerTool(
      READ_TOOL,
      { title: 'List notes', description: 'Lists the notes in the demo notebook, with their text', inputSchema: {}, annotations: { readOnlyHint: true, openWorldHint: false } },
      async () => ({ content: [{ type: 'text', text: [...notes].map(([name, text]) => `${name}: ${text}`).join('\n') || '(no notes)' }] }),
    );
    server.registerTool(
      DESTRUCTIVE_TOOL,
      { title: 'Delete a note', description: 'Deletes a note from the demo notebook, for good', inputSchema: { name: z.string().describe('the note to delete') }, annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false } },
      async ({ name }) => {
        if (!notes.delete(name)) return { isError: true, content: [{ type: 'text', text: `There is no note named ${JSON.stringify(name)}.` }] };
        return { content: [{ type: 'text', text: `Deleted the note ${JSON.stringify(name)}.` }] };
      },
    );
    return server;
  }

  const httpServer = http.createServer(async (req, res) => {
    if (new URL(req.url ?? '/', 'http://x').pathname !== '/mcp') {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('The demo MCP server is at /mcp.');
      return;
    }
    if (req.method !== 'POST') {
      // stateless: no GET stream and no session to delete
      res.writeHead(405, { Allow: 'POST', 'Content-Type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed.' }, id: null }));
      return;
    }
    const server = build();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    try {
      await server.connect(transport);
      await transport.handleRequest(req, res);
    } catch {
      if (!res.headersSent) res.writeHead(500, { 'Content-Type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal error' }, id: null }));
    }
  });
  await new Promise((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(port, '127.0.0.1', resolve);
  });
  return {
    url: `http://127.0.0.1:${httpServer.address().port}/mcp`,
    close: () => new Promise((resolve) => {
      httpServer.closeAllConnections();
      httpServer.close(() => resolve());
    }),
  };
}
