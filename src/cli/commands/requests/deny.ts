import type { Command } from 'commander';
import { printJson } from '../../output.js';
import { enc, type RequestsCli } from './shared.js';

/** `svc requests deny`: says no to a request. */
export function registerDeny(requests: Command, { o, connect, requestId }: RequestsCli): void {
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
}
