import { AsyncLocalStorage } from 'node:async_hooks';
import { isDeepStrictEqual } from 'node:util';
import { StoreFailedError, type StoreFs, storeWriteFailed } from './durable-file.js';
import { JournalFiles, type StoreBackend, type StoreContents } from './journal.js';
import { type CollectionName, type CollectionRecords, COLLECTION_KEYS, deepFreeze, type DocName, type DocValues, type Op, type StoreReader, type Tx } from './tables.js';

export { STORE_FILE } from './journal.js';
export type { StoreReader, Tx } from './tables.js';

const DELETED = Symbol('deleted');
/** Records are frozen when they are stored, in tests, so that a change in place fails loudly. */
const freezeRecords = process.env.NODE_ENV === 'test';
/**
 * Set while a transaction's `fn` runs, in tests, so that a transaction started inside another
 * (which would wait for itself) fails at once. Not in the daemon: an AsyncLocalStorage makes
 * every promise of the process pay for it; there a transaction that waits longer than
 * LOCK_WAIT_MS for its turn fails instead, which ends such a wait all the same.
 */
const inTransaction = freezeRecords ? new AsyncLocalStorage<boolean>() : null;
const LOCK_WAIT_MS = 10_000;
const nestedTransaction = () => new Error('a transaction was started inside another one: use the repositories the transaction gives');
type Slot = unknown | typeof DELETED;
/** where docs live in the overlay and in a transaction's changes, beside the collections */
const DOCS = '#docs';

interface Waiter {
  resolve: () => void;
  reject: (err: unknown) => void;
}

export interface StoreOptions {
  /** a background snapshot failed (the journal still holds every change) */
  onCompactionError?: (err: unknown) => void;
  /** writes began to fail, or fail for another reason than before: `err` (a FileWriteError) names the file */
  onWriteError?: (err: unknown) => void;
  /** writes succeed again after failing */
  onWriteRecovered?: () => void;
  /**
   * A change reached the disk but could not be applied in memory: the store takes no more
   * writes, and the owner must stop (the next start replays the change from the journal).
   */
  onFatal?: (err: StoreFailedError) => void;
  /** the file system (tests pass one that fails on cue) */
  fs?: StoreFs;
}

/**
 * The daemon's single writer, and what every reader sees.
 *
 * Two versions of the data: the committed records, what is durable and the only thing readers
 * (polls, Bearer checks, lists) ever see, and the overlay, the changes waiting for their write. A
 * transaction runs synchronously against committed plus overlay plus its own changes (so checks
 * and changes are atomic within one event-loop turn: two concurrent decisions can never both see
 * `draft`), then waits for its group to be written; transactions that arrive while a write runs
 * are grouped into the next one. A write costs what changed, not what is stored: the backend
 * appends the group's changes to a journal (see journal.ts). Only once that is durable do the
 * changes move from the overlay into the committed records. If a write fails, the overlay is
 * dropped and every transaction in that group (and queued behind it) is rejected.
 *
 * Records are values: a change puts a new record (or `edit`s a copy); none is changed in place,
 * so a reader holding one, or a snapshot being written, never sees it move.
 */
export class Store implements StoreReader {
  private readonly data = new Map<CollectionName, Map<string, unknown>>();
  private readonly docs = new Map<string, unknown>();
  /** changes not yet durable, by collection (or DOCS) and key, with the group that writes them */
  private readonly overlay = new Map<string, Map<string, { value: Slot; group: number }>>();
  private seq: number;
  private forming: { ops: Op[]; waiters: Waiter[] } = { ops: [], waiters: [] };
  private groupNo = 1;
  private flushing: Promise<void> | null = null;
  private closed = false;
  /** a transaction's `fn` is running; the next ones wait in `queue` */
  private running = false;
  /** how many writes have failed: a transaction that saw one fail while it ran is refused */
  private failures = 0;
  private readonly queue: (() => void)[] = [];
  private readonly watchers = new Map<CollectionName, ((key: string, record: unknown) => void)[]>();
  /** why the last write failed (a FileWriteError names the file), until one succeeds */
  lastWriteError: unknown = null;
  /** set once a durable change could not be applied: no write is taken after that */
  private broken: StoreFailedError | null = null;

