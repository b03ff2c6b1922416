import { AsyncLocalStorage } from 'node:async_hooks';
import { isDeepStrictEqual } from 'node:util';
import {
  type AccessRequestRepository,
  type ApiKeyRepository,
  type DraftCaps,
  draftCapReached,
  type DraftInsert,
  type McpToolCacheRepository,
  type RecordRepository,
  type Repositories,
  type RepositorySet,
  type UserRepository,
  type ValueRepository,
} from './repositories.js';
import type { AccessRequestRecord, ApiKeyRecord, DbMeta, UserRecord } from './schema.js';
import type { ToolCache } from './records.js';

/**
 * The repositories as plain maps in memory: a second backend, written against the interfaces of
 * repositories.ts and nothing of the store (no journal, no transactions of its own), which is
 * what the service unit tests run on. It keeps the same promises as the store's: records are
 * values (copied in, frozen), transactions run one at a time and land whole or not at all, and
 * reads outside a transaction see only what was committed.
 */

const GONE = Symbol('gone');
/** the data whose transaction is running in this async context */
const running = new AsyncLocalStorage<MemoryData>();
type Staged = Map<string, Map<string, unknown>>;

/** Committed tables, plus the writes of the one transaction running (if any). */
class MemoryData {
  readonly tables = new Map<string, Map<string, unknown>>();
  readonly listeners = new Map<string, ((key: string, value: unknown) => void)[]>();
  private tail: Promise<unknown> = Promise.resolve();

  table(name: string): Map<string, unknown> {
    let t = this.tables.get(name);
    if (!t) this.tables.set(name, (t = new Map()));
    return t;
  }

  /** Runs `fn` with a fresh staging area once every earlier transaction is done; commits what it staged. */
  transaction<R>(fn: (staged: Staged) => Promise<R>): Promise<R> {
    // It would wait for the transaction it is part of, for ever.
    if (running.getStore() === this) return Promise.reject(new Error('a transaction was started inside another one: use the repositories the transaction gives'));
    const run = this.tail.then(async () => {
      const staged: Staged = new Map();
      const result = await running.run(this, () => fn(staged));
      for (const [name, changes] of staged) {
        const table = this.table(name);
        for (const [key, value] of changes) {
          if (value === GONE) table.delete(key);
          else table.set(key, value);
          for (const listener of this.listeners.get(name) ?? []) listener(key, value === GONE ? undefined : value);
        }
      }
      return result;
    });
    this.tail = run.catch(() => undefined);
    return run;
  }
}

const frozenCopy = <T>(value: T): T => deepFreeze(structuredClone(value));

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/**
 * Where a repository works: `staged` is the running transaction's writes, or undefined when each
 * call is a transaction of its own.
 */
interface Place {
  data: MemoryData;
  staged?: Staged;
}

class MemoryRecords<T> implements RecordRepository<T> {
  constructor(
    protected readonly place: Place,
    protected readonly name: string,
    private readonly keyOf: (record: T) => string,
  ) {}

  /** what this scope sees: committed records under the transaction's own writes */
  protected view(): Map<string, T> {
    const committed = this.place.data.table(this.name) as Map<string, T>;
    const mine = this.place.staged?.get(this.name);
    if (!mine?.size) return committed;
    const merged = new Map(committed);
    for (const [key, value] of mine) {
      if (value === GONE) merged.delete(key);
      else merged.set(key, value as T);
    }
    return merged;
  }

  /** runs a write in the running transaction, or in one of its own */
  protected write<R>(fn: (staged: Map<string, unknown>, read: () => Map<string, T>) => R): Promise<R> {
    const run = (scoped: MemoryRecords<T>, staged: Staged) => {
      let mine = staged.get(this.name);
      if (!mine) staged.set(this.name, (mine = new Map()));
      return fn(mine, () => scoped.view());
    };
    const { data, staged } = this.place;
    if (staged) return Promise.resolve().then(() => run(this, staged));
    return data.transaction(async (mine) => run(new MemoryRecords<T>({ data, staged: mine }, this.name, this.keyOf), mine));
  }

  async get(key: string) {
    return this.view().get(key);
  }

  async list() {
    return [...this.view().values()];
  }

  async count() {
    return this.view().size;
  }

  put(record: T) {
    const stored = frozenCopy(record);
    return this.write((staged) => {
      staged.set(this.keyOf(stored), stored);
      return stored;
    });
  }

  delete(key: string) {
    return this.write((staged, read) => {
      if (!read().has(key)) return false;
      staged.set(key, GONE);
      return true;
    });
  }

