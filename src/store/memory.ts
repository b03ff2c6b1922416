import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * What svc does about the memory of its own process (not the in-memory store): the one place
 * that reaches V8's collector, and the three measures that use it or spare it work. It lives at
 * the bottom of the store layer because the snapshot reader calls it; the daemon calls it too.
 * Nothing else in svc switches a V8 flag at run time (test/layers.test.ts holds that).
 *
 * - **Idle collection** (`reduceMemoryWhenIdle`). V8 keeps its young generation at the size its
 *   busiest moment needed (32 MiB committed with Node's defaults) until its memory reducer sees a
 *   low allocation rate, which it reads at collections, and an idle process has none: a start, a
 *   burst or a load test left the daemon about 25 MiB larger for as long as it ran. One minor
 *   collection once idle gives the reducer its reading: 56 to 25 MiB of heap within seconds in
 *   one trace; with the scrypt helper that ends when idle, the daemon idles at about 80 MiB
 *   (docs/performance.md).
 * - **A collection every 10,000 records of a large read** (`collectEvery`). Reading db.json a
 *   record at a time leaves garbage behind each record kept (lines, parse temporaries); collected
 *   as it goes, the load never sets the daemon's high-water mark. With timestamps shared within a
 *   record and zod's copy of a whole file no longer kept (the same change), peak RSS at 50,000
 *   stored requests came to 1.23x the figure at 1,000 (1.24x, 164 MiB, in docs/performance.md).
 *   Measured alone (below): peak RSS of the read 126 MiB without it, 113 MiB with it.
 * - **The string interner** (`stringInterner`): one copy of each repeated string value across
 *   the records loaded. It came with the streamed reader, part of the work that took a 50,000
 *   store's daemon from 935 MiB at peak under load to 164 MiB (docs/performance.md), with no
 *   figure of its own then. Measured alone (below): the records loaded hold 41.5 MiB of heap
 *   without it, 27.7 MiB with it (a third less), and the read peaks at 125 against 113 MiB RSS.
 *
 * "Measured alone": readSnapshot of a 28 MiB db.json of 50,000 access requests seeded as
 * bench/store.js seeds them, in a fresh Node 20 process, three runs of each variant (each measure
 * switched off in turn), heap read after two full collections; the runs of a variant agreed within 5 MiB of RSS and
 * 0.2 MiB of heap.
 */

type Collect = (options?: { type?: 'major' | 'minor' }) => void;

let collector: Collect | null | undefined;

/**
 * V8's collector, reached once per process: the flag only exposes `gc` to contexts made after it
 * is set, so it is set, `gc` read from a new context, and the flag switched back off at once (no
 * later context, vm sandboxes included, gets a `gc` of its own). undefined where V8 refuses.
 */
export function v8Collector(): Collect | undefined {
  if (collector === undefined) {
    try {
      setFlagsFromString('--expose-gc');
      collector = runInNewContext('gc') as Collect;
    } catch {
      collector = null;
    }
    setFlagsFromString('--no-expose-gc');
  }
  return collector ?? undefined;
}

/**
 * Gives memory back once the daemon is idle (see the header): once no request has come for a
 * whole `idleMs` period, one minor collection (a few milliseconds); once per idle spell. A stream
 * left open does not count as busy: MCP hosts keep one open all day, and a pause of a few
 * milliseconds costs an idle stream nothing. Answers a function that stops it.
 */
export function reduceMemoryWhenIdle(opts: { idleMs: number; served: () => number; collect?: Collect }): () => void {
  const collect = opts.collect ?? v8Collector();
  if (!collect) return () => undefined;
  let seen = opts.served();
  let reduced = false;
  const timer = setInterval(() => {
    const served = opts.served();
    if (served !== seen) {
      seen = served;
      reduced = false;
      return;
    }
    if (reduced) return;
    reduced = true;
    collect({ type: 'minor' });
  }, opts.idleMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** how many records a large read keeps between two full collections */
export const RECORDS_PER_COLLECTION = 10_000;

/**
 * For a large read: call the answer with the count of records kept after each one; every
 * RECORDS_PER_COLLECTION it runs a full collection (see the header), where V8 lets it.
 */
export function collectEvery(records = RECORDS_PER_COLLECTION, collect: () => Collect | undefined = v8Collector): (kept: number) => void {
  return (kept) => {
    if (kept % records === 0) collect()?.();
  };
}

/**
 * One copy of each repeated string value (client ids, URLs, roles, statuses) across the records
 * loaded: JSON.parse makes a new string for every occurrence, which for a large store is much of
 * its memory. Ids, timestamps, hashes and sealed values are unique and are left alone; timestamps
 * repeat within a record (updated_at is decided_at, revoked_at), rarely across records, so they
 * are shared within one. Call it with key '' on each new record.
 */
export function stringInterner(): (v: unknown, key: string) => unknown {
  const table = new Map<string, string>();
  const unique = (key: string) => key === 'id' || key.endsWith('_hash') || key === 'payload' || key === 'csrf' || key === 'value';
  let times = new Map<string, string>();
  const intern = (v: unknown, key: string): unknown => {
    if (key === '') times = new Map();
    if (typeof v === 'string') {
      if (key.endsWith('_at')) {
        const seen = times.get(v);
        if (seen !== undefined) return seen;
        times.set(v, v);
        return v;
      }
      if (v.length > 512 || unique(key)) return v;
      const seen = table.get(v);
      if (seen !== undefined) return seen;
      table.set(v, v);
      return v;
    }
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) v[i] = intern(v[i], key);
    } else if (v && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      for (const k of Object.keys(o)) o[k] = intern(o[k], k);
    }
    return v;
  };
  return intern;
}
