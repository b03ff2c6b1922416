import { constants } from 'node:fs';
import { access, open, readFile, rename, unlink } from 'node:fs/promises';
import path from 'node:path';

export class CorruptStoreError extends Error {
  constructor(
    readonly file: string,
    readonly reason: string,
    readonly backup?: string,
    message?: string,
  ) {
    super(
      message ??
        `The store ${file} cannot be read (${reason}). svc will not start and has not touched it.` +
          (backup ? ` The last good copy is ${backup}; inspect both, and if the copy is right restore it with: cp '${backup}' '${file}'` : ''),
    );
    this.name = 'CorruptStoreError';
  }
}

/** db.json is gone but its backup is not: starting empty would replace the backup at the first write. */
export class MissingStoreError extends CorruptStoreError {
  constructor(file: string, backup: string) {
    super(
      file,
      'missing',
      backup,
      `The store ${file} is missing, but its last good copy ${backup} is there. svc will not start an empty store ` +
        `(its first write would replace that copy). Restore it with: cp '${backup}' '${file}' ` +
        `(or, to really start from nothing, move ${backup} away).`,
    );
    this.name = 'MissingStoreError';
  }
}

/** A write that failed, naming the file (fs errors on an open handle name none: "ENOSPC ..., write"). */
export class FileWriteError extends Error {
  readonly code: string | undefined;
  constructor(
    readonly file: string,
    cause: unknown,
  ) {
    const e = cause as NodeJS.ErrnoException;
    const why: Record<string, string> = {
      ENOSPC: 'the disk is full (ENOSPC)',
      EDQUOT: 'the disk quota is used up (EDQUOT)',
      EROFS: 'the file system is read-only (EROFS)',
      EACCES: 'permission denied (EACCES)',
      EPERM: 'operation not permitted (EPERM)',
      EIO: 'an I/O error (EIO)',
    };
    super(`Cannot write ${file}: ${(e?.code && why[e.code]) || e?.message || String(cause)}`, { cause });
    this.name = 'FileWriteError';
    this.code = e?.code;
  }
}

const asWriteError = (file: string, err: unknown) => (err instanceof FileWriteError ? err : new FileWriteError(file, err));

/**
 * Writes a small private file so that it is either wholly there or not at all: a temporary file,
 * fsync, rename over the target, fsync of the directory. Errors name the file.
 */
export async function writeFileDurably(file: string, text: string | Buffer, mode = 0o600): Promise<void> {
  const tmp = `${file}.tmp`;
  try {
    const handle = await open(tmp, 'w', mode);
    try {
      await handle.writeFile(text);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, file);
    await fsyncDir(path.dirname(file));
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw asWriteError(file, err);
  }
}

/** fsync a directory so a rename or a new file inside it survives a power cut. */
export async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Reads a JSON file that must be whole and of the expected shape. It refuses (CorruptStoreError,
 * file untouched) a file that does not parse or check out, and a missing file whose backup
 * (`<file>.bak`) is there, so that a store is never started empty over its last good copy.
 */
export async function readJsonFileOrRefuse<T>(
  file: string,
  validate: (value: unknown) => { ok: true; data: T } | { ok: false; reason: string },
): Promise<T | null> {
  const backupFile = `${file}.bak`;
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    if (await exists(backupFile)) throw new MissingStoreError(file, backupFile);
    return null;
  }
  const backup = (await exists(backupFile)) ? backupFile : undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new CorruptStoreError(file, `not valid JSON: ${(err as Error).message}`, backup);
  }
  const checked = validate(parsed);
  if (!checked.ok) throw new CorruptStoreError(file, `unexpected content: ${checked.reason}`, backup);
  return checked.data;
}

/** `<file>.bak` when it is there. */
export async function snapshotBackup(file: string): Promise<string | undefined> {
  return (await exists(`${file}.bak`)) ? `${file}.bak` : undefined;
}

async function exists(file: string): Promise<boolean> {
  return access(file).then(
    () => true,
    () => false,
  );
}

/**
 * A change that could not be made durable, so was not made: the store's own error. The HTTP
 * layer answers it as 503 store_unavailable; `cause` (a FileWriteError) names the file.
 */
export class StoreUnavailableError extends Error {
  readonly code = 'store_unavailable';
  constructor(cause: unknown) {
    super('The change could not be saved; nothing was changed.', { cause });
    this.name = 'StoreUnavailableError';
  }
}

export const storeWriteFailed = (cause: unknown) => new StoreUnavailableError(cause);
