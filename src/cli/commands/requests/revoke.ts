import type { Command } from 'commander';
import { printJson } from '../../output.js';
import { enc, type RequestsCli } from './shared.js';

/** `svc requests revoke`: ends an approved grant. */
export function registerRevoke(requests: Command, { o, connect, requestId }: RequestsCli): void {
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
