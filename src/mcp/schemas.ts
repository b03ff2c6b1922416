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
  oauth: z
    .strictObject({
      client_id: z.string().min(1).max(500).optional().describe('A client registered by hand at the server\'s authorization server (else svc registers itself, or uses its Client ID Metadata Document)'),
      client_secret: z.string().min(1).max(2000).optional().describe('That client\'s secret, for a confidential client: stored encrypted, never shown again'),
      scope: z.string().min(1).max(1000).regex(/^[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*$/, 'must be space-separated OAuth scopes').optional().describe('The scopes to ask for instead of those the server\'s metadata lists'),
    })
    .refine((o) => !o.client_secret || o.client_id, 'a client_secret goes with a client_id')
    .optional()
    .describe('How to sign in, for a server that answers 401 with a Bearer challenge (probed when the instance is added)'),
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

export const instanceAuth = z
  .union([
    z.object({ kind: z.enum(['none', 'headers']) }),
    z.object({
      kind: z.literal('oauth'),
      status: z.enum(['connected', 'needs_sign_in']).describe('needs_sign_in: apps\' calls fail with mcp_sign_in_required until the owner signs in'),
      reason: z.enum(['not_signed_in', 'refresh_refused', 'token_refused', 'signed_out']).optional(),
      issuer: z.string().optional(),
      client: z.enum(['pre_registered', 'metadata_document', 'dynamic']).optional(),
      scope: z.string().optional(),
      connected_at: z.string().optional(),
      sign_in_url: z.string().describe('The page that starts a sign-in in the browser'),
    }),
  ])
  .describe("How svc authenticates to the server: nothing, the owner's headers, or a sign-in it holds (its tokens never leave svc)")
  .meta({ id: 'McpInstanceAuth' });

export const mcpInstance = z
  .object({
    id: z.string(),
    name: z.string(),
    url: z.string(),
    proxy_url: z.string().describe("svc's Streamable HTTP proxy for this instance: the URL an MCP host connects to (it signs in through svc's OAuth)"),
    enabled: z.boolean(),
    allow_tools: z.array(z.string()).nullable(),
    header_names: z.array(z.string()).describe('Names only: header values are secrets and never leave svc'),
    auth: instanceAuth,
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'McpInstance' });

export const instanceResponse = z.object({ instance: mcpInstance });
export const instanceList = z.object({ data: z.array(mcpInstance) });
