import type { Command } from 'commander';
import { CLIENT_KIND_BADGES, unverifiedReason } from '../../../access-requests/client-kinds.js';
import { shortId } from '../../ids.js';
import { type Output, printFields, printJson, when } from '../../output.js';
import { rememberedLine, toolLine } from '../calls.js';
import { describeLimits, enc, type RequestsCli, type Review } from './shared.js';

function remaining(seconds: number): string {
  if (seconds <= 0) return '';
  return `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`;
}

/** `svc requests show`: one request, with your instances of each requested MCP server. */
export function registerShow(requests: Command, cli: RequestsCli): void {
  const { o, connect, requestId } = cli;
  requests
    .command('show <id>')
    .description('One request, with your instances of each requested MCP server')
    .option('--json', 'machine-readable output')
    .action(async (typed: string, opts: { json?: boolean }, cmd: Command) => {
      const client = await connect(cmd);
      const id = await requestId(client, typed);
      const { body: r } = await client.request<Review>('GET', `/svc/v1/access-requests/${enc(id)}/review`);
      if (opts.json) return printJson(o, r);
      printRequest(cli, r);
      printUse(o, r);
      printServers(o, r);
    });
}

/**
 * The request itself. Only what applies to the status: where the person will be sent, the time
 * left and what they may grant matter while it waits; a grant has no expiry, a decision has its time.
 */
function printRequest({ o, role }: RequestsCli, r: Review): void {
  const field = (cond: unknown, key: string, value: unknown): [string, unknown][] => (cond ? [[key, value]] : []);
  const draft = r.status === 'draft';
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
}

/** A grant's use so far and its limits. */
function printUse(o: Output, r: Review): void {
  if (r.usage) {
    const u = r.usage;
    printFields(o, [
      ['used', `${u.calls} calls (${u.refused} refused), ${u.tokens_in} tokens in, ${u.tokens_out} out; today ${u.today.calls} calls, ${u.today.tokens} tokens`],
      ['last used', u.last_used_at ?? 'never'],
    ]);
  }
  if (r.limits) printFields(o, [['limits', describeLimits(r.limits)]]);
}

/** Each requested MCP server with your instances of it, then the tool choices in force per granted instance. */
function printServers(o: Output, r: Review): void {
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
    for (const m of c.remembered ?? []) printFields(o, [['    remembered', rememberedLine(m)]]);
  }
}
