import { existsSync } from 'node:fs';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import { resolveMasterKey } from '../src/store/master-key.js';
import { noKeychain, startTestDaemon, tempDir } from './helpers/daemon.js';

it('reuses a master.key left by a first start that died before the store recorded it', async () => {
  const dataDir = await tempDir();
  const key = randomBytes(32);
  await writeFile(path.join(dataDir, 'master.key'), key.toString('base64'), { mode: 0o600 });
  const found = await resolveMasterKey({ dataDir, existingBackend: null, preference: 'auto', keychain: noKeychain });
  expect(found.backend).toBe('file');
  expect(found.key.equals(key)).toBe(true);
  expect(await readFile(path.join(dataDir, 'master.key'), 'utf8')).toBe(key.toString('base64'));
});

it('creates the file fallback with a notice when no keychain answers', async () => {
  const dataDir = await tempDir();
  const made = await resolveMasterKey({ dataDir, existingBackend: null, preference: 'auto', keychain: noKeychain });
  expect(made.backend).toBe('file');
  expect(made.notice).toMatch(/master\.key/);
  const again = await resolveMasterKey({ dataDir, existingBackend: 'file', preference: 'auto', keychain: noKeychain });
  expect(again.key.equals(made.key)).toBe(true);
});

it.each([
  ['empty', ''],
  ['partial', randomBytes(32).toString('base64').slice(0, 20)],
])('replaces an %s master.key that no store uses (an interrupted first start), saying so', async (_name, content) => {
  const dataDir = await tempDir();
  const file = path.join(dataDir, 'master.key');
  await writeFile(file, content, { mode: 0o600 });
  const made = await resolveMasterKey({ dataDir, existingBackend: null, preference: 'auto', keychain: noKeychain });
  expect(made.key.length).toBe(32);
  expect(made.notice).toContain(`${file} was empty or incomplete`);
  expect(await readFile(file, 'utf8')).toBe(made.key.toString('base64'));
  expect(existsSync(`${file}.tmp`)).toBe(false);
  // the next start (the store now records `file`) finds that very key
  const again = await resolveMasterKey({ dataDir, existingBackend: 'file', preference: 'auto', keychain: noKeychain });
  expect(again.key.equals(made.key)).toBe(true);
});

it('never replaces the master.key of a store that uses it, even a broken one', async () => {
  const dataDir = await tempDir();
  const file = path.join(dataDir, 'master.key');
  await writeFile(file, '', { mode: 0o600 });
  await expect(resolveMasterKey({ dataDir, existingBackend: 'file', preference: 'auto', keychain: noKeychain })).rejects.toThrow(/not a 256-bit key/);
  expect(await readFile(file, 'utf8')).toBe('');
});

it('a new store where an older one was moved aside never replaces the keychain entry that older store needs', async () => {
  // a keychain that keeps what it is given, like the Secret Service
  const entries = new Map<string, string>();
  const keychain = { get: async (account: string) => entries.get(account) ?? null, set: async (account: string, secret: string) => void entries.set(account, secret) };
  const parent = await tempDir();
  const dataDir = path.join(parent, 'svc');
  const config = { keychain: 'auto' as const };
  const first = await startTestDaemon({ dataDir, keychain, config });
  expect(first.keyBackend).toBe('keychain');
  await first.close();
  // the data dir moved aside (a backup), and a new store started where it was
  await rename(dataDir, `${dataDir}.kept`);
  const second = await startTestDaemon({ dataDir, keychain, config });
  await second.close();
  // the kept store put back: its key must still be there
  await rm(dataDir, { recursive: true });
  await rename(`${dataDir}.kept`, dataDir);
  const again = await startTestDaemon({ dataDir, keychain, config });
  expect(again.keyBackend).toBe('keychain');
  await again.close();
});
