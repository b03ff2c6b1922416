import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import * as fsPromises from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';

/**
 * The file-system calls the store makes. The daemon passes node's own; tests pass one that fails
 * where they say (a directory fsync that answers EINVAL, a link() the file system refuses), so
 * no test has to patch a global to see how the store takes a fault.
 */
export interface StoreFs {
  open(file: string, flags: string | number, mode?: number): Promise<FileHandle>;
  readFile(file: string): Promise<Buffer>;
  readdir(dir: string): Promise<string[]>;
  rename(from: string, to: string): Promise<void>;
  unlink(file: string): Promise<void>;
  link(existing: string, newPath: string): Promise<void>;
  copyFile(from: string, to: string): Promise<void>;
  stat(file: string): Promise<{ size: number }>;
  mkdir(dir: string, opts: { recursive: true; mode: number }): Promise<unknown>;
  access(file: string): Promise<void>;
}

export const nodeFs: StoreFs = {
  open: (file, flags, mode) => fsPromises.open(file, flags, mode),
  readFile: (file) => fsPromises.readFile(file),
  readdir: (dir) => fsPromises.readdir(dir),
  rename: (from, to) => fsPromises.rename(from, to),
  unlink: (file) => fsPromises.unlink(file),
  link: (existing, newPath) => fsPromises.link(existing, newPath),
  copyFile: (from, to) => fsPromises.copyFile(from, to),
  stat: (file) => fsPromises.stat(file),
  mkdir: (dir, opts) => fsPromises.mkdir(dir, opts),
  access: (file) => fsPromises.access(file),
};

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
          (backup
            ? ` The last good copy is ${backup}; inspect both, and if the copy is right restore it (the journal beside it replays every later change), then start again.${RUN}cp ${shellQuote(backup)} ${shellQuote(file)}`
            : ''),
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
        `(its first write would replace that copy). Restore it (the journal beside it replays every later change), then start again.${RUN}cp ${shellQuote(backup)} ${shellQuote(file)}`,
    );
    this.name = 'MissingStoreError';
  }
}

/** Where a refusal's way out begins: the rest of the message is one shell command line. */
export const RUN = ' Run: ';

/** A path as one shell word, for the commands a refusal tells the user to run. */
export const shellQuote = (text: string) => `'${text.replaceAll("'", "'\\''")}'`;

/** The checksum of a journal line (and of db.seq's line): 16 characters of SHA-256. */
export const lineDigest = (text: string) => createHash('sha256').update(text).digest('base64url').slice(0, 16);

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

/** A write can be short (a disk filling up takes part of it): the rest is written until all is, or it throws. */
export async function writeAll(handle: FileHandle, buf: Buffer, position: number | null): Promise<void> {
  let done = 0;
  while (done < buf.length) {
    const { bytesWritten } = await handle.write(buf, done, buf.length - done, position === null ? null : position + done);
    if (bytesWritten === 0) throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    done += bytesWritten;
  }
}

const asWriteError = (file: string, err: unknown) => (err instanceof FileWriteError ? err : new FileWriteError(file, err));

/**
 * Writes a small private file so that it is either wholly there or not at all: a temporary file,
 * fsync, rename over the target, fsync of the directory. Errors name the file.
 */
export async function writeFileDurably(file: string, text: string | Buffer, mode = 0o600, fs: StoreFs = nodeFs): Promise<void> {
  const tmp = `${file}.tmp`;
  try {
    const handle = await fs.open(tmp, 'w', mode);
    try {
      await handle.writeFile(text);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await fs.rename(tmp, file);
    await fsyncDir(path.dirname(file), fs);
  } catch (err) {
    await fs.unlink(tmp).catch(() => undefined);
    throw asWriteError(file, err);
  }
}

/**
 * Some file systems cannot fsync a directory and say so with EPERM or EINVAL (some network and
 * FUSE file systems, and ones that order metadata by themselves). SQLite shrugs these off too:
 * taking them as failures would make every write fail there, while on such a file system the
 * rename is as durable as it will ever be. Any other error is a real failure.
 */
const DIR_FSYNC_UNSUPPORTED = new Set(['EPERM', 'EINVAL']);

/** fsync a directory so a rename or a new file inside it survives a power cut. */
export async function fsyncDir(dir: string, fs: StoreFs = nodeFs): Promise<void> {
  let handle: FileHandle;
  try {
    handle = await fs.open(dir, constants.O_RDONLY);
  } catch (err) {
    if (DIR_FSYNC_UNSUPPORTED.has((err as NodeJS.ErrnoException).code ?? '')) return;
    throw err;
  }
  try {
    await handle.sync();
  } catch (err) {
    if (!DIR_FSYNC_UNSUPPORTED.has((err as NodeJS.ErrnoException).code ?? '')) throw err;
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
  validate: (value: unknown, text: string) => { ok: true; data: T } | { ok: false; reason: string },
  fs: StoreFs = nodeFs,
): Promise<T | null> {
  const backupFile = `${file}.bak`;
  let text: string;
  try {
    text = (await fs.readFile(file)).toString('utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    if (await exists(backupFile, fs)) throw new MissingStoreError(file, backupFile);
    return null;
  }
  const backup = (await exists(backupFile, fs)) ? backupFile : undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new CorruptStoreError(file, `not valid JSON: ${(err as Error).message}`, backup);
  }
  const checked = validate(parsed, text);
  if (!checked.ok) throw new CorruptStoreError(file, checked.reason, backup);
  return checked.data;
}

/** `<file>.bak` when it is there. */
export async function snapshotBackup(file: string, fs: StoreFs = nodeFs): Promise<string | undefined> {
  return (await exists(`${file}.bak`, fs)) ? `${file}.bak` : undefined;
}

export async function exists(file: string, fs: StoreFs = nodeFs): Promise<boolean> {
  return fs.access(file).then(
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
  constructor(cause: unknown, message = 'The change could not be saved; nothing was changed.') {
    super(message, { cause });
    this.name = 'StoreUnavailableError';
  }
}

export const storeWriteFailed = (cause: unknown) => new StoreUnavailableError(cause);

/**
 * A change that reached the disk but could not be applied in memory. It is not "nothing
 * changed" (a restart replays it), so it is not a StoreUnavailableError: the store takes no more
 * writes, and the daemon stops so that the next start loads the change from the journal.
 */
export class StoreFailedError extends Error {
  readonly code = 'store_failed';
  constructor(cause: unknown) {
    super('The change was saved, but svc could not apply it and is stopping; the next start loads it.', { cause });
    this.name = 'StoreFailedError';
  }
}
