import { type Command, Option } from 'commander';
import { accessRequestStatuses } from '../../store/schema.js';
import { DaemonClient, usage } from '../client.js';
import { type Output, printFields, printJson, printRows } from '../output.js';

interface Summary {
  id: string;
  app_client_id: string;
  app_name?: string;
  app_registered?: boolean;
  status: string;
  requested_role: string;
  approved_role: string | null;
  requested: { mcp_servers: { url: string }[] };
  created_at: string;
  expires_at: string;
  user: string | null;
}

interface Review {
  id: string;
  app_client_id: string;
  app_name?: string;
  app_description?: string;
  app_registered?: boolean;
  flow_type: string;
  redirect_url?: string;
  status: string;
  requested_role: string;
  approved_role?: string;
  max_grantable_role: string;
  expires_at: string;
  expires_in_seconds: number;
  mcp_servers: { url: string; instances: { id: string; name: string; enabled: boolean }[] }[];
  approved?: { mcp_servers: { url: string; instance_ids: string[] }[] };
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** `--mcp URL=INSTANCE_ID` pairs, grouped by URL. The URL may itself contain '=', so split at the last one. */
export function parseMcpSelections(pairs: string[]): { url: string; instance_ids: string[] }[] {
  const byUrl = new Map<string, string[]>();
  for (const pair of pairs) {
    const at = pair.lastIndexOf('=');
    if (at <= 0 || at === pair.length - 1) throw usage(`--mcp takes URL=INSTANCE_ID, not "${pair}".`);
    const url = pair.slice(0, at);
    byUrl.set(url, [...(byUrl.get(url) ?? []), pair.slice(at + 1)]);
  }
  return [...byUrl].map(([url, instance_ids]) => ({ url, instance_ids }));
}

function remaining(seconds: number): string {
  if (seconds <= 0) return '';
  return `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`;
}

export function registerRequests(program: Command, o: Output): void {
  const requests = program
    .command('requests')
    .description('Review access requests from scripts (the same API as the browser page and `svc review`)')
    .addHelpText(
      'before',
      `Examples:
  $ svc requests list --status draft
  $ svc requests show 3f2c...
  $ svc requests approve 3f2c... --role scope_user_user --mcp https://mcp.example.test/mcp=9b1e...
  $ svc requests deny 3f2c...
  $ svc requests revoke 3f2c...
`,
    );
  const connect = (cmd: Command) => DaemonClient.connect(cmd.optsWithGlobals());
  const enc = encodeURIComponent;

  requests
    .command('list')
    .description('Requests you may see: every draft, and those you decided')
    .addOption(new Option('--status <status>', 'only this status').choices([...accessRequestStatuses]))
    .option('--json', 'machine-readable output')
    .action(async (opts: { status?: string; json?: boolean }, cmd: Command) => {
      const q = opts.status ? `?status=${enc(opts.status)}` : '';
      const { body } = await (await connect(cmd)).request<{ data: Summary[] }>('GET', `/svc/v1/access-requests${q}`);
      if (opts.json) return printJson(o, body.data);
      printRows(o, body.data, [
        { header: 'id', value: (r) => r.id },
        { header: 'status', value: (r) => r.status },
        // on a terminal, flag apps that are not in the client registry (piped rows keep their shape)
        { header: 'app', value: (r) => `${r.app_name ?? r.app_client_id}${o.isTTY && r.app_registered === false ? ' (unregistered)' : ''}` },
        { header: 'requested', value: (r) => r.requested_role },
        { header: 'approved', value: (r) => r.approved_role ?? '' },
        { header: 'mcp servers', value: (r) => r.requested.mcp_servers.length },
        { header: 'created', value: (r) => r.created_at },
      ]);
    });

  requests
    .command('show <id>')
    .description('One request, with your instances of each requested MCP server')
    .option('--json', 'machine-readable output')
    .action(async (id: string, opts: { json?: boolean }, cmd: Command) => {
      const { body: r } = await (await connect(cmd)).request<Review>('GET', `/svc/v1/access-requests/${enc(id)}/review`);
      if (opts.json) return printJson(o, r);
      printFields(o, [
        ['id', r.id],
        ['app', r.app_name ? `${r.app_name} (${r.app_client_id})` : r.app_client_id],
        ...(r.app_description ? ([['description', r.app_description]] as [string, unknown][]) : []),
        ...(r.app_registered === false ? ([['registered', 'no: not in the OAuth client registry, so its name and client id are unverified']] as [string, unknown][]) : []),
        ['status', r.status],
        ['flow', r.flow_type],
        ...(r.redirect_url ? ([['redirects to', r.redirect_url]] as [string, unknown][]) : []),
        ['requested role', r.requested_role],
        ['you may grant', r.max_grantable_role],
        ...(r.approved_role ? ([['approved role', r.approved_role]] as [string, unknown][]) : []),
        ['expires', r.status === 'draft' ? `${r.expires_at} (in ${remaining(r.expires_in_seconds)})` : r.expires_at],
      ]);
      for (const server of r.mcp_servers) {
        const granted = new Set(r.approved?.mcp_servers.find((s) => s.url === server.url)?.instance_ids ?? []);
        printFields(o, [['mcp server', server.url]]);
        if (server.instances.length === 0) printFields(o, [['  instance', '(none of yours: add one with `svc mcp add`)']]);
        for (const i of server.instances) {
          printFields(o, [['  instance', `${i.id}  ${i.name}${i.enabled ? '' : ' (disabled)'}${granted.has(i.id) ? ' (granted)' : ''}`]]);
        }
      }
    });

  requests
    .command('approve <id>')
    .description('Approve, optionally with a lower role and a subset of MCP instances')
    .addOption(new Option('--role <role>', 'approved role (default: the requested one, capped at what you may grant)').choices(['scope_user_user', 'scope_user_power_user']))
    .option('--mcp <url=instance_id>', 'grant this instance for this requested URL (repeatable)', collect, [])
    .option('--json', 'machine-readable output')
    .action(async (id: string, opts: { role?: string; mcp: string[]; json?: boolean }, cmd: Command) => {
      const client = await connect(cmd);
      const mcp_servers = parseMcpSelections(opts.mcp);
      let role = opts.role;
      if (!role) role = (await client.request<Review>('GET', `/svc/v1/access-requests/${enc(id)}/review`)).body.max_grantable_role;
      const { body } = await client.request<{ id: string; status: string; approved_role: string; access_request_scope: string }>(
        'PUT',
        `/svc/v1/access-requests/${enc(id)}/approve`,
        { approved_role: role, approved: { version: '1', mcp_servers } },
      );
      if (opts.json) return printJson(o, body);
      o.err(`Approved ${body.id} as ${body.approved_role}${mcp_servers.length === 0 ? ' (no MCP instances granted; use --mcp URL=ID)' : ''}.\n`);
    });

  requests
    .command('deny <id>')
    .description('Deny a request')
    .option('--json', 'machine-readable output')
    .action(async (id: string, opts: { json?: boolean }, cmd: Command) => {
      const { body } = await (await connect(cmd)).request<{ id: string }>('POST', `/svc/v1/access-requests/${enc(id)}/deny`);
      if (opts.json) return printJson(o, body);
      o.err(`Denied ${body.id}.\n`);
    });

  requests
    .command('revoke <id>')
    .description("Revoke an approved grant; its tokens stop working on their next call")
    .option('--json', 'machine-readable output')
    .action(async (id: string, opts: { json?: boolean }, cmd: Command) => {
      const { body } = await (await connect(cmd)).request<{ id: string }>('POST', `/svc/v1/access-requests/${enc(id)}/revoke`);
      if (opts.json) return printJson(o, body);
      o.err(`Revoked ${body.id}.\n`);
    });
}
