import { randomBytes } from 'node:crypto';
import { lstat, readFile } from 'node:fs/promises';
import path from 'node:path';
import { writeFileDurably } from './durable-file.js';

export type KeyBackend = 'keychain' | 'file';
export type KeyBackendPreference = KeyBackend | 'auto';

/** The part of the OS keychain svc uses; tests pass their own to simulate failures. */
export interface Keychain {
  get(account: string): Promise<string | null>;
  set(account: string, secret: string): Promise<void>;
}

export const KEYCHAIN_SERVICE = 'svc';
export const MASTER_KEY_FILE = 'master.key';

/**
 * On Linux only the Secret Service counts as a keychain. Left to itself the binding silently falls
 * back to the kernel keyutils keyring, which is memory-only: a key kept there is gone at the next
 * reboot, and the store with it. Pinned, a machine without a Secret Service gets the file fallback.
 */
const entryOptions = process.platform === 'linux' ? { linux: { store: 'secret-service' as const } } : undefined;

const keyring = () => import('@napi-rs/keyring');

export const osKeychain: Keychain = {
  // async, so a constructor that throws (no store reachable) rejects like any other failure
  // the native module is loaded on first use: a data dir whose key is in a file never needs it
  get: async (account) => (await new (await keyring()).AsyncEntry(KEYCHAIN_SERVICE, account, entryOptions).getPassword()) ?? null,
  set: async (account, secret) => new (await keyring()).AsyncEntry(KEYCHAIN_SERVICE, account, entryOptions).setPassword(secret),
};

export class MasterKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MasterKeyError';
  }
}

export interface MasterKey {
  key: Buffer;
  backend: KeyBackend;
  /** said once, at the start that created the file fallback */
  notice?: string;
}

const accountFor = (dataDir: string) => `master-key:${path.resolve(dataDir)}`;

function decode(text: string, where: string): Buffer {
  const key = Buffer.from(text.trim(), 'base64');
  if (key.length !== 32) throw new MasterKeyError(`The master key in ${where} is not a 256-bit key.`);
  return key;
}

/**
 * An existing master.key is believed only when it is this user's own file that nobody else may
 * read or write: one another user planted would have the store sealed under a key they know.
 * Answers false when there is none.
 */
async function checkKeyFile(file: string): Promise<boolean> {
  const st = await lstat(file).catch((err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? null : Promise.reject(err)));
  if (!st) return false;
  if (!st.isFile()) throw new MasterKeyError(`The master key file ${file} is not a plain file (a link, or a folder); svc will not use it. Put the key itself there, 0600.`);
  const uid = process.getuid?.();
  if (uid === undefined) return true;
  if (st.uid !== uid) throw new MasterKeyError(`The master key file ${file} belongs to another user (uid ${st.uid}); svc will not use it. Check who put it there: a store sealed with it is open to them.`);
  if ((st.mode & 0o077) !== 0) throw new MasterKeyError(`The master key file ${file} can be read or written by other users (mode ${(st.mode & 0o777).toString(8)}); svc will not use it. If it is yours, \`chmod 600 ${file}\`.`);
  return true;
}

async function readKeyFile(dataDir: string): Promise<Buffer> {
  const file = path.join(dataDir, MASTER_KEY_FILE);
  let text: string;
  if (!(await checkKeyFile(file))) throw new MasterKeyError(`The master key file ${file} is missing; the store's secrets cannot be opened without it.`);
  try {
    text = await readFile(file, 'utf8');
  } catch {
    throw new MasterKeyError(`The master key file ${file} is missing; the store's secrets cannot be opened without it.`);
  }
  return decode(text, file);
}

/**
 * A master.key left by a first start that died before the store recorded where its key lives: the
 * key when it is whole, `invalid` when it is empty or cut short (no store uses it, so it may go).
 */