  private constructor(
    private readonly backend: StoreBackend,
    contents: StoreContents,
    private readonly opts: StoreOptions = {},
  ) {
    for (const [name, records] of contents.collections) this.data.set(name, records);
    for (const name of Object.keys(COLLECTION_KEYS) as CollectionName[]) if (!this.data.has(name)) this.data.set(name, new Map());
    for (const [name, value] of contents.docs) this.docs.set(name, value);
    this.seq = contents.seq;
  }

  /** The file that errors name. */
  get file(): string {
    return this.backend.file;
  }

  /**
   * Opens the store in `dataDir`; throws CorruptStoreError (files untouched) when it cannot be
   * read, or when db.json is missing but its backup is not. `backend` replaces the files (tests
   * inject held or failing disks, or keep everything in memory).
   */
  static async open(dataDir: string, backend?: StoreBackend, opts: StoreOptions = {}): Promise<Store> {
    // SVC_STORE_COMPACT_BYTES: tests make snapshots frequent, to crash in the middle of one.
    const compactBytes = Number(process.env.SVC_STORE_COMPACT_BYTES) || undefined;
    const b = backend ?? new JournalFiles(dataDir, { compactBytes, onCompactionError: opts.onCompactionError, fs: opts.fs });
    return new Store(b, await b.load(), opts);
  }

  /** A store that keeps everything in memory: the service unit tests run on it. */
  static memory(initial?: Partial<Record<CollectionName, unknown[]>> & { meta?: DocValues['meta'] }): Store {
    return new Store(memoryBackend(), contentsOf(initial ?? {}));
  }

  // ---- reading: committed data only ----

  get<N extends CollectionName, T = CollectionRecords[N]>(collection: N, key: string): T | undefined {
    return this.data.get(collection)!.get(key) as T | undefined;
  }

  all<N extends CollectionName, T = CollectionRecords[N]>(collection: N): T[] {
    return [...this.data.get(collection)!.values()] as T[];
  }

  count(collection: CollectionName): number {
    return this.data.get(collection)!.size;
  }

  doc<D extends DocName>(name: D): DocValues[D] {
    return (this.docs.get(name) ?? (name === 'meta' ? null : undefined)) as DocValues[D];
  }


  /**
   * Calls `fn` with each durable change to `collection` (the new record, or undefined when it was
   * deleted), so that an index can follow the change instead of being rebuilt.
   */
  watch<N extends CollectionName, T = CollectionRecords[N]>(collection: N, fn: (key: string, record: T | undefined) => void): void {
    const list = this.watchers.get(collection) ?? [];
    list.push(fn as (key: string, record: unknown) => void);
    this.watchers.set(collection, list);
  }

  // ---- writing ----

