import { createHash } from 'node:crypto';
import { type FileHandle, link, mkdir, open, readdir, readFile, rename, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import { CorruptStoreError, FileWriteError, fsyncDir } from './durable-file.js';
import { readSnapshot, SEQ_FIELD, type StoreContents, writeSnapshot } from './snapshot.js';
import { COLLECTION_KEYS, type Op } from './tables.js';

export const STORE_FILE = 'db.json';
/** db.journal.<n>: changes from sequence number n on */
const JOURNAL_PREFIX = 'db.journal.';
export type { StoreContents } from './snapshot.js';

/** Where a store's changes go: files (JournalFiles), or memory in tests. */
export interface StoreBackend {
  /** the file that errors name */
  readonly file: string;
  load(): Promise<StoreContents>;
  /**
   * Makes one group of changes durable before it resolves. `current` gives the contents before
   * this group (for a first snapshot).
   */
  append(seq: number, ops: Op[], current: () => StoreContents): Promise<void>;
  /** After a group is applied: may start a snapshot in the background. */
  afterAppend(current: () => StoreContents): Promise<void>;
  /** Once every write is done: a last snapshot when the journal holds anything. */
  close(current: () => StoreContents): Promise<void>;
}

const digest = (text: string) => createHash('sha256').update(text).digest('base64url').slice(0, 16);

/**
 * The store on disk: `db.json`, a snapshot in lowdb's JSON shape that names the last change it
 * holds (`journal_seq`), and `db.journal.<n>` files, each change group appended as one checksummed
 * line and fsynced before the write is acknowledged. A write costs the size of its change.
 *
 * Once the journal outgrows half the snapshot (at least `compactBytes`), appends move to a new
 * journal file and the snapshot is rewritten in the background, a few hundred records at a
 * time, so no write waits for it and the event loop is never held long. The rewrite is a temp
 * file, fsync, the old snapshot kept as `db.json.bak` (a hard link), rename, fsync of the
 * directory. Journal files are deleted only once `db.json.bak` holds all they carry, so the last
 * good copy plus the journal is always the whole store.
 *
 * At start the snapshot is read and every later journal line replayed in order. A torn last line
 * (a crash mid-append, never acknowledged) is ignored; anything else that does not check out,
 * or a gap in the sequence, refuses the store with its file untouched.
 */
export class JournalFiles implements StoreBackend {
  readonly file: string;
  private readonly backupFile: string;
  private readonly tmpFile: string;
  /** journal files by the first sequence number each may hold */
  private journals: { first: number; file: string }[] = [];
  /** the journal file being appended to; opened for each append, so nothing holds the disk open between writes */
  private handleFile = '';
  private length = 0;
  /** bytes of journal not yet in the snapshot */
  private journalBytes = 0;
  private snapshotSeq = 0;
  private snapshotBytes = 0;
  private snapshotExists = false;
  private refused = false;
  private compaction: Promise<void> | null = null;
  /** why the last background snapshot failed, until one succeeds */
  lastCompactionError: unknown = null;

  constructor(
    private readonly dataDir: string,
    private readonly opts: { compactBytes?: number; onCompactionError?: (err: unknown) => void } = {},
  ) {
    this.file = path.join(dataDir, STORE_FILE);
    this.backupFile = `${this.file}.bak`;
    this.tmpFile = `${this.file}.tmp`;
  }

  async load(): Promise<StoreContents> {
    let loaded: StoreContents | null;
    try {
      loaded = await readSnapshot(this.file);
    } catch (err) {
      this.refused = true;
      throw err;
    }
    const contents: StoreContents = loaded ?? { seq: 0, collections: new Map(), docs: new Map() };
    if (loaded) {
      this.snapshotExists = true;
      this.snapshotBytes = (await stat(this.file)).size;
    }
    this.snapshotSeq = contents.seq;
    await this.replay(contents);
    return contents;
  }

  private async replay(contents: StoreContents): Promise<void> {
    const names = await readdir(this.dataDir).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [] as string[];
      throw err;
    });
    this.journals = names
      .filter((n) => n.startsWith(JOURNAL_PREFIX) && /^\d+$/.test(n.slice(JOURNAL_PREFIX.length)))
      .map((n) => ({ first: Number(n.slice(JOURNAL_PREFIX.length)), file: path.join(this.dataDir, n) }))
      .sort((a, b) => a.first - b.first);
    const refuse = (file: string, reason: string) => {
      this.refused = true;
      return new CorruptStoreError(
        file,
        reason,
        undefined,
        `The store's journal ${file} cannot be read (${reason}). svc will not start and has not touched it. ` +
          `Starting without it loses the changes it holds: to do so anyway, move it and every later ${JOURNAL_PREFIX}* file out of ${this.dataDir}.`,
      );
    };
    // Journal files go only once the backup holds them, so the first one left starts at or before the snapshot's next change.
    const firstFile = this.journals[0];
    if (firstFile && firstFile.first > contents.seq + 1) {
      throw refuse(firstFile.file, `the journal lacks changes ${contents.seq + 1} to ${firstFile.first - 1}`);
    }
    for (const journal of this.journals) {
      const text = await readFile(journal.file, 'utf8');
      const lines = text.split('\n');
      // the piece after the last newline: empty, or a torn append that was never acknowledged
      // (A torn line ends its file: appends after a crash go to a new file, whose first change must follow on.)
      const torn = lines.pop();
      for (const [n, line] of lines.entries()) {
        const tab = line.lastIndexOf('\t');
        const json = tab < 0 ? '' : line.slice(0, tab);
        let entry: [number, Op[]] | null = null;
        if (tab >= 0 && digest(json) === line.slice(tab + 1)) {
          try {
            entry = JSON.parse(json) as [number, Op[]];
          } catch {
            entry = null;
          }
        }
        if (!entry || !Number.isInteger(entry[0]) || !Array.isArray(entry[1])) {
          // A last line written in part (its newline reached the disk, not all its bytes) is a torn append too.
          if (n === lines.length - 1 && !torn) break;
          throw refuse(journal.file, `journal line ${n + 1} does not check out`);
        }
        const [seq, ops] = entry;
        if (seq <= this.snapshotSeq) continue;
        if (seq !== contents.seq + 1) {
          throw refuse(
            journal.file,
            seq > contents.seq + 1 ? `the journal lacks changes ${contents.seq + 1} to ${seq - 1}` : `change ${seq} appears twice`,
          );
        }
        applyOps(contents, ops);
        contents.seq = seq;
        this.journalBytes += Buffer.byteLength(line) + 1;
      }
    }
  }

  async append(seq: number, ops: Op[], current: () => StoreContents): Promise<void> {
    if (this.refused) throw new Error(`refusing to write over the unreadable store ${this.file}`);
    if (!this.handleFile) {
      // The first write of a new store: a snapshot to start from, so the layout is always snapshot + journal.
      if (!this.snapshotExists) await this.writeSnapshot(current());
      await this.openJournal(seq);
    }
    const json = JSON.stringify([seq, ops]);
    const line = Buffer.from(`${json}\t${digest(json)}\n`);
    let handle: FileHandle | undefined;
    try {
      handle = await open(this.handleFile, 'r+');
      await writeAll(handle, line, this.length);
      await handle.datasync();
    } catch (err) {
      // Nothing after the last good line may stay, or a failed (refused) write could come back at the next start.
      await handle?.truncate(this.length).catch(() => undefined);
      throw new FileWriteError(this.handleFile, err);
    } finally {
      await handle?.close().catch(() => undefined);
    }
    this.length += line.length;
    this.journalBytes += line.length;
  }

  private async openJournal(first: number): Promise<void> {
    const file = path.join(this.dataDir, `${JOURNAL_PREFIX}${first}`);
    try {
      await mkdir(this.dataDir, { recursive: true, mode: 0o700 });
      // No entry in a file of this name can be kept: it could hold only changes from `first` on, none of them durable.
      const handle = await open(file, 'w', 0o600);
      await handle.close();
      await fsyncDir(this.dataDir);
    } catch (err) {
      throw new FileWriteError(file, err);
    }
    this.handleFile = file;
    this.length = 0;
    this.journals = [...this.journals.filter((j) => j.first !== first), { first, file }].sort((a, b) => a.first - b.first);
  }

  async afterAppend(current: () => StoreContents): Promise<void> {
    if (this.compaction || this.journalBytes < this.threshold()) return;
    const contents = current();
    // Later changes go to a new file, so the snapshot of `contents` can be written while they keep coming.
    try {
      await this.openJournal(contents.seq + 1);
    } catch (err) {
      this.noteCompactionError(err);
      return;
    }
    this.journalBytes = 0;
    this.compaction = this.writeSnapshot(contents)
      .catch((err) => this.noteCompactionError(err))
      .finally(() => (this.compaction = null));
  }

  private threshold(): number {
    // Half the snapshot: rewriting it costs at most about twice the journal written, whatever the store's size.
    return this.opts.compactBytes ?? Math.max(1024 * 1024, Math.floor(this.snapshotBytes / 2));
  }

  private noteCompactionError(err: unknown): void {
    this.lastCompactionError = err;
    this.opts.onCompactionError?.(err);
  }

  async close(current: () => StoreContents): Promise<void> {
    while (this.compaction) await this.compaction;
    if (this.journalBytes > 0 && !this.refused) {
      this.journalBytes = 0;
      await this.writeSnapshot(current()).catch((err) => this.noteCompactionError(err));
    }
  }

  /** Writes `contents` as the new db.json, keeping the old one as db.json.bak, then drops journals the backup no longer needs. */
  private async writeSnapshot(contents: StoreContents): Promise<void> {
    let bytes = 0;
    try {
      await mkdir(this.dataDir, { recursive: true, mode: 0o700 });
      const handle = await open(this.tmpFile, 'w', 0o600);
      try {
        bytes = await writeSnapshot(handle, contents, (h, buf) => writeAll(h, buf, null));
        await handle.sync();
      } finally {
        await handle.close();
      }
    } catch (err) {
      await unlink(this.tmpFile).catch(() => undefined);
      throw new FileWriteError(this.file, err);
    }
    const backupSeq = this.snapshotExists ? this.snapshotSeq : null;
    try {
      if (this.snapshotExists) {
        await unlink(this.backupFile).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'ENOENT') throw err;
        });
        await link(this.file, this.backupFile);
      }
      await rename(this.tmpFile, this.file);
      await fsyncDir(this.dataDir);
    } catch (err) {
      throw new FileWriteError(this.file, err);
    }
    this.snapshotExists = true;
    this.snapshotSeq = contents.seq;
    this.snapshotBytes = bytes;
    this.lastCompactionError = null;
    if (backupSeq !== null) await this.dropJournalsUpTo(backupSeq);
  }

  /** Deletes the journal files whose every change is in the backup (never the one being appended to). */
  private async dropJournalsUpTo(seq: number): Promise<void> {
    const keep: typeof this.journals = [];
    for (const [i, j] of this.journals.entries()) {
      const next = this.journals[i + 1];
      if (next && next.first - 1 <= seq && j.file !== this.handleFile) {
        await unlink(j.file).catch(() => undefined);
      } else keep.push(j);
    }
    this.journals = keep;
  }
}

