import { performance } from 'node:perf_hooks';
import type { BearerRecordRepository } from '../repositories.js';
import type { LeaseHolder } from './leases.js';

/**
 * The Bearer check's records kept in memory on a team replica, answered only while the replica
 * holds its lease (leases.ts says why a revoke is never outlived by them).
 *
 * An entry names the records it was read from ("table\0key", an absent one too: a sign-in mark
 * written later must drop the entry that read none), and is dropped when any of them changes.
 * A read that was under way when something was dropped is not kept: it may have read the record
 * before the change. Only what was found is kept (an unknown API key is not, so guessing keys
 * cannot fill memory), at most MAX_ENTRIES, each for at most MAX_AGE_MS.
 */

/** Entries kept at most (each a grant, a user and a key or mark, as read); the oldest goes first. */
const MAX_ENTRIES = 10_000;
/** The longest an entry is kept, for changes made in the database by hand, outside svc. */
const MAX_AGE_MS = 60_000;

type TokenRecords = Awaited<ReturnType<BearerRecordRepository['forToken']>>;
type KeyRecords = Awaited<ReturnType<BearerRecordRepository['forKey']>>;

interface Entry {
  value: TokenRecords | KeyRecords;
  deps: string[];
  until: number;
}

const dep = (table: string, key: string) => `${table}\0${key}`;

export interface BearerLease {
  valid(): boolean;
}

export class CachedBearerRecords implements BearerRecordRepository, LeaseHolder {
  private readonly entries = new Map<string, Entry>();
  /** cache key by record read: what to drop when that record changes */
  private readonly byDep = new Map<string, Set<string>>();
  /** bumped by every drop: a read begun before it is not kept */
  private generation = 0;

  constructor(
    private readonly inner: BearerRecordRepository,
    private readonly lease: BearerLease,
    private readonly now: () => number = () => performance.now(),
  ) {}

  get size(): number {
    return this.entries.size;
  }

  forToken(accessRequestId: string, userId: string, endedKey: string | null): Promise<TokenRecords> {
    const deps = () => [dep('access_requests', accessRequestId), dep('users', userId), ...(endedKey === null ? [] : [dep('oauth_state', endedKey)])];
    return this.through(`t\0${accessRequestId}\0${userId}\0${endedKey ?? ''}`, deps, () => this.inner.forToken(accessRequestId, userId, endedKey), (v) => v.record !== undefined);
  }

  forKey(keyHash: string): Promise<KeyRecords> {
    return this.through(
      `k\0${keyHash}`,
      (v) => (v.key ? [dep('api_keys', v.key.id), dep('access_requests', v.key.access_request_id), dep('users', v.key.user_id)] : []),
      () => this.inner.forKey(keyHash),
      (v) => v.key !== undefined,
    );
  }

  drop(changes: [string, string][]): void {
    this.generation++;
    for (const [table, key] of changes) {
      const keys = this.byDep.get(dep(table, key));
      if (!keys) continue;
      for (const k of [...keys]) this.remove(k);
    }
  }

  clear(): void {
    this.generation++;
    this.entries.clear();
    this.byDep.clear();
  }

  /** `deps` names what an entry was read from; worked out only when one is kept, not on a hit. */
  private async through<V extends TokenRecords | KeyRecords>(key: string, deps: (v: V) => string[], read: () => Promise<V>, keep: (v: V) => boolean): Promise<V> {
    if (this.lease.valid()) {
      const hit = this.entries.get(key);
      if (hit && hit.until > this.now()) return hit.value as V;
      if (hit) this.remove(key);
    }
    const before = this.generation;
    const value = await read();
    if (before === this.generation && this.lease.valid() && keep(value)) this.add(key, value, deps(value));
    return value;
  }

  private add(key: string, value: TokenRecords | KeyRecords, deps: string[]): void {
    this.remove(key);
    if (this.entries.size >= MAX_ENTRIES) this.remove(this.entries.keys().next().value as string);
    this.entries.set(key, { value, deps, until: this.now() + MAX_AGE_MS });
    for (const d of deps) {
      let keys = this.byDep.get(d);
      if (!keys) this.byDep.set(d, (keys = new Set()));
      keys.add(key);
    }
  }

  private remove(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    for (const d of entry.deps) {
      const keys = this.byDep.get(d);
      keys?.delete(key);
      if (keys?.size === 0) this.byDep.delete(d);
    }
  }
}
