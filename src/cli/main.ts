import { Command, CommanderError } from 'commander';
import { AppError } from '../errors.js';
import { inert } from '../text.js';
import { VERSION } from '../version.js';
import { registerActivity } from './commands/activity.js';
import { registerMcp } from './commands/mcp.js';
import { registerClients } from './commands/clients.js';
import { registerCompletion } from './commands/completion.js';
import { registerKeys } from './commands/keys.js';
import { registerModels } from './commands/models.js';
import { registerOpen } from './commands/open.js';
import { registerProviders } from './commands/providers.js';
import { registerRequests } from './commands/requests/index.js';
import { registerCalls, registerRequestTools } from './commands/calls.js';
import { registerReview } from './commands/review.js';
import { registerServe } from './commands/serve.js';
import { registerService } from './commands/service.js';
import { registerSession } from './commands/session.js';
import { registerStore } from './commands/store.js';
import { registerUsers } from './commands/users.js';
import { CliError, EXIT, exitCodeFor, hintFor } from './errors.js';
import { type Output, processOutput } from './output.js';

export { outputClosed } from './output.js';

export function buildProgram(o: Output): Command {
  const program = new Command('svc')
    .description('Let third-party apps reach your local AI, with your consent, scoped to what you approve.')
    .version(VERSION, '-v, --version')
    .option('--data-dir <dir>', 'data directory (env SVC_HOME; default $XDG_DATA_HOME/svc)')
    .option('--host <host>', 'daemon host (env SVC_HOST; default 127.0.0.1)')
    .option('--port <port>', 'daemon port (env SVC_PORT; default 7878; 0 picks a free one)')
    .addHelpText(
      'after',
      `
Examples:
  $ svc serve                       # run the daemon (first start prints the admin password)
  $ svc requests list               # access requests waiting for you
  $ svc requests approve ID --role scope_user_user --mcp URL=INSTANCE_ID
  $ svc review                      # review requests in the terminal (keys shown at the bottom)
  $ svc mcp add --name files --url http://127.0.0.1:3001/mcp
  $ svc keys create "Open WebUI"    # an API key for an app that only takes a key
  $ svc open                        # the home page in your browser, signed in
  $ SVC=$(svc status --url)         # where apps reach the daemon, whatever its port
`,
    )
    .showHelpAfterError('(run with --help for usage)')
    .configureOutput({ writeOut: (s) => o.out(s), writeErr: (s) => o.err(s) })
    .exitOverride();
  registerServe(program, o);
  registerSession(program, o);
  registerRequests(program, o);
  registerRequestTools(program, o);
  registerCalls(program, o);
  registerReview(program, o);
  registerActivity(program, o);
  registerOpen(program, o);
  registerKeys(program, o);
  registerMcp(program, o);
  registerUsers(program, o);
  registerClients(program, o);
  registerProviders(program, o);
  registerModels(program, o);
  registerService(program, o);
  registerStore(program, o);
  registerCompletion(program, o);
  for (const cmd of program.commands) {
    cmd.exitOverride().configureOutput({ writeOut: (s) => o.out(s), writeErr: (s) => o.err(s) });
    for (const sub of cmd.commands) sub.exitOverride().configureOutput({ writeOut: (s) => o.out(s), writeErr: (s) => o.err(s) });
    shareExamples(cmd, o);
  }
  return program;
}

/** The verbs that ran, without options: "login", "requests approve". */
function commandPath(argv: string[]): string {
  return argv
    .slice(2)
    .filter((a) => !a.startsWith('-'))
    .slice(0, 2)
    .join(' ')
    .replace(/^(login|logout|status|review|serve)\b.*$/, '$1');
}

/** Runs the CLI and answers its exit code: 0 ok, 1 error, 2 usage, 4 not logged in or not allowed. */
export async function main(argv: string[], o: Output = processOutput()): Promise<number> {
  const program = buildProgram(o);
  try {
    await program.parseAsync(argv);
    return EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help') return EXIT.ok;
      return EXIT.usage;
    }
    // Messages can quote what an app sent: no control character reaches the terminal.
    const say = (text: string) => o.err(`svc: ${inert(text, 2000)}\n`);
    if (err instanceof CliError) {
      if (err.message) say(err.message);
      return err.exitCode;
    }
    if (err instanceof AppError) {
      const hint = hintFor(err, commandPath(argv));
      say(`${err.message}${hint ? ` (${hint})` : ''}`);
      return exitCodeFor(err);
    }
    say((err as Error)?.message ?? String(err));
    return EXIT.error;
  }
}

/**
 * A group's examples are written once, on the group (`svc mcp --help`); each subcommand's help
 * leads with the lines that are about it (`svc mcp add --help`).
 */
function shareExamples(group: Command, o: Output): void {
  if (group.commands.length === 0) return;
  let text = '';
  group.configureOutput({ writeOut: (s) => (text += s), writeErr: () => undefined });
  group.outputHelp();
  group.configureOutput({ writeOut: (s) => o.out(s), writeErr: (s) => o.err(s) });
  const examples = text.split('\n').filter((l) => l.trimStart().startsWith('$ '));
  for (const sub of group.commands) {
    const mine = examples.filter((l) => new RegExp(`svc ${group.name()} ${sub.name()}( |$)`).test(l));
    if (mine.length > 0) sub.addHelpText('after', `\nExamples:\n${mine.join('\n')}\n`);
  }
}
