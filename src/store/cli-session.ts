import path from 'node:path';
import type { SecretBox } from './crypto.js';
import { writeFileDurably } from './durable-file.js';
import type { KeyBackend } from './master-key.js';

/**
 * The CLI's login file in the data dir, apart from the CLI so the daemon can write it on a first
 * start without importing the CLI: the session cookies sealed with the store's master key, so the
 * file alone opens nothing.
 */
export const CLI_SESSION_FILE = 'cli-session.json';
export const CLI_SESSION_KIND = 'cli_session';

export interface CliSessionFile {
  backend: KeyBackend;
  /** the session cookies, sealed with the master key */
  cookie: string;
}

export async function saveCliSession(dataDir: string, backend: KeyBackend, box: SecretBox, cookie: string): Promise<void> {
  const body: CliSessionFile = { backend, cookie: box.seal(CLI_SESSION_KIND, 'cli', cookie) };
  await writeFileDurably(path.join(dataDir, CLI_SESSION_FILE), JSON.stringify(body));
}