  update(key: string, change: (record: T) => void) {
    return this.write((staged, read) => {
      const current = read().get(key);
      if (current === undefined) return undefined;
      const next = structuredClone(current);
      change(next);
      if (isDeepStrictEqual(next, current)) return current;
      const stored = deepFreeze(next);
      staged.set(key, stored);
      return stored;
    });
  }

  onChange(fn: (key: string, record: T | undefined) => void) {
    const list = this.place.data.listeners.get(this.name) ?? [];
    list.push(fn as (key: string, value: unknown) => void);
    this.place.data.listeners.set(this.name, list);
  }
}

class MemoryAccessRequests extends MemoryRecords<AccessRequestRecord> implements AccessRequestRepository {
  constructor(place: Place) {
    super(place, 'access_requests', (r) => r.id);
  }

  insertDraft(record: AccessRequestRecord, caps: DraftCaps, now: number): Promise<DraftInsert> {
    const stored = frozenCopy(record);
    return this.write((staged, read): DraftInsert => {
      const undecided = [...read().values()].filter((r) => r.status === 'draft' && Date.parse(r.expires_at) > now).map((r) => r.app_client_id);
      const full = draftCapReached(undecided, record.app_client_id, caps);
      if (full) return full;
      staged.set(stored.id, stored);
      return { stored: true };
    });
  }

  async approvedFor(clientId: string, userId?: string) {
    return (await this.list()).filter((r) => r.status === 'approved' && r.app_client_id === clientId && (userId === undefined || r.user_id === userId));
  }
}

class MemoryApiKeys extends MemoryRecords<ApiKeyRecord> implements ApiKeyRepository {
  constructor(place: Place) {
    super(place, 'api_keys', (k) => k.id);
  }

  async findByHash(keyHash: string) {
    return (await this.list()).find((k) => k.key_hash === keyHash);
  }
}

class MemoryUsers extends MemoryRecords<UserRecord> implements UserRepository {
  constructor(place: Place) {
    super(place, 'users', (u) => u.id);
  }

  async findByName(username: string) {
    const wanted = username.toLowerCase();
    return (await this.list()).find((u) => u.username.toLowerCase() === wanted);
  }
}

/** A tool cache record carries no key of its own: it is stored under the instance id given. */
class MemoryToolCaches implements McpToolCacheRepository {
  private readonly records: MemoryRecords<{ instance: string; cache: ToolCache }>;

  constructor(place: Place) {
    this.records = new MemoryRecords(place, 'mcp_tools', (r) => r.instance);
  }

  async get(instanceId: string) {
    return (await this.records.get(instanceId))?.cache;
  }

  async set(instanceId: string, cache: ToolCache) {
    await this.records.put({ instance: instanceId, cache });
  }

  delete(instanceId: string) {
    return this.records.delete(instanceId);
  }
}

class MemoryValue<T> implements ValueRepository<T> {
  private readonly records: MemoryRecords<{ name: string; value: T }>;

  constructor(
    place: Place,
    private readonly name: string,
    private readonly empty: T,
  ) {
    this.records = new MemoryRecords(place, '#values', (r) => r.name);
  }

  async get() {
    const found = await this.records.get(this.name);
    return found ? found.value : this.empty;
  }

  async set(value: T) {
    await this.records.put({ name: this.name, value });
  }
}

function repositorySet(place: Place): RepositorySet {
  return {
    accessRequests: new MemoryAccessRequests(place),
    apiKeys: new MemoryApiKeys(place),
    users: new MemoryUsers(place),
    sessions: new MemoryRecords(place, 'sessions', (s) => s.id_hash),
    mcpInstances: new MemoryRecords(place, 'mcp_instances', (m) => m.id),
    mcpTools: new MemoryToolCaches(place),
    oauthClients: new MemoryRecords(place, 'oauth_clients', (c) => c.client_id),
    oauthState: new MemoryRecords(place, 'oauth_state', (r) => `${r.model}:${r.id}`),
    providers: new MemoryRecords(place, 'providers', (p) => p.name),
    modelAliases: new MemoryRecords(place, 'model_aliases', (a) => a.id),
    modelPulls: new MemoryRecords(place, 'model_pulls', (p) => p.id),
    meta: new MemoryValue<DbMeta | null>(place, 'meta', null),
    signingKeys: new MemoryValue<string | undefined>(place, 'oauth_keys', undefined),
  };
}

/** Fresh, empty repositories in memory; `seed` may store records first (test fixtures). */
export async function memoryRepositories(seed?: (repos: RepositorySet) => Promise<void>): Promise<Repositories> {
  const data = new MemoryData();
  const repos: Repositories = {
    ...repositorySet({ data }),
    transaction: (fn) => data.transaction((staged) => fn(repositorySet({ data, staged }))),
  };
  if (seed) await repos.transaction(seed);
  return repos;
}
