import type { Command } from 'commander';
import type { z } from 'zod';
import type { activityEventView } from '../../activity/schemas.js';
import { clockTime, inert } from '../../text.js';
import { DaemonClient, usage } from '../client.js';
import { shortId } from '../ids.js';
import { type Column, type Output, printRows, when } from '../output.js';

/** as the API answers it (the route's own schema; type-only, so the CLI never loads zod) */
type ActivityEvent = z.infer<typeof activityEventView>;

/** How often `--follow` asks for what is new. */
const FOLLOW_MS = 1000;

const what = (e: ActivityEvent) => (e.tool ? `${e.mcp_method ?? 'tool'} ${e.tool}` : (e.model ?? e.mcp_method ?? ''));
const tokens = (e: ActivityEvent) => (e.tokens_in === undefined && e.tokens_out === undefined ? '' : `${e.tokens_estimated ? '~' : ''}${e.tokens_in ?? '?'}/${e.tokens_out ?? '?'}`);
const outcome = (e: ActivityEvent) => (e.reason ? `${e.outcome} (${e.reason})` : e.outcome);

/** On a terminal: "5 min ago" in the table, the local clock time in a followed log; ISO piped. */
const columns = (o: Output, follow = false): Column<ActivityEvent>[] => [
  { header: 'time', value: (e) => (o.isTTY && follow ? clockTime(e.time) : when(o, e.time)) },
  { header: 'grant', value: (e) => (o.isTTY ? shortId(e.access_request_id) : e.access_request_id) },
  // the name every other surface gives the app (API key "demo"); its client id where svc knows none
  { header: 'app', value: (e) => e.app_name ?? e.app_client_id },
  { header: 'kind', value: (e) => e.kind },
  { header: 'model or tool', value: what },
  { header: 'status', value: (e) => e.status },
  { header: 'outcome', value: outcome },
  { header: 'ms', value: (e) => e.duration_ms },
  { header: 'tokens in/out', value: tokens },
];

const WIDTHS = [10, 8, 24, 11, 28, 6, 24, 6, 13];

/** One line of --follow: columns of fixed width on a terminal (a row comes at a time), tab-separated piped. */
function line(o: Output, cells: string[]): string {
  if (!o.isTTY) return `${cells.join('\t')}\n`;
  return `${cells.map((c, i) => (c.length > WIDTHS[i] ? `${c.slice(0, WIDTHS[i] - 1)}…` : c.padEnd(WIDTHS[i]))).join(' ').trimEnd()}\n`;
}

const eventLine = (o: Output, e: ActivityEvent) => line(o, columns(o, true).map((c) => inert(String(c.value(e) ?? ''), 200).replace(/\t/g, ' ')));

export function registerActivity(program: Command, o: Output): void {
  program
    .command('activity')
    .description('What apps did with the grants you approved (admins: every grant), newest first; never content')
    .option('--request <id>', 'only this grant (an access request id, or a unique prefix)')
    .option('--since <when>', 'only since then: 30s, 15m, 1h, 7d, or a time (ISO 8601)')
    .option('--limit <n>', 'at most n events (1-1000)', '50')
    .option('--json', 'machine-readable output (with --follow: one JSON object a line)')
    .option('--follow', 'keep printing new events as they happen (Ctrl-C stops)')
    .addHelpText(
      'after',
      `
Examples:
  $ svc activity
  $ svc activity --request 3f2c9a --since 1h
  $ svc activity --follow
  $ svc activity --follow --json | jq .
`,
    )
    .action(async (opts: { request?: string; since?: string; limit: string; json?: boolean; follow?: boolean }, cmd: Command) => {
      const limit = Number(opts.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw usage('--limit takes a whole number from 1 to 1000.');
      const client = await DaemonClient.connect(cmd.optsWithGlobals(), o.env, o.err);
      const query = (extra: Record<string, string>) =>
        new URLSearchParams({ limit: String(limit), ...(opts.request ? { grant: opts.request } : {}), ...(opts.since ? { since: opts.since } : {}), ...extra }).toString();
      const read = async (extra: Record<string, string> = {}) => (await client.request<{ data: ActivityEvent[] }>('GET', `/svc/v1/activity?${query(extra)}`)).body.data;
      const first = await read();
      if (!opts.follow) {
        if (opts.json) o.out(`${JSON.stringify(first, null, 2)}\n`);
        else printRows(o, first, columns(o));
        return;
      }
      // Following: oldest first, as a log reads, then each new event as it comes.
      const print = (e: ActivityEvent) => o.out(opts.json ? `${JSON.stringify(e)}\n` : eventLine(o, e));
      if (!opts.json && o.isTTY) o.out(line(o, columns(o, true).map((c) => c.header.toUpperCase())));
      let last = 0;
      for (const e of [...first].reverse()) {
        print(e);
        last = Math.max(last, Number(e.id));
      }
      for (;;) {
        await new Promise((r) => setTimeout(r, FOLLOW_MS));
        // all that came since, not just the newest `limit` of it
        const fresh = await read({ after: String(last), limit: '1000' });
        for (const e of fresh.reverse()) {
          print(e);
          last = Math.max(last, Number(e.id));
        }
      }
    });
}
