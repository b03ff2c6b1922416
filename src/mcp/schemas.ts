import { z } from 'zod';
import { httpUrl, mcpServerUrl } from '../http/urls.js';

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

/** What `try` says on the command form: whether svc starts the command once before storing it. */
const tryOnce = z
  .boolean()
  .optional()
  .describe('Start the command once and wait for its answer to initialize before storing the change (default true): a command that fails is refused, naming its exit, and nothing is stored');

// Text handed to a process: no NUL (the OS cannot pass one), no other control character in a name or path.
const noNul = /^[^\0]*$/;
const printable = /^[^\0-\x1f\x7f]+$/;

export const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'must be an environment variable name (letters, digits and _, not starting with a digit)');
export const envValue = z.string().max(32_768).regex(noNul, 'must not hold a NUL character');

export const commandEnv = z
  .array(z.strictObject({ name: envName, value: envValue }))
  .max(100)
  .refine((vs) => new Set(vs.map((v) => v.name)).size === vs.length, 'names each variable once')
  .describe('Variables the command gets beside svc\'s minimal environment; values are secrets: stored encrypted, never shown again, scrubbed from logs');

export const commandProgram = z.string().min(1).max(4096).regex(printable, 'must be printable').describe('The program, run with no shell: an absolute path, or a name looked up on PATH');
export const commandArgs = z.array(z.string().max(32_768).regex(noNul, 'must not hold a NUL character')).max(1000).describe('Its arguments, passed as they are (no shell: no quoting, globbing or variables)');
export const commandCwd = z.string().max(4096).regex(printable, 'must be printable').refine((d) => d.startsWith('/'), 'must be an absolute path').describe('The directory it runs in (absolute); absent: svc\'s own');

export const commandSpecBody = z
  .strictObject({ command: commandProgram, args: commandArgs.optional(), env: commandEnv.optional(), cwd: commandCwd.optional() })
  .meta({ id: 'McpCommandSpec', description: 'A command MCP server: svc runs it and speaks MCP with it on its stdin and stdout' });

const httpInstanceBody = z
  .strictObject({
    name: instanceName,
    url: httpUrl,
    headers: instanceHeaders.optional(),
    allow_tools: allowTools.optional(),
    enabled: z.boolean().optional(),
  })
  .meta({ id: 'CreateHttpMcpInstance', description: 'An MCP server reached over Streamable HTTP at url' });

const commandInstanceBody = z
  .strictObject({
    name: instanceName,
    command: commandSpecBody,
    url: mcpServerUrl.optional().describe('The URL apps name it by, never fetched: http(s), or stdio://NAME; default stdio:// and the name lowercased, each run of other characters than a-z and 0-9 one -'),
    allow_tools: allowTools.optional(),
    enabled: z.boolean().optional(),
    try: tryOnce,
  })
  .meta({ id: 'CreateCommandMcpInstance', description: 'A command MCP server svc runs as its own OS user: admins only' });

/** The branch a body was meant for: the command form names `command`. */
const meantForm = (input: unknown) => (typeof input === 'object' && input !== null && 'command' in input ? 1 : 0);

export const createInstanceBody = z.union([httpInstanceBody, commandInstanceBody], {
  // say what is wrong with the form the body was meant to be, not "Invalid input"
  error: (issue) => {
    const branches = (issue as { errors?: { path: PropertyKey[]; message: string }[][] }).errors;
    const first = branches?.[meantForm(issue.input)]?.[0];
    if (!first) return undefined;
    return first.path.length > 0 ? `${first.path.join('.')}: ${first.message}` : first.message;
  },
});

export const commandSpecPatch = z
  .strictObject({ command: commandProgram.optional(), args: commandArgs.optional(), env: commandEnv.optional(), cwd: commandCwd.nullable().optional() })
  .describe('A command instance\'s fields to change; env, when given, replaces every variable (values are never shown, so give them all)');

export const updateInstanceBody = z
  .strictObject({
    name: instanceName.optional(),
    enabled: z.boolean().optional(),
    headers: instanceHeaders.optional().describe('An HTTP instance\'s headers (all of them)'),
    allow_tools: allowTools.optional(),
    command: commandSpecPatch.optional().describe('A command instance only'),
    url: mcpServerUrl.optional().describe('A command instance only: the URL apps name it by'),
    try: tryOnce,
  })
  .refine((b) => Object.keys(b).some((k) => k !== 'try'), 'names at least one field to change');

export const commandExit = z
  .object({
    code: z.number().nullable(),
    signal: z.string().nullable(),
    at: z.string(),
    reason: z.string().describe('crash, line_too_long, not_json_rpc, idle, stopped, ...'),
  })
  .meta({ id: 'McpCommandExit' });

export const commandProcesses = z
  .object({ live: z.number().int(), last_exit: commandExit.nullable(), status: z.string() })
  .meta({ id: 'McpCommandProcesses' });

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
    transport: z.enum(['http', 'command']).describe('http: a server svc reaches at url; command: a server svc runs, named by url'),
    command: z
      .object({
        command: z.string(),
        args: z.array(z.string()),
        env_names: z.array(z.string()).describe('Names only: the values are secrets and never leave svc'),
        cwd: z.string().nullable(),
      })
      .optional()
      .describe('A command instance: what svc runs'),
    processes: commandProcesses.optional().describe("A command instance: its processes on the replica that answered, when svc runs them"),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'McpInstance' });

export const instanceResponse = z.object({ instance: mcpInstance });
export const instanceList = z.object({ data: z.array(mcpInstance) });
