import type { Command } from 'commander';
import { DaemonClient } from '../client.js';
import { CliError, EXIT } from '../errors.js';
import type { Output } from '../output.js';

export function registerReview(program: Command, o: Output): void {
  program
    .command('review')
    .description('Review access requests in the terminal: pending requests live, approve or deny with keys')
    .addHelpText(
      'after',
      `
Examples:
  $ svc review                      # pending requests, updated every second
  $ NO_COLOR=1 svc review           # the same, without colour

Keys: up/down or j/k move, Enter opens a request, space ticks an instance,
r cycles the role (up to what you may grant), a approves, d denies,
Esc goes back, q quits. Scripts use \`svc requests\` instead.
`,
    )
    .action(async (_opts, cmd: Command) => {
      if (!o.isTTY || !process.stdin.isTTY) {
        throw new CliError('`svc review` needs a terminal. In scripts use `svc requests list` (and `svc requests show|approve|deny`).', EXIT.error);
      }
      const client = await DaemonClient.connect(cmd.optsWithGlobals(), o.env, o.err);
      // Not logged in (exit 4) or no daemon (the `svc serve` hint) is said before the screen opens.
      const me = await client.request<{ user: { username: string } }>('GET', '/svc/v1/auth/me');
      // Ink draws only a last frame, and its colour library no colours, when they believe they run
      // under CI (a `CI` variable in the environment). Here a person is at a terminal (checked
      // above), so for this process they are told otherwise; NO_COLOR still turns colour off.
      delete process.env.CI;
      delete process.env.CONTINUOUS_INTEGRATION;
      const { runReview } = await import('../../tui/run.js');
      const { daemonReviewClient } = await import('../../tui/client.js');
      await runReview(daemonReviewClient(client), { user: me.body.user.username });
    });
}