  /**
   * Runs `fn` in a transaction against the latest data and resolves with its result once the
   * change is durable; only then do readers see it. If `fn` throws, nothing changes.
   * Transactions run one at a time (a later one waits for an earlier one's `fn` to finish, not
   * for its write), so `fn` may await the repositories it is given; it must await nothing else,
   * and never start a transaction of its own (that would wait for itself: it throws instead).
   */
  async update<R>(fn: (tx: Tx) => R | Promise<R>): Promise<R> {
    if (this.closed) throw storeWriteFailed(new Error('store is closed'));
    if (this.broken) throw storeWriteFailed(this.broken);
    if (inTransaction?.getStore()) throw nestedTransaction();
    if (this.running) await this.waitTurn();
    else this.running = true;
    let result: R;
    try {
      const tx = new Transaction(this);
      const epoch = this.failures;
      const out = inTransaction ? inTransaction.run(true, () => fn(tx)) : fn(tx);
      result = out instanceof Promise ? await out : out;
      // A failed write dropped changes this transaction may have read: it must not build on them.
      if (this.failures !== epoch) throw storeWriteFailed(this.lastWriteError);
      const ops = tx.finish();
      if (ops.length === 0) return result;
      const group = this.groupNo;
      for (const op of ops) {
        if (freezeRecords && op[0] !== 'd') deepFreeze(op[3]);
        const [space, key, value] = op[0] === 's' ? [DOCS, op[1], op[2]] : [op[1], op[2], op[0] === 'd' ? DELETED : op[3]];
        let slots = this.overlay.get(space);
        if (!slots) this.overlay.set(space, (slots = new Map()));
        slots.set(key, { value, group });
      }
      this.forming.ops.push(...ops);
    } finally {
      // The next transaction reads this one's changes from the overlay.
      const next = this.queue.shift();
      if (next) next();
      else this.running = false;
    }
    await new Promise<void>((resolve, reject) => {
      this.forming.waiters.push({ resolve, reject });
      if (!this.flushing) this.flushing = this.flushLoop();
    });
    return result;
  }

  /** Waits until the running transaction hands over; a wait that long is one for itself. */
  private waitTurn(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const turn = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        const at = this.queue.indexOf(turn);
        if (at !== -1) this.queue.splice(at, 1);
        reject(nestedTransaction());
      }, LOCK_WAIT_MS);
      timer.unref();
      this.queue.push(turn);
    });
  }

  /** @internal what a transaction reads under its own changes: committed plus not yet durable */
  pendingSlot(space: string, key: string): { value: Slot } | undefined {
    return this.overlay.get(space)?.get(key);
  }

  /** @internal */
  pendingKeys(space: string): Map<string, { value: Slot }> | undefined {
    return this.overlay.get(space);
  }

  /** @internal */
  committedDoc(name: string): unknown {
    return this.docs.get(name);
  }

  private async flushLoop(): Promise<void> {
    // Yield once so that transactions issued in the same tick join this group.
    await new Promise<void>((r) => setImmediate(r));
    while (this.forming.waiters.length > 0 && !this.broken) {
      const group = this.forming;
      const groupNo = this.groupNo++;
      this.forming = { ops: [], waiters: [] };
      if (!(await this.writeGroup(group))) continue;
      if (!this.applyGroup(group, groupNo)) break;
      for (const w of group.waiters) w.resolve();
      // It catches its own errors; were one to escape, the writes queued behind would wait forever.
      await this.backend.afterAppend(() => this.snapshot()).catch((err) => this.opts.onCompactionError?.(err));
    }
    if (this.broken) {
      // transactions that finished while the store broke
      for (const w of this.forming.waiters) w.reject(storeWriteFailed(this.broken));
      this.forming = { ops: [], waiters: [] };
    }
    this.flushing = null;
  }

  /** Makes a group durable; if it cannot, nothing of it (nor of what queued behind it) happened. */
  private async writeGroup(group: { ops: Op[]; waiters: Waiter[] }): Promise<boolean> {
    try {
      await this.backend.append(this.seq + 1, group.ops, () => this.snapshot());
    } catch (err) {
      // Drop everything not yet durable, including what is queued behind this group.
      this.overlay.clear();
      this.failures++;
      const news = !this.lastWriteError || (this.lastWriteError as Error)?.message !== (err as Error)?.message;
      this.lastWriteError = err;
      if (news) this.opts.onWriteError?.(err);
      const failed = storeWriteFailed(err);
      for (const w of [...group.waiters, ...this.forming.waiters]) w.reject(failed);
      this.forming = { ops: [], waiters: [] };
      this.groupNo++;
      return false;
    }
    if (this.lastWriteError) this.opts.onWriteRecovered?.();
    this.lastWriteError = null;
    return true;
  }

  /**
   * A durable group becomes what readers see. Should that fail (a watcher throws), memory no
   * longer matches the disk, and telling the writers "nothing changed" would be false: the change
   * is in the journal. So the store stops taking writes and its owner is told to stop; the next
   * start replays the change.
   */
  private applyGroup(group: { ops: Op[]; waiters: Waiter[] }, groupNo: number): boolean {
    this.seq += 1;
    try {
      this.apply(group.ops, groupNo);
      return true;
    } catch (err) {
      this.broken = new StoreFailedError(err);
      this.overlay.clear();
      for (const w of group.waiters) w.reject(this.broken);
      const refused = storeWriteFailed(this.broken);
      for (const w of this.forming.waiters) w.reject(refused);
      this.forming = { ops: [], waiters: [] };
      this.opts.onFatal?.(this.broken);
      return false;
    }
  }

  /** A durable group becomes what readers see. */
  private apply(ops: Op[], groupNo: number): void {
    for (const op of ops) {
      let space: string;
      if (op[0] === 's') {
        space = DOCS;
        this.docs.set(op[1], op[2]);
      } else {
        space = op[1];
        const records = this.data.get(op[1])!;
        if (op[0] === 'p') records.set(op[2], op[3]);
        else records.delete(op[2]);
        for (const fn of this.watchers.get(op[1]) ?? []) fn(op[2], op[0] === 'p' ? op[3] : undefined);
      }
      const slots = this.overlay.get(space);
      const key = op[0] === 's' ? op[1] : op[2];
      if (slots?.get(key)?.group === groupNo) slots.delete(key);
    }
  }

  /** The committed data as of now, for a snapshot: records are values, so the arrays stay true. */
  private snapshot(): StoreContents {
    const collections = new Map<CollectionName, Map<string, unknown>>();
    // A shallow copy of each map: later changes replace entries in `data`, never these values.
    for (const [name, records] of this.data) collections.set(name, new Map(records));
    return { seq: this.seq, collections, docs: new Map(this.docs) };
  }

  /**
   * Resolves once every queued write is done and no snapshot is being written in the background,
   * so that what is on disk stays as it is while nothing new is written (tests wait on it).
   */
  async settled(): Promise<void> {
    while (this.flushing) await this.flushing.catch(() => undefined);
    await this.backend.snapshotsDone?.();
  }

  /**
   * Waits for every queued write, writes a snapshot when this process wrote anything, then
   * refuses new writes. A broken store writes nothing more: its memory is not what is on disk.
   */
  async close(): Promise<void> {
    while (this.flushing) await this.flushing.catch(() => undefined);
    this.closed = true;
    await this.backend.close(this.broken ? null : () => this.snapshot());
  }
}