async function leftoverKeyFile(dataDir: string): Promise<Buffer | 'invalid' | null> {
  let text: string;
  if (!(await checkKeyFile(path.join(dataDir, MASTER_KEY_FILE)))) return null;
  try {
    text = await readFile(path.join(dataDir, MASTER_KEY_FILE), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new MasterKeyError(`Cannot read ${path.join(dataDir, MASTER_KEY_FILE)}: ${(err as Error).message}`);
  }
  const key = Buffer.from(text.trim(), 'base64');
  return key.length === 32 ? key : 'invalid';
}

/** Whole or not at all (temporary file, fsync, rename): a crash or a full disk leaves no 0-byte key. */
async function writeKeyFile(dataDir: string, key: Buffer): Promise<void> {
  await writeFileDurably(path.join(dataDir, MASTER_KEY_FILE), key.toString('base64'));
}

/** A keychain that answers get but silently drops set (no Secret Service) is not a keychain. */
async function keychainRoundTrip(keychain: Keychain, account: string, value: string): Promise<boolean> {
  try {
    await keychain.set(account, value);
    return (await keychain.get(account)) === value;
  } catch {
    return false;
  }
}

/** Throws when `box` (the master key) does not open the store's key check: wrong key, nothing changed. */
export function checkStoreKey(box: { open(kind: string, id: string, sealed: string): string }, keyCheck: string, team = false): void {
  try {
    if (box.open('meta', 'key_check', keyCheck) !== 'svc') throw new Error('mismatch');
  } catch {
    throw new MasterKeyError(
      team
        ? "The master key (SVC_MASTER_KEY or --master-key-file) does not open this database's sealed data: every replica needs the key the database was created with. Nothing was changed."
        : 'The master key does not open this store (wrong keychain entry or master.key?). Nothing was changed.',
    );
  }
}

/** Where a team server's master key comes from (config.ts's MasterKeySource). */
export type TeamKeySource = { file: string } | { value: { reveal(): string } };

/**
 * The team's master key: the same 32 bytes on every replica of one database, given as
 * SVC_MASTER_KEY or in the file --master-key-file names (base64url or base64). Never created
 * here: a replica that makes up its own would seal what no other replica opens.
 */
export async function teamMasterKey(source: TeamKeySource | null): Promise<Buffer> {
  const hint = 'Generate one with `openssl rand -base64 32` (or `head -c 32 /dev/urandom | base64`) and give every replica the same one.';
  if (!source) throw new MasterKeyError(`--database needs the team's master key: set SVC_MASTER_KEY (32 bytes, base64url) or give --master-key-file. ${hint}`);
  let text: string;
  let where: string;
  if ('file' in source) {
    where = source.file;
    try {
      text = await readFile(source.file, 'utf8');
    } catch (err) {
      throw new MasterKeyError(`Cannot read the master key file ${source.file} (${(err as NodeJS.ErrnoException).code ?? 'unreadable'}).`);
    }
  } else {
    where = 'SVC_MASTER_KEY';
    text = source.value.reveal();
  }
  const key = Buffer.from(text.trim(), 'base64url');
  if (key.length !== 32 || !/^[A-Za-z0-9+/_-]+={0,2}$/.test(text.trim())) throw new MasterKeyError(`The master key in ${where} is not 32 bytes of base64url. ${hint}`);
  return key;
}

/**
 * Finds the master key where the store says it lives, or creates one for a new store: in the OS
 * keychain when one answers, else in `<data-dir>/master.key` (0600) with a notice.
 */
export async function resolveMasterKey(opts: {
  dataDir: string;
  existingBackend: KeyBackend | 'team' | null;
  preference: KeyBackendPreference;
  keychain: Keychain;
}): Promise<MasterKey> {
  const { dataDir, existingBackend, preference, keychain } = opts;
  const account = accountFor(dataDir);

  if (existingBackend === 'team') throw new MasterKeyError("This store is a team's: its master key is the team's (SVC_MASTER_KEY or --master-key-file), not this machine's.");
  if (existingBackend === 'file') return { key: await readKeyFile(dataDir), backend: 'file' };
  if (existingBackend === 'keychain') {
    let text: string | null;
    try {
      text = await keychain.get(account);
    } catch (err) {
      throw new MasterKeyError(
        `The OS keychain holds this store's master key but did not answer (${(err as Error).message}). Unlock the keychain and start again.`,
      );
    }
    if (!text) {
      throw new MasterKeyError(
        `The OS keychain has no master key for ${path.resolve(dataDir)} (service "${KEYCHAIN_SERVICE}"). Unlock the right keychain and start again.`,
      );
    }
    return { key: decode(text, 'the OS keychain'), backend: 'keychain' };
  }

  // A first start that died after writing master.key but before the store recorded it: reuse a
  // whole key; an empty or partial one (an older svc's interrupted write) opens nothing: replace it.
  let replaced = false;
  if (preference !== 'keychain') {
    const leftover = await leftoverKeyFile(dataDir);
    if (leftover instanceof Buffer) return { key: leftover, backend: 'file' };
    replaced = leftover === 'invalid';
  }
  // A key the keychain already holds for this path is an earlier store's (one moved aside, or
  // being restored): replacing it would leave that store's secrets sealed with a key nobody has.
  // The new store uses it too.
  if (preference !== 'file') {
    const earlier = await keychain.get(account).catch(() => null);
    const key = earlier ? Buffer.from(earlier.trim(), 'base64') : null;
    if (key?.length === 32) return { key, backend: 'keychain' };
  }
  const key = randomBytes(32);
  if (preference !== 'file' && (await keychainRoundTrip(keychain, account, key.toString('base64')))) {
    return { key, backend: 'keychain' };
  }
  if (preference === 'keychain') {
    throw new MasterKeyError('No OS keychain answered (is a Secret Service running and unlocked?), and --keychain keychain was asked for.');
  }
  await writeKeyFile(dataDir, key);
  const file = path.join(dataDir, MASTER_KEY_FILE);
  return {
    key,
    backend: 'file',
    notice:
      (replaced ? `${file} was empty or incomplete (an interrupted first start) and no store used it; it was replaced. ` : '') +
      (preference === 'file'
        ? `The master key is kept in ${file} (0600), as asked.`
        : `No OS keychain answered, so the master key is kept in ${file} (0600). Protect that file like a password.`),
  };
}
