import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import { resolveMasterKey } from '../src/store/master-key.js';
import { noKeychain, tempDir } from './helpers/daemon.js';

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
