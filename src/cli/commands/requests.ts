import { type Command, Option } from 'commander';
import { CLIENT_KIND_BADGES, unverifiedReason } from '../../access-requests/client-kinds.js';
import { APP_ROLE_NAMES } from '../../auth/roles.js';
import { type AppRole, accessRequestStatuses } from '../../store/vocabulary.js';
import { DaemonClient, usage } from '../client.js';
import { CliError } from '../errors.js';
import { resolve, resolveMcpSelections, shortId } from '../ids.js';
import { type Output, printFields, printJson, printRows, when } from '../output.js';
import { toolLine } from './calls.js';
import type { z } from 'zod';
import type { accessRequestSummary, reviewResponse } from '../../access-requests/schemas.js';

/** as the API answers them (the routes' own schemas; type-only, so the CLI never loads zod) */
type Summary = z.infer<typeof accessRequestSummary>;

type Review = z.infer<typeof reviewResponse>;

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

type Limits = { requests_per_minute: number | null; tokens_per_day: number | null };

/** `--rpm` and `--tokens-per-day` as a limits body; `none` (where allowed) removes one. Undefined when neither is given. */
function limitsFrom(opts: { rpm?: string; tokensPerDay?: string }, allowNone: boolean): Partial<Limits> | undefined {
  const one = (flag: string, text: string | undefined) => {
    if (text === undefined) return undefined;
    if (allowNone && text === 'none') return null;
    if (!/^[1-9]\d{0,11}$/.test(text)) throw usage(`${flag} takes a whole number above 0${allowNone ? ' or none' : ''}, not "${text}".`);
    return Number(text);
  };
  const rpm = one('--rpm', opts.rpm);
  const tokens = one('--tokens-per-day', opts.tokensPerDay);
  if (rpm === undefined && tokens === undefined) return undefined;
  return { ...(rpm !== undefined ? { requests_per_minute: rpm } : {}), ...(tokens !== undefined ? { tokens_per_day: tokens } : {}) };
}

const describeLimits = (l: Limits) =>
  `${l.requests_per_minute === null ? 'no limit on calls a minute' : `${l.requests_per_minute} calls a minute`}; ${l.tokens_per_day === null ? 'no limit on tokens a day' : `${l.tokens_per_day} tokens a day`}`;
/** How a terminal flags an app whose name svc does not vouch for, by how svc knows it. */
const UNVOUCHED: Record<string, string> = { dynamic: ' (registered itself)', metadata_document: ' (metadata document)' };

const roleName = (role: string) => APP_ROLE_NAMES[role as AppRole] ?? role;