class Transaction implements Tx {
  private readonly changes = new Map<string, Map<string, Slot>>();
  private readonly edits = new Map<string, { collection: CollectionName; key: string; record: unknown; original: unknown }>();
  private readonly ops: Op[] = [];

  constructor(private readonly store: Store) {}

  private slot(space: string, key: string): { value: Slot } | undefined {
    const mine = this.changes.get(space);
    if (mine?.has(key)) return { value: mine.get(key) };
    return this.store.pendingSlot(space, key);
  }

  get<N extends CollectionName, T = CollectionRecords[N]>(collection: N, key: string): T | undefined {
    const edit = this.edits.get(`${collection}\0${key}`);
    if (edit) return edit.record as T;
    const s = this.slot(collection, key);
    if (s) return (s.value === DELETED ? undefined : s.value) as T | undefined;
    return this.store.get<N, T>(collection, key);
  }

  all<N extends CollectionName, T = CollectionRecords[N]>(collection: N): T[] {
    const pending = this.store.pendingKeys(collection);
    const mine = this.changes.get(collection);
    if (!pending?.size && !mine?.size) return this.store.all<N, T>(collection);
    const merged = new Map<string, unknown>();
    for (const r of this.store.all(collection)) merged.set(keyOf(collection, r), r);
    for (const [key, { value }] of pending ?? []) {
      if (value === DELETED) merged.delete(key);
      else merged.set(key, value);
    }
    for (const [key, value] of mine ?? []) {
      if (value === DELETED) merged.delete(key);
      else merged.set(key, value);
    }
    for (const e of this.edits.values()) if (e.collection === collection) merged.set(e.key, e.record);
    return [...merged.values()] as T[];
  }

