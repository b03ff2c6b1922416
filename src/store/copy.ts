import { stat } from 'node:fs/promises';
import { CopyError, imageCounts, readImage, resealImage, type StoreImage, writeImage } from './copy-image.js';
import { SecretBox } from './crypto.js';
import { lockDataDir } from './lock.js';
import { checkStoreKey, type Keychain, resolveMasterKey } from './master-key.js';
import type { CopyTarget } from './postgres/copy-target.js';
import { storeRepositories } from './store-repositories.js';
import { Store } from './store.js';

export { CopyError, TargetNotEmptyError } from './copy-image.js';

/**
 * `svc store copy`: a stopped daemon's data dir into a team's empty PostgreSQL database. The data
 * dir is locked for the whole copy (so no daemon starts on it meanwhile, and a running one makes
 * the copy refuse), its store is opened with its own master key exactly as `svc serve` would, and
 * every sealed value is sealed again with the team's key. The data dir is only read. What moves
 * and what stays is in docs/team-server.md.
 */

export interface CopyOptions {
  dataDir: string;
  /** the team's master key (32 bytes) */
  teamKey: Buffer;
  /** where the data dir's key may live */
  keychain: Keychain;
  /** opens the database to copy into (postgres/copy-target.ts), refusing one that is not empty */
  openTarget: () => Promise<CopyTarget>;
  /** this machine's replica name, given to downloads whose files are in this data dir */
  replica?: string;
}

export interface CopySummary {
  /** the database, without its password */
  where: string;
  counts: ReturnType<typeof imageCounts>;
}

/** Copies; throws (having written nothing) when the data dir, its key or the database refuse. */
export async function copyDataDirToDatabase(opts: CopyOptions): Promise<CopySummary> {
  const isDir = await stat(opts.dataDir).then(
    (s) => s.isDirectory(),
    () => false,
  );
  if (!isDir) throw new CopyError(`There is no svc data dir at ${opts.dataDir}.`);
  // Nothing of the data dir is written: the lock holds no pid file, the store is only read.
  const lock = await lockDataDir(opts.dataDir, { recordPid: false });
  try {
    const image = await readResealed(opts);
    const target = await opts.openTarget();
    try {
      await writeImage(target.repos, image, target.where);
    } finally {
      await target.close();
    }
    return { where: target.where, counts: imageCounts(image) };
  } finally {
    await lock.release();
  }
}

/** The data dir's store, read whole and sealed again with the team's key. */
async function readResealed(opts: CopyOptions): Promise<StoreImage> {
  const store = await Store.open(opts.dataDir);
  try {
    const repos = storeRepositories(store);
    const meta = await repos.meta.get();
    if (!meta) throw new CopyError(`There is no svc store in ${opts.dataDir} yet: nothing to copy.`);
    const { key } = await resolveMasterKey({ dataDir: opts.dataDir, existingBackend: meta.key_backend, preference: 'auto', keychain: opts.keychain });
    const from = new SecretBox(key);
    checkStoreKey(from, meta.key_check);
    return resealImage(await readImage(repos, opts.dataDir), from, new SecretBox(opts.teamKey), { replica: opts.replica });
  } finally {
    await store.close();
  }
}
