import { render } from 'ink';
import { ReviewApp } from './AppContainer.js';
import type { ReviewClient } from './types.js';

/** NO_COLOR (any non-empty value, no-color.org), TERM=dumb or no TTY: no colour. */
export function colorWanted(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv = process.env): boolean {
  if (!stream.isTTY) return false;
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  return env.TERM !== 'dumb';
}

/** Runs the review UI on the process's terminal until `q` (or Ctrl+C); Ink restores the terminal. */
export async function runReview(client: ReviewClient, opts: { user?: string } = {}): Promise<void> {
  // the bell is a byte that moves no cursor, so it may go straight to the terminal beside Ink's frames
  const bell = () => void process.stdout.write('\u0007');
  const instance = render(<ReviewApp client={client} color={colorWanted(process.stdout)} user={opts.user} bell={bell} />, {
    exitOnCtrlC: true,
    patchConsole: true,
  });
  await instance.waitUntilExit();
}
