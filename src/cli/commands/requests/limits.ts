import type { Command } from 'commander';
import { CliError } from '../../errors.js';
import { shortId } from '../../ids.js';
import { printJson } from '../../output.js';
import { describeLimits, enc, type Limits, limitsFrom, type RequestsCli, type Review } from './shared.js';

/** `svc requests limits`: shows a grant's limits, or changes them. */
export function registerLimits(requests: Command, { o, connect, requestId }: RequestsCli): void {
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
}