  count(collection: CollectionName): number {
    return this.all(collection).length;
  }

  changed<N extends CollectionName, T = CollectionRecords[N]>(collection: N): [string, T | undefined][] {
    const out = new Map<string, unknown>();
    for (const [key, { value }] of this.store.pendingKeys(collection) ?? []) out.set(key, value);
    for (const [key, value] of this.changes.get(collection) ?? []) out.set(key, value);
    for (const e of this.edits.values()) if (e.collection === collection) out.set(e.key, e.record);
    return [...out].map(([k, v]) => [k, (v === DELETED ? undefined : v) as T | undefined]);
  }

  doc<D extends DocName>(name: D): DocValues[D] {
    const s = this.slot(DOCS, name);
    const value = s ? s.value : this.store.committedDoc(name);
    return (value ?? (name === 'meta' ? null : undefined)) as DocValues[D];
  }


  put<N extends CollectionName, T = CollectionRecords[N]>(collection: N, record: T, key?: string): T {
    const k = key ?? keyOf(collection, record);
    this.edits.delete(`${collection}\0${k}`);
    this.change(collection, k, record);
    this.ops.push(['p', collection, k, record]);
    return record;
  }

  delete(collection: CollectionName, key: string): void {
    this.edits.delete(`${collection}\0${key}`);
    if (this.get(collection, key) === undefined) return;
    this.change(collection, key, DELETED);
    this.ops.push(['d', collection, key]);
  }

  edit<N extends CollectionName, T = CollectionRecords[N]>(collection: N, key: string): T | undefined {
    const id = `${collection}\0${key}`;
    const open = this.edits.get(id);
    if (open) return open.record as T;
    const current = this.get(collection, key);
    if (current === undefined) return undefined;
    const record = structuredClone(current);
    this.edits.set(id, { collection, key, record, original: current });
    return record as T;
  }

  setDoc<D extends DocName>(name: D, value: DocValues[D]): void {
    this.change(DOCS, name, value);
    this.ops.push(['s', name, value]);
  }

  private change(space: string, key: string, value: Slot): void {
    let m = this.changes.get(space);
    if (!m) this.changes.set(space, (m = new Map()));
    m.set(key, value);
  }

  /** The transaction's changes in the order they were made, then the edits that changed anything. */
  finish(): Op[] {
    for (const e of this.edits.values()) if (!isDeepStrictEqual(e.record, e.original)) this.ops.push(['p', e.collection, e.key, e.record]);
    this.edits.clear();
    return this.ops;
  }
}

function keyOf(collection: CollectionName, record: unknown): string {
  const key = COLLECTION_KEYS[collection];
  if (!key) throw new Error(`records of ${collection} are stored under a key given with each put`);
  return (key as (r: unknown) => string)(record);
}

/** Contents from plain arrays (tests, the in-memory store). */
function contentsOf(initial: Partial<Record<CollectionName, unknown[]>> & { meta?: DocValues['meta'] }): StoreContents {
  const collections = new Map<CollectionName, Map<string, unknown>>();
  for (const [name, records] of Object.entries(initial)) {
    if (name === 'meta') continue;
    const c = name as CollectionName;
    collections.set(c, new Map((records as unknown[]).map((r) => [keyOf(c, r), freezeRecords ? deepFreeze(r) : r])));
  }
  return { seq: 0, collections, docs: new Map(initial.meta ? [['meta', initial.meta]] : []) };
}

/** Nothing on disk: every write is durable at once. */
export function memoryBackend(): StoreBackend {
  return {
    file: '(memory)',
    load: async () => ({ seq: 0, collections: new Map(), docs: new Map() }),
    append: async () => undefined,
    afterAppend: async () => undefined,
    close: async () => undefined,
  };
}
