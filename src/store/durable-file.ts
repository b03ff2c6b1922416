import { constants } from 'node:fs';
import { access, link, mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import type { Adapter } from 'lowdb';
import { AppError } from '../errors.js';

export class CorruptStoreError extends Error {
  constructor(
    readonly file: string,
    readonly reason: string,
    readonly backup?: string,
  ) {
    super(
      `The store ${file} cannot be read (${reason}). svc will not start and has not touched it.` +
        (backup ? ` The last good copy is ${backup}; inspect both and restore it by hand if it is right.` : ''),
    );
    this.name = 'CorruptStoreError';
  }
}

/** fsync a directory so a rename inside it survives a power cut. */
async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * A lowdb adapter whose write is durable before it resolves: temp file, fsync, rename, fsync of
 * the directory. The previous version is kept as `<file>.bak` (a hard link, no copy) so a bad
 * file always has its last good copy beside it. It never overwrites a file it could not parse.
 */
export class DurableJsonFile<T> implements Adapter<T> {
  readonly backupFile: string;
  private readonly tmpFile: string;
  private refusedToRead = false;

  constructor(
    readonly file: string,
    private readonly validate: (value: unknown) => { ok: true; data: T } | { ok: false; reason: string },
  ) {
    this.backupFile = `${file}.bak`;
    this.tmpFile = `${file}.tmp`;
  }

  async read(): Promise<T | null> {
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
    const backup = await exists(this.backupFile) ? this.backupFile : undefined;
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (err) {
      this.refusedToRead = true;
      throw new CorruptStoreError(this.file, `not valid JSON: ${(err as Error).message}`, backup);
    }
    const checked = this.validate(parsed);
    if (!checked.ok) {
      this.refusedToRead = true;
      throw new CorruptStoreError(this.file, `unexpected content: ${checked.reason}`, backup);
    }
    return checked.data;
  }

  async write(data: T): Promise<void> {
    if (this.refusedToRead) throw new Error(`refusing to overwrite unreadable store ${this.file}`);
    const dir = path.dirname(this.file);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const text = JSON.stringify(data);
    const handle = await open(this.tmpFile, 'w', 0o600);
    try {
      await handle.writeFile(text, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    await this.keepPreviousAsBackup();
    await rename(this.tmpFile, this.file);
    await fsyncDir(dir);
  }

  private async keepPreviousAsBackup(): Promise<void> {
    try {
      await unlink(this.backupFile);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    try {
      await link(this.file, this.backupFile);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
}

async function exists(file: string): Promise<boolean> {
  return access(file).then(
    () => true,
    () => false,
  );
}

export const storeWriteFailed = (cause: unknown) =>
  new AppError(503, 'server_error', 'store_unavailable', 'The change could not be saved; nothing was changed.', {
    expose: true,
    cause,
  });
