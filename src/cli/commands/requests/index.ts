import type { Command } from 'commander';
import type { Output } from '../../output.js';
import { registerApprove } from './approve.js';
import { registerDeny } from './deny.js';
import { registerLimits } from './limits.js';
import { registerList } from './list.js';
import { registerRevoke } from './revoke.js';
import { registerShow } from './show.js';
import { requestsCli } from './shared.js';

/** `svc requests`: one file per verb, each adding its subcommand. */
export function registerRequests(program: Command, o: Output): void {
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
  const cli = requestsCli(o);
  registerList(requests, cli);
  registerShow(requests, cli);
  registerApprove(requests, cli);
  registerLimits(requests, cli);
  registerDeny(requests, cli);
  registerRevoke(requests, cli);
}
