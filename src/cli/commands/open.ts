import { spawn } from 'node:child_process';
import type { Command } from 'commander';
import { DaemonClient } from '../client.js';
import { CliError } from '../errors.js';
import type { Output, ProcessRunner } from '../output.js';

/** Starts a program and leaves it running (a browser outlives the command); rejects if it is not there. */
export const launch: ProcessRunner = (file, args) =>
  new Promise((resolve, reject) => {
    const child = spawn(file, args, { detached: true, stdio: 'ignore' });
    child.once('error', reject);
    child.once('spawn', () => {
      child.unref();
      resolve({ code: 0, stdout: '', stderr: '' });
    });
  });

/** How this system opens a URL in the person's browser: $BROWSER first, as many tools honour it. */
export function browserCommand(url: string, platform: NodeJS.Platform, env: NodeJS.ProcessEnv): [string, string[]] {
  const browser = env.BROWSER?.split(':')[0]?.trim();
  if (browser) return [browser, [url]];
  if (platform === 'darwin') return ['open', [url]];
  if (platform === 'win32') return ['rundll32', ['url.dll,FileProtocolHandler', url]];
  return ['xdg-open', [url]];
}

export function registerOpen(program: Command, o: Output): void {
  program
    .command('open')
    .description("Open svc's home page in your browser, signed in as the CLI's user (a link that works once, for 60 s)")
    .option('--print', 'print the link instead of opening it')
    .addHelpText(
      'after',
      `
Examples:
  $ svc open                  # the browser opens on the home page, signed in
  $ svc open --print          # the link, to open elsewhere within 60 s
`,
    )
    .action(async (opts: { print?: boolean }, cmd: Command) => {
      const client = await DaemonClient.connect(cmd.optsWithGlobals(), o.env, o.err);
      const { body } = await client.request<{ url: string; expires_at: string }>('POST', '/svc/v1/auth/login-links');
      if (opts.print) {
        o.out(`${body.url}\n`);
        return;
      }
      const [file, args] = browserCommand(body.url, o.platform ?? process.platform, o.env ?? process.env);
      try {
        await (o.run ?? launch)(file, args);
      } catch (err) {
        // Nothing to open it with (a server over ssh): the link still works, in any browser.
        o.out(`${body.url}\n`);
        throw new CliError(`Could not start ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); open the link above in a browser within 60 s.`);
      }
      o.err(`Opened the home page in your browser (${file}), signed in. The link works once, for 60 s.\n`);
    });
}
