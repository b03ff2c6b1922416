import path from 'node:path';
import type { Adapter } from 'lowdb';
import { DurableJsonFile, storeWriteFailed } from './durable-file.js';
import { type Db, emptyDb, validateDb } from './schema.js';

export const STORE_FILE = 'db.json';

/**
 * The daemon's single writer over db.json, and what every reader sees.
 *
 * Two versions of the data: `committed`, what is on disk and the only thing readers (polls,
 * Bearer checks, lists) ever see, and `working`, committed plus the mutations waiting for their
 * write. A mutation runs synchronously against a copy of `working` (so checks and changes are
 * atomic within one event-loop turn: two concurrent decisions can never both see `draft`), then
 * waits for a flush; mutations that arrive while a flush runs are grouped into the next one. Only
 * once a flush is durable does `committed` move to what it wrote, so nothing is visible that a
 * crash or a full disk could still take back. If a flush fails, `working` falls back to
 * `committed` and every mutation in that group (and queued behind it) is rejected.
 */
export class Store {
  private committed: Db;
  private working: Db;
  private flushing: Promise<void> | null = null;
  private pending: { resolve: () => void; reject: (err: unknown) => void }[] = [];
  private closed = false;
  /** why the last flush failed (a FileWriteError names the file), until one succeeds */
  lastWriteError: unknown = null;

  private constructor(
    readonly file: string,
    private readonly adapter: Adapter<Db>,
    initial: Db,
  ) {
    this.committed = initial;
    this.working = initial;
  }

  /**
   * Opens the store; throws CorruptStoreError (file untouched) when it cannot be read, or when it
   * is missing but its backup is not. `adapter` replaces the file (tests inject failing disks).
   */
  static async open(dataDir: string, adapter?: Adapter<Db>): Promise<Store> {
    const file = path.join(dataDir, STORE_FILE);
    const a = adapter ?? new DurableJsonFile<Db>(file, validateDb);
    const loaded = await a.read();
    return new Store(file, a, { ...emptyDb(), ...loaded });
  }

  /** The committed (durable) data. Callers must not mutate it. */
  get data(): Readonly<Db> {
    return this.committed;
  }

  /** Read-only access to the committed data. Callers must not mutate. */
  read<R>(fn: (db: Db) => R): R {
    return fn(this.committed);
  }

  /**
   * Runs `fn` against the latest data (committed plus pending mutations) and resolves with its
   * result once the change is durable; only then do readers see it. If `fn` throws, nothing
   * changes and nothing is written.
   */
  async update<R>(fn: (db: Db) => R): Promise<R> {
    if (this.closed) throw storeWriteFailed(new Error('store is closed'));
    const draft = structuredClone(this.working);
    const result = fn(draft);
    this.working = draft;
    await this.scheduleFlush();
    return result;
  }

  /**
   * Derived state only (lazy expiry): applied in place to what readers see, and to the pending
   * version; persisted with the next write. `fn` must be idempotent.
   */
  touch(fn: (db: Db) => void): void {
    if (this.working !== this.committed) fn(this.working);
    fn(this.committed);
  }

  private scheduleFlush(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ resolve, reject });
      if (!this.flushing) this.flushing = this.flushLoop();
    });
  }

  private async flushLoop(): Promise<void> {
    // Yield once so that mutations issued in the same tick join this group.
    await new Promise<void>((r) => setImmediate(r));
    while (this.pending.length > 0) {
      const group = this.pending;
      this.pending = [];
      // `working` is replaced, never changed in place, by later mutations: this object stays as written.
      const snapshot = this.working;
      try {
        await this.adapter.write(snapshot);
        this.committed = snapshot;
        this.lastWriteError = null;
        for (const p of group) p.resolve();
      } catch (err) {
        // Drop everything not yet durable, including mutations queued behind this group.
        this.working = this.committed;
        this.lastWriteError = err;
        const failed = storeWriteFailed(err);
        for (const p of [...group, ...this.pending]) p.reject(failed);
        this.pending = [];
      }
    }
    this.flushing = null;
  }

  /** Waits for every queued write, then refuses new ones. */
  async close(): Promise<void> {
    while (this.flushing) await this.flushing.catch(() => undefined);
    this.closed = true;
  }
}
