import { readFile, unlink } from 'node:fs/promises';
import path from 'node:path';
import { SecretBox } from '../store/crypto.js';
import { LOCAL_LOGIN_LABEL } from '../daemon-info.js';
import { CLI_SESSION_FILE, CLI_SESSION_KIND, type CliSessionFile, saveCliSession } from '../store/cli-session.js';
import { CliError } from './errors.js';
import { type Keychain, type KeyBackend, osKeychain, resolveMasterKey } from '../store/master-key.js';

export { CLI_SESSION_FILE, saveCliSession } from '../store/cli-session.js';
const KIND = CLI_SESSION_KIND;

export async function loadCliSession(dataDir: string, keychain: Keychain = osKeychain): Promise<string | null> {
  let parsed: CliSessionFile;
  try {
    parsed = JSON.parse(await readFile(path.join(dataDir, CLI_SESSION_FILE), 'utf8')) as CliSessionFile;
  } catch {
    return null;
  }
  let key: Buffer;
  try {
    ({ key } = await resolveMasterKey({ dataDir, existingBackend: parsed.backend, preference: 'auto', keychain }));
  } catch (err) {
    // Not "not logged in": the login is there but its key cannot be reached (a locked keychain,
    // no D-Bus over ssh). Say that, rather than sending the user to `svc login` for nothing.
    throw new CliError(`Cannot open the CLI's saved login: ${(err as Error).message}`);
  }
  try {
    return new SecretBox(key).open(KIND, 'cli', parsed.cookie);
  } catch {
    return null;
  }
}

/** Seals a new CLI session with the key the file already names (the CLI never creates master keys). */
export async function storeCliSession(dataDir: string, cookie: string, backend: KeyBackend, keychain: Keychain = osKeychain): Promise<void> {
  const { key } = await resolveMasterKey({ dataDir, existingBackend: backend, preference: 'auto', keychain });
  await saveCliSession(dataDir, backend, new SecretBox(key), cookie);
}

export async function clearCliSession(dataDir: string): Promise<void> {
  await unlink(path.join(dataDir, CLI_SESSION_FILE)).catch(() => undefined);
}

/** The local CLI's login proof, or null when the master key cannot be reached (then it logs in like anyone). */
export async function localLoginProof(dataDir: string, backend: KeyBackend, keychain: Keychain = osKeychain): Promise<string | null> {
  try {
    const { key } = await resolveMasterKey({ dataDir, existingBackend: backend, preference: 'auto', keychain });
    return new SecretBox(key).derive(LOCAL_LOGIN_LABEL);
  } catch {
    return null;
  }
}
