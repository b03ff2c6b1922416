import path from 'node:path';
import { Low } from 'lowdb';
import { DurableJsonFile, storeWriteFailed } from './durable-file.js';
import { type Db, emptyDb, validateDb } from './schema.js';

export const STORE_FILE = 'db.json';

/**
 * The daemon's single writer over db.json. A mutation runs synchronously against the in-memory
 * data (so checks and changes are atomic within one event-loop turn: two concurrent decisions
 * can never both see `draft`), then waits for a flush. Mutations that arrive while a flush runs
 * are grouped into the next one. If a flush fails, memory is rolled back to the last durable
 * state and every mutation in that group is rejected: nothing is acknowledged that was not written.
 */
export class Store {
  private readonly low: Low<Db>;
  private lastDurable = '';
  private flushing: Promise<void> | null = null;
  private pending: { resolve: () => void; reject: (err: unknown) => void }[] = [];
  private closed = false;

  private constructor(readonly file: string) {
    this.low = new Low<Db>(new DurableJsonFile<Db>(file, validateDb), emptyDb());
  }

  /** Opens the store; throws CorruptStoreError (file untouched) when it cannot be read. */
  static async open(dataDir: string): Promise<Store> {
    const store = new Store(path.join(dataDir, STORE_FILE));
    await store.low.read();
    store.low.data = { ...emptyDb(), ...store.low.data };
    store.lastDurable = JSON.stringify(store.low.data);
    return store;
  }

  get data(): Readonly<Db> {
    return this.low.data;
  }

  /** Read-only access without persisting. Callers must not mutate. */
  read<R>(fn: (db: Db) => R): R {
    return fn(this.low.data);
  }

  /**
   * Runs `fn` against the data and resolves with its result once the change is durable. If `fn`
   * throws, nothing changes and nothing is written.
   */
  async update<R>(fn: (db: Db) => R): Promise<R> {
    if (this.closed) throw storeWriteFailed(new Error('store is closed'));
    const before = this.low.data;
    const draft = structuredClone(before);
    const result = fn(draft);
    this.low.data = draft;
    await this.scheduleFlush();
    return result;
  }

  /** Changes memory only (derived state such as lazy expiry); persisted with the next write. */
  touch(fn: (db: Db) => void): void {
    fn(this.low.data);
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
      const snapshot = this.low.data;
      try {
        await this.low.adapter.write(snapshot);
        this.lastDurable = JSON.stringify(snapshot);
        for (const p of group) p.resolve();
      } catch (err) {
        // Roll back everything not yet durable, including mutations queued behind this group.
        this.low.data = JSON.parse(this.lastDurable) as Db;
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
