import { randomBytes } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { FileWriteError, fsyncDir, lineDigest, nodeFs, type StoreFs, writeAll } from './durable-file.js';
import { damagedLine, type JournalRef, lostEnd, missingChanges, outOfOrder, snapshotsMissing, snapshotsOfTwoStores, unlinkedLine } from './recovery.js';
import { bumpSeqFile, readSeqFile, writeSeqFileDurably } from './seq-file.js';
import { readSnapshot, readStoreMark, SEQ_FIELD, type StoreContents, writeSnapshot } from './snapshot.js';
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
  /** Once every write is done: a last snapshot, when this process wrote anything; none when `current` is null. */
  close(current: (() => StoreContents) | null): Promise<void>;
  /** Resolves once no background snapshot is being written. */
  snapshotsDone?(): Promise<void>;
}

/** link() refusals that mean "this file system has no hard links here", not a failing disk */
const NO_HARD_LINKS = new Set(['EPERM', 'EXDEV', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS', 'EMLINK']);

/** One line of a journal file, as read back. */
interface JournalLine {
  /** 1-based */
  n: number;
  /** where it starts and ends (after its newline), in bytes */
  offset: number;
  end: number;
  /** null: the line does not check out */
  entry: Entry | null;
  /** the digest the line ends in: what the next line names as the one it follows */
  digest: string;
}

/**
 * A journal entry: the change's number, its operations, the digest of the line of the change
 * before it (the snapshot's chain for the first change after a new store's first snapshot; null
 * when it is not known), and the store's own mark, which never changes. Lines an older svc wrote
 * have neither.
 */
type Entry = [seq: number, ops: Op[], follows?: string | null, store?: string];

/** A random value of this store's own: its mark, or its first snapshot's chain. */
const newMark = () => randomBytes(12).toString('base64url');

/** What makes a line another store's (recovery.ts says it). */
type NotThisStores = 'store' | 'other-file' | 'line' | 'after-snapshot' | 'snapshot';

/**
 * The store on disk: `db.json`, a snapshot in lowdb's JSON shape that names the last change it
 * holds (`journal_seq`) and carries a checksum, and `db.journal.<n>` files, each change group
 * appended as one checksummed line and fdatasynced before the write is acknowledged. A write
 * costs the size of its change. `db.seq` records the last acknowledged change (seq-file.ts).
 *
 * Once the journal outgrows half the snapshot (at least `compactBytes`), appends move to a new
 * journal file and the snapshot is rewritten in the background, a few hundred records at a
 * time, so no write waits for it and the event loop is never held long. The rewrite is a temp
 * file, fsync, the old snapshot kept as `db.json.bak` (a hard link, or a copy where the file
 * system has none), rename, fsync of the directory. Journal files are deleted only once
 * `db.json.bak` holds all they carry, so the last good copy plus the journal is always the whole
 * store.
 *
 * Every line names the store's mark (a random value made with the store, in db.json too) and the
 * digest of the line before it (the change before it), and each snapshot the digest of its last
 * change's line; a new store's first snapshot names a random value of its own. So a line of
 * another store (a journal file copied in from another data dir, or another store's db.json put
 * beside this journal) is refused at start, as damage is. Lines an older svc wrote name nothing
 * and are not checked so; each line still ends in the digest of its own JSON, as before, so an
 * older svc reads the new lines too.
 *
 * At start the snapshot is read and every later journal line replayed in order. Only a last
 * piece without its newline is a torn append (a crash in the middle of it; never acknowledged),
 * and ignored. A line that ends in its newline and does not check out is damage, and so is a gap
 * in the changes or a store that ends before the change db.seq records: the start is refused,
 * naming the file and the way out that loses least, with every file as it was. Loading writes
 * nothing; a process that writes nothing leaves every file as it found it.
 */
export class JournalFiles implements StoreBackend {
  readonly file: string;
  private readonly backupFile: string;
  private readonly tmpFile: string;
  private readonly fs: StoreFs;
  /** journal files by the first sequence number each may hold */
  private journals: JournalRef[] = [];
  /** the journal file being appended to; opened for each append, so nothing holds the disk open between writes */
  private handleFile = '';
  private length = 0;
  /** bytes of journal not yet in the snapshot */
  private journalBytes = 0;
  private snapshotSeq = 0;
  private snapshotBytes = 0;
  private snapshotExists = false;
  private refused = false;
  /** a refused change whose line could not be cut off, until a file named for it is started */
  private uncut: number | null = null;
  /** whether this process appended anything: only then does close() write a snapshot */
  private wrote = false;
  private compaction: Promise<void> | null = null;
  /** why the last background snapshot failed, until one succeeds */
  lastCompactionError: unknown = null;
  /** the digest of the last change's line (or the snapshot's chain): what the next line follows */
  private chain: string | undefined;
  /** this store's mark (the snapshot's, or the lines' of a store whose snapshot has none yet) */
  private store: string | undefined;

  constructor(
    private readonly dataDir: string,
    private readonly opts: { compactBytes?: number; onCompactionError?: (err: unknown) => void; fs?: StoreFs } = {},
  ) {
    this.file = path.join(dataDir, STORE_FILE);
    this.backupFile = `${this.file}.bak`;
    this.tmpFile = `${this.file}.tmp`;
    this.fs = opts.fs ?? nodeFs;
  }

  async load(): Promise<StoreContents> {
    try {
      // db.seq first: a reader beside a running daemon (tests, tools) then never sees it ahead of the journal.
      const recorded = await readSeqFile(this.dataDir, this.fs);
      this.journals = await this.listJournals();
      const contents = await this.loadSnapshot();
      await this.replay(contents, recorded);
      await this.checkBackupsStore(contents);
      if (recorded !== null && recorded > contents.seq) {
        throw lostEnd({ recorded, loaded: contents.seq, last: this.journals.at(-1), dataDir: this.dataDir });
      }
      return contents;
    } catch (err) {
      this.refused = true;
      throw err;
    }
  }

  private async listJournals(): Promise<JournalRef[]> {
    const names = await this.fs.readdir(this.dataDir).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [] as string[];
      throw err;
    });
    return names
      .filter((n) => n.startsWith(JOURNAL_PREFIX) && /^\d+$/.test(n.slice(JOURNAL_PREFIX.length)))
      .map((n) => ({ first: Number(n.slice(JOURNAL_PREFIX.length)), file: path.join(this.dataDir, n) }))
      .sort((a, b) => a.first - b.first);
  }

  private async loadSnapshot(): Promise<StoreContents> {
    const loaded = await readSnapshot(this.file, this.fs);
    if (!loaded) {
      // Journal files are acknowledged changes: never an empty store beside them.
      if (this.journals.length > 0) throw snapshotsMissing({ storeFile: this.file, journals: this.journals });
      return { seq: 0, collections: new Map(), docs: new Map() };
    }
    this.snapshotExists = true;
    this.snapshotBytes = (await this.fs.stat(this.file)).size;
    this.snapshotSeq = loaded.seq;
    return loaded;
  }

  private async replay(contents: StoreContents, recorded: number | null): Promise<void> {
    this.chain = contents.chain;
    this.store = contents.store;
    // the last line read, in any file: the change it holds and its digest
    let last: { seq: number; digest: string } | null = null;
    for (const [i, journal] of this.journals.entries()) {
      const next = this.journals[i + 1];
      if (journal.first > contents.seq + 1) {
        throw missingChanges({
          from: contents.seq + 1,
          to: journal.first - 1,
          next: journal,
          later: this.journals.slice(i + 1),
          snapshotSeq: this.snapshotSeq,
          lastKnown: await this.lastKnown(i, recorded),
          recorded,
          dataDir: this.dataDir,
          storeFile: this.file,
        });
      }
      const lines = splitLines(await this.fs.readFile(journal.file));
      let previous = journal.first - 1;
      for (const line of lines) {
        // A later file that starts at this change supersedes the rest of this one: it was started
        // (by a later start, or by the writer after an append it could not cut off) when these
        // lines were torn or unwritten, so none of them was ever acknowledged.
        if (next && previous + 1 >= next.first) break;
        if (!line.entry) {
          throw damagedLine({
            journal,
            line: line.n,
            offset: line.offset,
            seq: previous + 1,
            snapshotSeq: this.snapshotSeq,
            fileLast: Math.max(previous + 1, lastSeqOf(lines), next ? next.first - 1 : 0),
            later: this.journals.slice(i + 1),
            lastKnown: await this.lastKnown(i, recorded, lines),
            recorded,
            dataDir: this.dataDir,
          });
        }
        const [seq, ops, , store] = line.entry;
        // Within a file, changes follow on one by one from the one it is named for.
        if (seq !== previous + 1) throw outOfOrder({ journal, line: line.n, seq, expected: previous + 1 });
        previous = seq;
        let against = this.notThisStores(line, contents, last);
        // another store's mark: this file is the stranger when another journal line names the
        // snapshot's store, else which of the two is cannot be told
        if (against === 'store' && (await this.anyLineOf(contents.store!))) against = 'other-file';
        if (against) {
          throw unlinkedLine({
            journal,
            line: line.n,
            offset: line.offset,
            seq,
            snapshotSeq: this.snapshotSeq,
            fileLast: Math.max(seq, lastSeqOf(lines), next ? next.first - 1 : 0),
            later: this.journals.slice(i + 1),
            lastKnown: await this.lastKnown(i, recorded, lines),
            recorded,
            dataDir: this.dataDir,
            against,
            storeFile: this.file,
            hasBackup: await this.fs.access(this.backupFile).then(
              () => true,
              () => false,
            ),
          });
        }
        last = { seq, digest: line.digest };
        // a store whose snapshot has no mark yet (an older svc's) takes the one its lines carry
        if (contents.store === undefined && store !== undefined) this.store = store;
        if (seq <= this.snapshotSeq) continue;
        if (seq !== contents.seq + 1) throw outOfOrder({ journal, line: line.n, seq, expected: contents.seq + 1 });
        applyOps(contents, ops);
        contents.seq = seq;
        this.chain = line.digest;
        this.journalBytes += line.end - line.offset;
      }
    }
  }

  /**
   * Why a line that checks out is not this store's, or null when nothing says so: it names
   * another store than the snapshot; it follows another line of the change before it than this
   * store's (the snapshot's chain, for the first change after it, else the line read last, when it
   * held that change); or it is the change the snapshot ends at and not the line the snapshot
   * names (a snapshot holding as many changes as the journal is followed by no line that tells).
   */
  private notThisStores(line: JournalLine, contents: StoreContents, last: { seq: number; digest: string } | null): NotThisStores | null {
    const [seq, , follows, store] = line.entry!;
    if (store !== undefined && contents.store !== undefined && store !== contents.store) return 'store';
    const fromSnapshot = seq - 1 === this.snapshotSeq && contents.chain !== undefined;
    const before = fromSnapshot ? contents.chain : last?.seq === seq - 1 ? last.digest : undefined;
    if (typeof follows === 'string' && before !== undefined && follows !== before) return fromSnapshot ? 'after-snapshot' : 'line';
    if (seq === this.snapshotSeq && contents.chain !== undefined && line.digest !== contents.chain) return 'snapshot';
    return null;
  }

  /**
   * db.json.bak is an earlier db.json of this store, so it names the same store or none (an older
   * svc's). Another store's db.json beside a journal whose lines name no store (an older svc's) is
   * told by that alone; which of the two is the stranger is known only when a line names
   * db.json's store, and then nothing foreign is loaded.
   */
  private async checkBackupsStore(contents: StoreContents): Promise<void> {
    if (contents.store === undefined) return;
    const backups = await readStoreMark(this.backupFile, this.fs);
    if (backups === undefined || backups === contents.store || (await this.anyLineOf(contents.store))) return;
    throw snapshotsOfTwoStores({ storeFile: this.file, snapshotSeq: this.snapshotSeq });
  }

  /** Whether any journal line names `store` as its store. */
  private async anyLineOf(store: string): Promise<boolean> {
    for (const journal of this.journals) {
      const lines = splitLines(await this.fs.readFile(journal.file).catch(() => Buffer.alloc(0)));
      if (lines.some((l) => l.entry?.[3] === store)) return true;
    }
    return false;
  }

  /** The last change anything shows was made, from journal file `from` on (for what a way out loses). */
  private async lastKnown(from: number, recorded: number | null, linesOfFrom?: JournalLine[]): Promise<number> {
    let last = recorded ?? 0;
    for (const [i, journal] of this.journals.entries()) {
      if (i < from) continue;
      const lines = i === from && linesOfFrom ? linesOfFrom : splitLines(await this.fs.readFile(journal.file).catch(() => Buffer.alloc(0)));
      last = Math.max(last, lastSeqOf(lines));
    }
    return last;
  }

  async append(seq: number, ops: Op[], current: () => StoreContents): Promise<void> {
    if (this.refused) throw new Error(`refusing to write over the unreadable store ${this.file}`);
    if (!this.handleFile) {
      // The first write of a new store: a snapshot to start from, so the layout is always snapshot
      // + journal. Its chain is a value of this store's own, so that even a first change made
      // alike in two stores has lines of its own in each.
      if (!this.snapshotExists) {
        this.chain = newMark();
        this.store = newMark();
        await this.writeSnapshot(this.withMarks(current()));
      }
      await this.openJournal(seq);
    }
    // a store an older svc made gets its mark with this svc's first change: its lines carry it,
    // and the next snapshot
    this.store ??= newMark();
    const entry: Entry = [seq, ops, this.chain ?? null, this.store];
    const json = JSON.stringify(entry);
    const digest = lineDigest(json);
    const line = Buffer.from(`${json}\t${digest}\n`);
    this.wrote = true;
    const file = this.handleFile;
    let handle: FileHandle | undefined;
    try {
      handle = await this.fs.open(file, 'r+');
      await writeAll(handle, line, this.length);
      await handle.datasync();
    } catch (err) {
      if (handle) await this.cutFailedAppend(handle, seq);
      throw new FileWriteError(file, err);
    } finally {
      await handle?.close().catch(() => undefined);
    }
    this.length += line.length;
    this.journalBytes += line.length;
    this.chain = digest;
    await bumpSeqFile(this.dataDir, seq, this.fs);
  }

  /**
   * Nothing after the last good line may stay, or a failed (refused) write could come back at the
   * next start. Where it cannot be cut off (a read-only file system), a new file named for the
   * same change is started, which tells a later start that this line was never made: at once,
   * not at the next append, since the process may end before it appends again. Should that fail
   * too, the next append, or the stop, tries again.
   */
  private async cutFailedAppend(handle: FileHandle, seq: number): Promise<void> {
    const cut = await handle.truncate(this.length).then(
      () => true,
      () => false,
    );
    if (cut) return;
    this.handleFile = '';
    this.uncut = seq;
    await this.supersedeUncut().catch(() => undefined);
  }

  /** Starts the file that supersedes a refused line left in the journal, if one is still needed. */
  private async supersedeUncut(): Promise<void> {
    if (this.uncut === null) return;
    await this.openJournal(this.uncut);
  }

  private async openJournal(first: number): Promise<void> {
    const file = path.join(this.dataDir, `${JOURNAL_PREFIX}${first}`);
    try {
      await this.fs.mkdir(this.dataDir, { recursive: true, mode: 0o700 });
      // No entry in a file of this name can be kept: it could hold only changes from `first` on, none of them durable.
      const handle = await this.fs.open(file, 'w', 0o600);
      await handle.close();
      await fsyncDir(this.dataDir, this.fs);
    } catch (err) {
      throw new FileWriteError(file, err);
    }
    // Durably, with the new file: a start after this one can tell the file was made, even if it is removed.
    await writeSeqFileDurably(this.dataDir, first - 1, this.fs);
    this.handleFile = file;
    this.length = 0;
    if (first === this.uncut) this.uncut = null;
    this.journals = [...this.journals.filter((j) => j.first !== first), { first, file }].sort((a, b) => a.first - b.first);
  }

  async afterAppend(current: () => StoreContents): Promise<void> {
    if (this.compaction || this.journalBytes < this.threshold()) return;
    const contents = this.withMarks(current());
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

  async snapshotsDone(): Promise<void> {
    while (this.compaction) await this.compaction;
  }

  async close(current: (() => StoreContents) | null): Promise<void> {
    await this.snapshotsDone();
    // A process that wrote nothing (a refused start, a read-only tool) leaves every file as it was.
    if (!this.wrote || this.refused || !current) return;
    await this.supersedeUncut().catch((err) => this.noteCompactionError(err));
    const contents = this.withMarks(current());
    if (this.journalBytes > 0) {
      this.journalBytes = 0;
      await this.writeSnapshot(contents).catch((err) => this.noteCompactionError(err));
    }
    await writeSeqFileDurably(this.dataDir, contents.seq, this.fs).catch((err) => this.noteCompactionError(err));
  }

  /** Writes `contents` as the new db.json, keeping the old one as db.json.bak, then drops journals the backup no longer needs. */
  /**
   * The store's contents with its mark and the journal's chain at their last change. Taken when the contents
   * are: changes are appended and applied one group at a time and the contents taken between two,
   * and a snapshot written in the background must not pick up the chain of a later change.
   */
  private withMarks(contents: StoreContents): StoreContents {
    return { ...contents, chain: this.chain, store: this.store };
  }

  private async writeSnapshot(contents: StoreContents): Promise<void> {
    let bytes = 0;
    try {
      await this.fs.mkdir(this.dataDir, { recursive: true, mode: 0o700 });
      const handle = await this.fs.open(this.tmpFile, 'w', 0o600);
      try {
        bytes = await writeSnapshot(handle, contents, (h, buf) => writeAll(h, buf, null));
        await handle.sync();
      } finally {
        await handle.close();
      }
    } catch (err) {
      await this.fs.unlink(this.tmpFile).catch(() => undefined);
      throw new FileWriteError(this.file, err);
    }
    const backupSeq = this.snapshotExists ? this.snapshotSeq : null;
    try {
      if (this.snapshotExists) await this.keepBackup();
      await this.fs.rename(this.tmpFile, this.file);
      await fsyncDir(this.dataDir, this.fs);
    } catch (err) {
      throw new FileWriteError(this.file, err);
    }
    this.snapshotExists = true;
    this.snapshotSeq = contents.seq;
    this.snapshotBytes = bytes;
    this.lastCompactionError = null;
    if (backupSeq !== null) await this.dropJournalsUpTo(backupSeq);
  }

  /**
   * db.json becomes db.json.bak in one rename, so there is never a moment without a backup: a
   * hard link to it under a temporary name, or, where the file system has no hard links (some
   * network, FUSE and Windows-shared file systems), a copy made durable first.
   */
  private async keepBackup(): Promise<void> {
    const tmp = `${this.backupFile}.tmp`;
    await this.fs.unlink(tmp).catch(() => undefined);
    try {
      await this.fs.link(this.file, tmp);
    } catch (err) {
      if (!NO_HARD_LINKS.has((err as NodeJS.ErrnoException).code ?? '')) throw err;
      await this.fs.copyFile(this.file, tmp);
      const handle = await this.fs.open(tmp, 'r+');
      try {
        await handle.sync();
      } finally {
        await handle.close();
      }
    }
    await this.fs.rename(tmp, this.backupFile);
  }

  /** Deletes the journal files whose every change is in the backup (never the one being appended to). */
  private async dropJournalsUpTo(seq: number): Promise<void> {
    const keep: JournalRef[] = [];
    for (const [i, j] of this.journals.entries()) {
      const next = this.journals[i + 1];
      if (next && next.first - 1 <= seq && j.file !== this.handleFile) {
        await this.fs.unlink(j.file).catch(() => undefined);
      } else keep.push(j);
    }
    this.journals = keep;
  }
}

/** A journal file's complete lines (each ending in its newline); a last piece without one is a torn append, left out. */
function splitLines(buf: Buffer): JournalLine[] {
  const lines: JournalLine[] = [];
  let offset = 0;
  while (offset < buf.length) {
    const newline = buf.indexOf(10, offset);
    if (newline < 0) break;
    const text = buf.toString('utf8', offset, newline);
    lines.push({ n: lines.length + 1, offset, end: newline + 1, entry: parseLine(text), digest: text.slice(text.lastIndexOf('\t') + 1) });
    offset = newline + 1;
  }
  return lines;
}

function parseLine(line: string): Entry | null {
  const tab = line.lastIndexOf('\t');
  if (tab < 0) return null;
  const json = line.slice(0, tab);
  if (lineDigest(json) !== line.slice(tab + 1)) return null;
  try {
    const entry = JSON.parse(json) as Entry;
    const follows = entry[2];
    const store = entry[3];
    const shaped = Array.isArray(entry) && Number.isInteger(entry[0]) && Array.isArray(entry[1]);
    return shaped && (follows === undefined || follows === null || typeof follows === 'string') && (store === undefined || typeof store === 'string') ? entry : null;
  } catch {
    return null;
  }
}

const lastSeqOf = (lines: JournalLine[]) => lines.reduce((max, l) => (l.entry ? Math.max(max, l.entry[0]) : max), 0);

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