function applyOps(contents: StoreContents, ops: Op[]): void {
  for (const op of ops) {
    if (op[0] === 's') {
      contents.docs.set(op[1], op[2]);
      continue;
    }
    let records = contents.collections.get(op[1]);
    if (!records) contents.collections.set(op[1], (records = new Map()));
    if (op[0] === 'p') records.set(op[2], op[3]);
    else records.delete(op[2]);
  }
}

/** A write can be short (a disk filling up takes part of it): the rest is written until all is, or it throws. */
async function writeAll(handle: FileHandle, buf: Buffer, position: number | null): Promise<void> {
  let done = 0;
  while (done < buf.length) {
    const { bytesWritten } = await handle.write(buf, done, buf.length - done, position === null ? null : position + done);
    if (bytesWritten === 0) throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    done += bytesWritten;
  }
}

/** For tests and tools: the whole store as one object, from db.json plus the journal (read only). */
export async function readStoreFiles(dataDir: string): Promise<Record<string, unknown>> {
  const contents = await new JournalFiles(dataDir).load();
  const out: Record<string, unknown> = {};
  for (const [name, value] of contents.docs) out[name] = value;
  for (const [name, records] of contents.collections) {
    out[name] = COLLECTION_KEYS[name] === null ? Object.fromEntries(records) : [...records.values()];
  }
  out[SEQ_FIELD] = contents.seq;
  return out;
}

