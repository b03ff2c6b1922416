import { z } from 'zod';
import { httpUrl } from '../http/urls.js';

const FORBIDDEN_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'upgrade', 'te', 'keep-alive', 'trailer', 'proxy-connection']);

export const headerName = z
  .string()
  .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/, 'must be an HTTP header name')
  .refine((n) => !FORBIDDEN_HEADERS.has(n.toLowerCase()), 'is a header svc sets itself');
// Header values travel as Latin-1 on the wire: visible ASCII, tab and Latin-1, nothing else.
export const headerValue = z.string().max(8192).regex(/^[\t\x20-\x7e\x80-\xff]*$/, 'must be one line of printable Latin-1 text');

export const instanceHeaders = z
  .array(z.strictObject({ name: headerName, value: headerValue }))
  .max(32)
  .refine((hs) => new Set(hs.map((h) => h.name.toLowerCase())).size === hs.length, 'names each header once');

export const toolName = z.string().min(1).max(128).regex(/^[A-Za-z0-9_.\-/]+$/, 'must be a tool name');
export const allowTools = z.array(toolName).max(1000).nullable();

export const instanceName = z.string().trim().min(1).max(100).regex(/^[^\0-\x1f\x7f]+$/, 'must be printable');

export const createInstanceBody = z.strictObject({
  name: instanceName,
  url: httpUrl,
  headers: instanceHeaders.optional(),
  allow_tools: allowTools.optional(),
  enabled: z.boolean().optional(),
});

export const updateInstanceBody = z
  .strictObject({
    name: instanceName.optional(),
    enabled: z.boolean().optional(),
    headers: instanceHeaders.optional(),
    allow_tools: allowTools.optional(),
  })
  .refine((b) => Object.keys(b).length > 0, 'names at least one field to change');

export const instanceParams = z.object({ id: z.string().max(100) });

export const mcpInstance = z
  .object({
    id: z.string(),
    name: z.string(),
    url: z.string(),
    proxy_url: z.string().describe("svc's Streamable HTTP proxy for this instance: the URL an MCP host connects to (it signs in through svc's OAuth)"),
    enabled: z.boolean(),
    allow_tools: z.array(z.string()).nullable(),
    header_names: z.array(z.string()).describe('Names only: header values are secrets and never leave svc'),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'McpInstance' });

export const instanceResponse = z.object({ instance: mcpInstance });
export const instanceList = z.object({ data: z.array(mcpInstance) });
