import { type Command, Option } from 'commander';
import { type DaemonClient, usage } from '../../client.js';
import { resolveMcpSelections, shortId } from '../../ids.js';
import { printJson } from '../../output.js';
import { collect, enc, limitsFrom, parseMcpSelections, type RequestsCli, type Review } from './shared.js';

type McpSelection = { url: string; instance_ids: string[] };

/** `svc requests approve`: approves, optionally with a lower role, a subset of instances and limits. */
export function registerApprove(requests: Command, { o, connect, requestId }: RequestsCli): void {
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
      const mcp_servers = await instancesToGrant(client, review, opts.mcp);
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
}

/**
 * The instances to grant. Without --mcp, the same default as the review page and `svc review`: the
 * instance the app named, else the first enabled one of each URL. Never less than that unless you
 * say so (--no-mcp).
 */
async function instancesToGrant(client: DaemonClient, review: Review, mcp: string[] | false): Promise<McpSelection[]> {
  const mcp_servers =
    mcp === false
      ? []
      : mcp.length > 0
        ? await resolveMcpSelections(client, parseMcpSelections(mcp))
        : review.mcp_servers
            .map((m) => ({ url: m.url, instance_ids: m.instances.filter((i) => i.enabled && i.selected).map((i) => i.id) }))
            .filter((m) => m.instance_ids.length > 0);
  if (review.status === 'draft' && mcp !== false && mcp.length === 0) {
    // never grant less than was asked without being told so before acting
    const uncovered = review.mcp_servers.filter((m) => !mcp_servers.some((g) => g.url === m.url)).map((m) => m.url);
    if (uncovered.length > 0) {
      throw usage(
        `Nothing decided: you have no enabled instance of ${uncovered.join(', ')}. Add or enable one (svc mcp), pick instances with --mcp URL=ID, or approve without MCP access with --no-mcp.`,
      );
    }
  }
  return mcp_servers;
}
