// The benchmarks' MCP SDK server over stdio (a command server): the same `add` tool as
// mcp-server.js, one process per session, as svc and supergateway run it.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const mcp = new McpServer({ name: 'bench-stdio', version: '1.0.0' });
mcp.registerTool('add', { inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }));
await mcp.connect(new StdioServerTransport());
