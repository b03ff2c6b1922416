import { stat } from 'node:fs/promises';
import { CopyError, imageCounts, readImage, resealImage, type StoreImage, writeImage } from './copy-image.js';
import { LocalGrantUsage } from './grant-days.js';
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
    const spent = await readSpentDays(opts.dataDir);
    const target = await opts.openTarget();
    try {
      await writeImage(target.repos, image, target.where);
      await carrySpentDays(target, spent);
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

/**
 * The tokens each limited grant has spent on its day (`grant-days.json`, beside the store): a
 * grant with a tokens-a-day limit must not find its day's budget whole again on the team. A file
 * that cannot be read refuses the copy before anything is written.
 */
async function readSpentDays(dataDir: string): Promise<ReturnType<LocalGrantUsage['spentDays']>> {
  let damage: Error | null = null;
  const usage = await LocalGrantUsage.open(dataDir, (err) => {
    damage ??= err;
  });
  if (damage) throw new CopyError(`Cannot read the grants' token counts for today: ${(damage as Error).message}. Move grant-days.json out of the data dir to copy without them.`);
  return usage.spentDays();
}

async function carrySpentDays(target: CopyTarget, spent: ReturnType<LocalGrantUsage['spentDays']>): Promise<void> {
  const usage = target.repos.grantUsage;
  if (!usage) return;
  try {
    for (const d of spent) await usage.addTokens(d.grantId, d.day, d.tokens);
  } catch (err) {
    throw new CopyError(`The store was copied, but not the grants' token counts for today (${(err as Error).message}): grants with a tokens-a-day limit start today again from 0.`);
  }
}
