import { type Command, Option } from 'commander';
import { DaemonClient, usage } from '../client.js';
import { resolve, resolveMcpSelections, shortId } from '../ids.js';
import { type Output, printJson, printRows, when } from '../output.js';
import { parseMcpSelections } from './requests/shared.js';
import type { z } from 'zod';
import type { apiKeyView } from '../../keys/schemas.js';

/** as the API answers it (the route's own schema; type-only, so the CLI never loads zod) */
type ApiKey = z.infer<typeof apiKeyView>;

const collect = (value: string, previous: string[] = []) => [...previous, value];
const UNIT_SECONDS: Record<string, number> = { m: 60, h: 3600, d: 86_400 };

/** `90m`, `12h`, `30d` (or `never`) to seconds; null for never. */
export function parseDuration(text: string): number | null {
  if (text === 'never') return null;
  const m = /^(\d{1,6})([mhd])$/.exec(text.trim());
  if (!m || Number(m[1]) === 0) throw usage(`--expires takes a duration like 90m, 12h or 30d (or never), not "${text}".`);
  return Number(m[1]) * UNIT_SECONDS[m[2]];
}

export function registerKeys(program: Command, o: Output): void {
  const keys = program
    .command('keys')
    .description('API keys for apps that only take a key (Open WebUI, Continue, the openai client): each is a grant you approve yourself')
    .addHelpText(
      'after',
      `
Examples:
  $ svc keys create "Open WebUI"                      # prints the key once: paste it into the app
  $ svc keys create notes --mcp http://127.0.0.1:3001/mcp=9b1e... --expires 30d
  $ svc keys create scripts --role scope_user_power_user --json
  $ svc keys list
  $ svc keys revoke 4d2a9c
`,
    );
  const connect = (cmd: Command) => DaemonClient.connect(cmd.optsWithGlobals(), o.env, o.err);

  keys
    .command('create <name>')
    .description('Create a key: an access request made and approved by you at once, under the same rules as `svc requests approve`. The key is printed once, on stdout')
    .addOption(new Option('--role <role>', 'the grant role (at most what you may grant)').choices(['scope_user_user', 'scope_user_power_user']).default('scope_user_user'))
    .option('--mcp <url=instance_id>', 'let the key use this MCP instance of yours (repeatable)', collect, [])
    .option('--expires <duration>', 'stop working after 90m, 12h, 30d... (default: never; revoke it instead)')
    .option('--json', 'machine-readable output (includes the key)')
    .action(async (name: string, opts: { role: string; mcp: string[]; expires?: string; json?: boolean }, cmd: Command) => {
      const expires_in = opts.expires === undefined ? null : parseDuration(opts.expires);
      const client = await connect(cmd);
      const mcp_servers = await resolveMcpSelections(client, parseMcpSelections(opts.mcp));
      const { body } = await client.request<ApiKey & { key: string }>('POST', '/svc/v1/keys', { name, role: opts.role, mcp_servers, expires_in });
      if (opts.json) return printJson(o, body);
      o.out(`${body.key}\n`);
      o.err(
        `Created API key ${body.id} (${body.role}${body.expires_at ? `, expires ${body.expires_at}` : ', no expiry'}; access request ${body.access_request_id}).\n` +
          `The key is shown only now. Use it as the API key with base URL ${client.info?.base_url ?? client.url}/v1 (Anthropic's SDKs and Claude Code: ${client.info?.base_url ?? client.url}); \`svc keys revoke ID\` ends it.\n`,
      );
    });

  keys
    .command('list')
    .description('Your API keys (admins: everyone\'s); never the keys themselves')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }, cmd: Command) => {
      const { body } = await (await connect(cmd)).request<{ data: ApiKey[] }>('GET', '/svc/v1/keys');
      if (opts.json) return printJson(o, body.data);
      printRows(o, body.data, [
        // short ids on a terminal (every command takes them), whole ones piped, as `svc requests list`
        { header: 'id', value: (k) => (o.isTTY ? shortId(k.id) : k.id), copy: true },
        { header: 'name', value: (k) => k.name },
        { header: 'status', value: (k) => k.status },
        { header: 'role', value: (k) => k.role },
        { header: 'mcp instances', value: (k) => k.mcp_servers.reduce((n, s) => n + s.instance_ids.length, 0) },
        { header: 'access request', value: (k) => (o.isTTY ? shortId(k.access_request_id) : k.access_request_id), copy: true },
        { header: 'created', value: (k) => when(o, k.created_at) },
        { header: 'expires', value: (k) => (k.expires_at ? when(o, k.expires_at) : 'never') },
      ]);
    });

  keys
    .command('revoke <id>')
    .description('Revoke a key (and its access request); it fails on its next call')
    .option('--json', 'machine-readable output')
    .action(async (typed: string, opts: { json?: boolean }, cmd: Command) => {
      const client = await connect(cmd);
      const id = await resolve(client, 'key', typed);
      const { body } = await client.request<{ id: string; access_request_id: string }>('POST', `/svc/v1/keys/${encodeURIComponent(id)}/revoke`);
      if (opts.json) return printJson(o, body);
      o.err(`Revoked API key ${body.id} (access request ${body.access_request_id}).\n`);
    });
}