export function registerRequests(program: Command, o: Output): void {
  /** On a terminal the name and the value (`Power User (scope_user_power_user)`); piped, the value. */
  const role = (value: string) => (o.isTTY ? `${roleName(value)} (${value})` : value);
  const requests = program
    .command('requests')
    .description('Review access requests from scripts (the same API as the browser page and `svc review`)')
    .addHelpText(
      'after',
      `
Examples:
  $ svc requests list --status draft
  $ svc requests show 3f2c...
  $ svc requests approve 3f2c... --role scope_user_user --mcp https://mcp.example.test/mcp=9b1e...
  $ svc requests deny 3f2c...
  $ svc requests revoke 3f2c...
  $ svc requests limits 3f2c... --rpm 60 --tokens-per-day 200000
`,
    );
  const connect = (cmd: Command) => DaemonClient.connect(cmd.optsWithGlobals(), o.env);
  const enc = encodeURIComponent;
  /** The full id of a request from a unique prefix (6+ characters), among the requests you may see. */
  const requestId = (client: DaemonClient, typed: string) => resolve(client, 'request', typed);

  requests
    .command('list')
    .description('Requests you may see: every draft, and those you decided')
    .addOption(new Option('--status <status>', 'only this status (pending is draft, as the review page and `svc review` say)').choices([...accessRequestStatuses, 'pending']))
    .option('--json', 'machine-readable output')
    .action(async (opts: { status?: string; json?: boolean }, cmd: Command) => {
      // Said here too, so that a daemon that predates the word answers the same.
      const status = opts.status === 'pending' ? 'draft' : opts.status;
      const q = status ? `?status=${enc(status)}` : '';
      const { body } = await (await connect(cmd)).request<{ data: Summary[] }>('GET', `/svc/v1/access-requests${q}`);
      if (opts.json) return printJson(o, body.data);
      printRows(o, body.data, [
        { header: 'id', value: (r) => (o.isTTY ? shortId(r.id) : r.id), copy: true },
        { header: 'status', value: (r) => r.status },
        // on a terminal, flag apps whose name svc does not vouch for (piped rows keep their shape)
        { header: 'app', value: (r) => `${r.app_name ?? r.app_client_id}${o.isTTY && r.app_registered === false ? (UNVOUCHED[r.client_kind ?? ''] ?? ' (unregistered)') : ''}` },
        // people read role names on a terminal; scripts get the wire values
        { header: 'requested', value: (r) => (o.isTTY ? roleName(r.requested_role) : r.requested_role) },
        { header: 'approved', value: (r) => (r.approved_role ? (o.isTTY ? roleName(r.approved_role) : r.approved_role) : '') },
        { header: 'mcp servers', value: (r) => r.requested.mcp_servers.length },
        { header: 'created', value: (r) => when(o, r.created_at) },
      ]);
    });

  requests
    .command('show <id>')
    .description('One request, with your instances of each requested MCP server')
    .option('--json', 'machine-readable output')
    .action(async (typed: string, opts: { json?: boolean }, cmd: Command) => {
      const client = await connect(cmd);
      const id = await requestId(client, typed);
      const { body: r } = await client.request<Review>('GET', `/svc/v1/access-requests/${enc(id)}/review`);
      if (opts.json) return printJson(o, r);
      const field = (cond: unknown, key: string, value: unknown): [string, unknown][] => (cond ? [[key, value]] : []);
      const draft = r.status === 'draft';
      // Only what applies to the status: where the person will be sent, the time left and what
      // they may grant matter while it waits; a grant has no expiry, a decision has its time.
      printFields(o, [
        ['id', r.id],
        ['app', r.app_name ? `${r.app_name} (${r.app_client_id})` : r.app_client_id],
        ...field(r.app_description, 'description', r.app_description),
        ...field(r.client_kind, 'client', r.client_kind && CLIENT_KIND_BADGES[r.client_kind].toLowerCase()),
        ...field(r.app_registered === false, 'registered', unverifiedReason(r.client_kind)),
        ['status', r.replaced_by ? `${r.status} (replaced by ${shortId(r.replaced_by)}, a later sign-in of the same app)` : r.status],
        ['flow', r.flow_type],
        // A sign-in at the authorization endpoint goes back through svc's own pages: where the
        // app gets its answer is the origin of its redirect URI, not svc's internal resume URL.
        ...(r.redirect_origin ? field(draft, 'signs in from', r.redirect_origin) : field(draft && r.redirect_url, 'redirects to', r.redirect_url)),
        ['requested role', role(r.requested_role)],
        ...field(draft, 'you may grant', role(r.max_grantable_role)),
        ...field(r.approved_role, 'approved role', r.approved_role && role(r.approved_role)),
        ['created', when(o, r.created_at)],
        ...field(draft, 'expires', o.isTTY ? `in ${remaining(r.expires_in_seconds) || '0s'}` : r.expires_at),
        ...field(r.status === 'expired', 'expired', when(o, r.expires_at)),
        ...field(r.decided_at, r.status === 'denied' || r.status === 'failed' ? r.status : 'approved', when(o, r.decided_at)),
        ...field(r.revoked_at, 'revoked', when(o, r.revoked_at)),
      ]);
      if (r.usage) {
        const u = r.usage;
        printFields(o, [
          ['used', `${u.calls} calls (${u.refused} refused), ${u.tokens_in} tokens in, ${u.tokens_out} out; today ${u.today.calls} calls, ${u.today.tokens} tokens`],
          ['last used', u.last_used_at ?? 'never'],
        ]);
      }
      if (r.limits) printFields(o, [['limits', describeLimits(r.limits)]]);
      for (const server of r.mcp_servers) {
        const granted = new Set(r.approved?.mcp_servers.find((s) => s.url === server.url)?.instance_ids ?? []);
        printFields(o, [['mcp server', server.url]]);
        if (server.instances.length === 0) printFields(o, [['  instance', '(none of yours: add one with `svc mcp add`)']]);
        for (const i of server.instances) {
          printFields(o, [['  instance', `${i.id}  ${i.name}${i.enabled ? '' : ' (disabled)'}${granted.has(i.id) ? ' (granted)' : ''}`]]);
          if (i.enabled && i.tools_known === false) printFields(o, [['    tools', '(not known: the server did not answer; each gets its default when called)']]);
          if (r.status === 'draft') for (const t of i.tools ?? []) printFields(o, [['    tool', toolLine(t)]]);
        }
      }
      // a grant's choices in force, per granted instance (change them with `svc requests tools`)
      for (const c of r.tool_choices ?? []) {
        printFields(o, [['granted', `${c.instance_id}  ${c.instance_name ?? '(removed)'}${c.default ? ` (default ${c.default})` : ''}`]]);
        for (const t of c.tools) printFields(o, [['    tool', toolLine(t)]]);
      }
    });

  requests
    .command('approve <id>')
    .description('Approve, optionally with a lower role and a subset of MCP instances')
    .addOption(new Option('--role <role>', 'approved role (default: where the review page starts: the lowest that serves the request, else the requested one capped at what you may grant)').choices(['scope_user_user', 'scope_user_power_user']))
    .option('--mcp <url=instance_id>', 'grant this instance for this requested URL (repeatable; the id or a unique prefix)', collect, [])
    .option('--no-mcp', 'grant no MCP instance at all')
    .option('--rpm <n>', 'limit the grant to n calls a minute (429 beyond)')
    .option('--tokens-per-day <n>', 'limit the grant to n upstream tokens a day (429 beyond, until local midnight)')
    .option('--json', 'machine-readable output')
    .action(async (typed: string, opts: { role?: string; mcp: string[] | false; rpm?: string; tokensPerDay?: string; json?: boolean }, cmd: Command) => {
      const limits = limitsFrom(opts, false);
      const client = await connect(cmd);
      const id = await requestId(client, typed);
      const review = (await client.request<Review>('GET', `/svc/v1/access-requests/${enc(id)}/review`)).body;
      // Without --mcp, the same default as the review page and `svc review`: the instance the app
      // named, else the first enabled one of each URL. Never less than that unless you say so (--no-mcp).
      const mcp_servers =
        opts.mcp === false
          ? []
          : opts.mcp.length > 0
            ? await resolveMcpSelections(client, parseMcpSelections(opts.mcp))
            : review.mcp_servers
                .map((m) => ({ url: m.url, instance_ids: m.instances.filter((i) => i.enabled && i.selected).map((i) => i.id) }))
                .filter((m) => m.instance_ids.length > 0);
      if (review.status === 'draft' && opts.mcp !== false && opts.mcp.length === 0) {
        // never grant less than was asked without being told so before acting
        const uncovered = review.mcp_servers.filter((m) => !mcp_servers.some((g) => g.url === m.url)).map((m) => m.url);
        if (uncovered.length > 0) {
          throw usage(
            `Nothing decided: you have no enabled instance of ${uncovered.join(', ')}. Add or enable one (svc mcp), pick instances with --mcp URL=ID, or approve without MCP access with --no-mcp.`,
          );
        }
      }
      const role = opts.role ?? review.suggested_role;
      const { body } = await client.request<{ id: string; status: string; approved_role?: string; access_request_scope?: string }>(
        'PUT',
        `/svc/v1/access-requests/${enc(id)}/approve`,
        { approved_role: role, approved: { version: '1', mcp_servers }, ...(limits ? { limits } : {}) },
      );
      if (opts.json) return printJson(o, body);
      if (body.status === 'denied') {
        o.err(`Denied ${body.id}: it signs in for an MCP instance that was not granted, so its token could reach nothing. Grant it with --mcp URL=ID to approve.\n`);
        return;
      }
      const granted = mcp_servers.flatMap((m) => m.instance_ids.map((i) => `${shortId(i)} for ${m.url}`));
      const left = review.mcp_servers.filter((m) => !mcp_servers.some((g) => g.url === m.url)).map((m) => m.url);
      o.err(
        `Approved ${body.id} as ${body.approved_role}, ${granted.length ? `granting ${granted.join(', ')}` : 'with no MCP instance'}.${left.length ? ` Not granted: ${left.join(', ')}.` : ''}\n`,
      );
    });

  requests
    .command('limits <id>')
    .description("Show or set a grant's limits: calls a minute and upstream tokens a day (none removes one)")
    .option('--rpm <n|none>', 'calls a minute')
    .option('--tokens-per-day <n|none>', 'upstream tokens (in + out) a local calendar day')
    .option('--json', 'machine-readable output')
    .addHelpText('after', '\nExamples:\n  $ svc requests limits 3f2c9a --rpm 60 --tokens-per-day 200000\n  $ svc requests limits 3f2c9a --rpm none\n  $ svc requests limits 3f2c9a\n')
    .action(async (typed: string, opts: { rpm?: string; tokensPerDay?: string; json?: boolean }, cmd: Command) => {
      const client = await connect(cmd);
      const id = await requestId(client, typed);
      const change = limitsFrom(opts, true);
      const limits = change
        ? (await client.request<{ limits: Limits }>('PUT', `/svc/v1/access-requests/${enc(id)}/limits`, change)).body.limits
        : (await client.request<Review>('GET', `/svc/v1/access-requests/${enc(id)}/review`)).body.limits;
      if (!limits) throw new CliError(`Request ${shortId(id)} is not an approved grant, so it has no limits.`);
      if (opts.json) return printJson(o, { id, limits });
      o.out(`${describeLimits(limits)}\n`);
    });

  requests
    .command('deny <id>')
    .description('Deny a request')
    .option('--json', 'machine-readable output')
    .action(async (typed: string, opts: { json?: boolean }, cmd: Command) => {
      const client = await connect(cmd);
      const id = await requestId(client, typed);
      const { body } = await client.request<{ id: string }>('POST', `/svc/v1/access-requests/${enc(id)}/deny`);
      if (opts.json) return printJson(o, body);
      o.err(`Denied ${body.id}.\n`);
    });

  requests
    .command('revoke <id>')
    .description("Revoke an approved grant; its tokens stop working on their next call")
    .option('--json', 'machine-readable output')
    .action(async (typed: string, opts: { json?: boolean }, cmd: Command) => {
      const client = await connect(cmd);
      const id = await requestId(client, typed);
      const { body } = await client.request<{ id: string }>('POST', `/svc/v1/access-requests/${enc(id)}/revoke`);
      if (opts.json) return printJson(o, body);
      o.err(`Revoked ${body.id}.\n`);
    });
}
