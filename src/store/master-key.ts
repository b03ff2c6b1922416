import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
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

async function readKeyFile(dataDir: string): Promise<Buffer> {
  const file = path.join(dataDir, MASTER_KEY_FILE);
  let text: string;
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
export function checkStoreKey(box: { open(kind: string, id: string, sealed: string): string }, keyCheck: string): void {
  try {
    if (box.open('meta', 'key_check', keyCheck) !== 'svc') throw new Error('mismatch');
  } catch {
    throw new MasterKeyError('The master key does not open this store (wrong keychain entry or master.key?). Nothing was changed.');
  }
}

/**
 * Finds the master key where the store says it lives, or creates one for a new store: in the OS
 * keychain when one answers, else in `<data-dir>/master.key` (0600) with a notice.
 */
export async function resolveMasterKey(opts: {
  dataDir: string;
  existingBackend: KeyBackend | null;
  preference: KeyBackendPreference;
  keychain: Keychain;
}): Promise<MasterKey> {
  const { dataDir, existingBackend, preference, keychain } = opts;
  const account = accountFor(dataDir);

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
