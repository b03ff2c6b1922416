import { stat } from 'node:fs/promises';
import { SecretBox } from '../store/crypto.js';
import { lockDataDir } from '../store/lock.js';
import { checkStoreKey, type Keychain, osKeychain, resolveMasterKey } from '../store/master-key.js';
import type { UserRecord } from '../store/schema.js';
import { Store } from '../store/store.js';
import { storeRepositories } from '../store/store-repositories.js';
import { hashPassword } from './password.js';
import { setPasswordIn } from './users.js';

export class OfflineError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OfflineError';
  }
}

/**
 * Sets a password with no daemon running: the way back when nobody knows the admin's password
 * (a first start killed before it was shown, or a forgotten one). It needs what the daemon needs:
 * the data dir and its master key (the key must open the store's key check), and it takes the
 * data dir's lock, so it refuses while a daemon runs. Like the API, it ends that user's sessions.
 */
export async function setPasswordOffline(opts: { dataDir: string; username: string; password: string; keychain?: Keychain }): Promise<UserRecord> {
  const { dataDir, username } = opts;
  if (!(await stat(dataDir).then((s) => s.isDirectory(), () => false))) throw new OfflineError(`There is no svc data dir at ${dataDir}.`);
  const lock = await lockDataDir(dataDir);
  try {
    const store = await Store.open(dataDir);
    try {
      const repos = storeRepositories(store);
      const meta = await repos.meta.get();
      if (!meta) throw new OfflineError(`There is no svc store in ${dataDir} yet; \`svc serve\` creates it and its admin.`);
      const { key } = await resolveMasterKey({ dataDir, existingBackend: meta.key_backend, preference: 'auto', keychain: opts.keychain ?? osKeychain });
      checkStoreKey(new SecretBox(key), meta.key_check);
      const found = await repos.users.findByName(username);
      if (!found) throw new OfflineError(`No user named ${username} in ${dataDir}.`);
      const hash = await hashPassword(opts.password);
      const user = await repos.transaction((r) => setPasswordIn(r, found.id, hash));
      if (!user) throw new OfflineError(`No user named ${username} in ${dataDir}.`);
      return user;
    } finally {
      await store.close();
    }
  } finally {
    await lock.release();
  }
}
