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
import type { AccessRequestRecord, ApiKeyRecord, UserRecord } from './schema.js';
import { Store } from './store.js';
import type { CollectionName, CollectionRecords, DocName, DocValues, StoreReader, Tx } from './tables.js';

/**
 * Where a repository reads and writes: on its own (reads see durable data, each write is a
 * transaction of its own) or inside a transaction (reads and writes go through it).
 */
interface Scope {
  read(): StoreReader;
  write<R>(fn: (tx: Tx) => R): Promise<R>;
  store: Store;
}

const standalone = (store: Store): Scope => ({ read: () => store, write: (fn) => store.update(fn), store });
const within = (store: Store, tx: Tx): Scope => ({ read: () => tx, write: (fn) => new Promise((resolve) => resolve(fn(tx))), store });

class StoreRecords<N extends CollectionName> implements RecordRepository<CollectionRecords[N]> {
  constructor(
    protected readonly scope: Scope,
    protected readonly name: N,
  ) {}

  async get(key: string) {
    return this.scope.read().get(this.name, key);
  }

  async list() {
    return this.scope.read().all(this.name);
  }

  async count() {
    return this.scope.read().count(this.name);
  }

  put(record: CollectionRecords[N]) {
    return this.scope.write((tx) => tx.put(this.name, record));
  }

  delete(key: string) {
    return this.scope.write((tx) => {
      if (tx.get(this.name, key) === undefined) return false;
      tx.delete(this.name, key);
      return true;
    });
  }

  update(key: string, change: (record: CollectionRecords[N]) => void) {
    return this.scope.write((tx) => {
      const current = tx.get(this.name, key);
      if (current === undefined) return undefined;
      // a copy, stored only if `change` returns: a refusal halfway leaves nothing behind
      const next = structuredClone(current) as CollectionRecords[N];
      change(next);
      // nothing changed, nothing written (no journal line, no listener called)
      return isDeepStrictEqual(next, current) ? current : tx.put(this.name, next);
    });
  }

  onChange(fn: (key: string, record: CollectionRecords[N] | undefined) => void) {
    this.scope.store.watch(this.name, fn);
  }
}

/** The undecided drafts that the caps count (client, expiry), following every durable change. */
class DraftIndex {
  readonly drafts = new Map<string, { client: string; expires: number }>();

  constructor(store: Store) {
    const follow = (id: string, r: AccessRequestRecord | undefined) => {
      if (r?.status === 'draft') this.drafts.set(id, { client: r.app_client_id, expires: Date.parse(r.expires_at) });
      else this.drafts.delete(id);
    };
    for (const r of store.all('access_requests')) follow(r.id, r);
    store.watch('access_requests', follow);
  }

  /** undecided drafts at `now`: durable ones, then the changes still being written */
  live(tx: Tx, now: number): Map<string, string> {
    const live = new Map<string, string>();
    for (const [id, d] of this.drafts) {
      if (d.expires > now) live.set(id, d.client);
      else this.drafts.delete(id); // expired: undecided no more, and never again
    }
    for (const [id, r] of tx.changed('access_requests')) {
      if (r?.status === 'draft' && Date.parse(r.expires_at) > now) live.set(id, r.app_client_id);
      else live.delete(id);
    }
    return live;
  }
}

class StoreAccessRequests extends StoreRecords<'access_requests'> implements AccessRequestRepository {
  constructor(
    scope: Scope,
    private readonly index: DraftIndex,
  ) {
    super(scope, 'access_requests');
  }

  insertDraft(record: AccessRequestRecord, caps: DraftCaps, now: number): Promise<DraftInsert> {
    return this.scope.write((tx): DraftInsert => {
      const full = draftCapReached(this.index.live(tx, now).values(), record.app_client_id, caps);
      if (full) return full;
      tx.put('access_requests', record);
      return { stored: true };
    });
  }

  async approvedFor(clientId: string, userId?: string) {
    return this.scope
      .read()
      .all('access_requests')
      .filter((r) => r.status === 'approved' && r.app_client_id === clientId && (userId === undefined || r.user_id === userId));
  }
}

/** API keys by hash, following every durable change: a revoke ends a key on its next call. */
class KeyHashIndex {
  readonly byHash = new Map<string, ApiKeyRecord>();

  constructor(store: Store) {
    const hashes = new Map<string, string>();
    const follow = (id: string, k: ApiKeyRecord | undefined) => {
      const before = hashes.get(id);
      if (before) this.byHash.delete(before);
      hashes.delete(id);
      if (!k) return;
      hashes.set(id, k.key_hash);
      this.byHash.set(k.key_hash, k);
    };
    for (const k of store.all('api_keys')) follow(k.id, k);
    store.watch('api_keys', follow);
  }
}

class StoreApiKeys extends StoreRecords<'api_keys'> implements ApiKeyRepository {
  constructor(
    scope: Scope,
    private readonly index: KeyHashIndex,
  ) {
    super(scope, 'api_keys');
  }

  async findByHash(keyHash: string): Promise<ApiKeyRecord | undefined> {
    return this.index.byHash.get(keyHash);
  }
}

class StoreUsers extends StoreRecords<'users'> implements UserRepository {
  constructor(scope: Scope) {
    super(scope, 'users');
  }

  async findByName(username: string): Promise<UserRecord | undefined> {
    const wanted = username.toLowerCase();
    return this.scope
      .read()
      .all('users')
      .find((u) => u.username.toLowerCase() === wanted);
  }
}

class StoreToolCaches implements McpToolCacheRepository {
  constructor(private readonly scope: Scope) {}

  async get(instanceId: string) {
    return this.scope.read().get('mcp_tools', instanceId);
  }

  async set(instanceId: string, cache: CollectionRecords['mcp_tools']) {
    await this.scope.write((tx) => tx.put('mcp_tools', cache, instanceId));
  }

  delete(instanceId: string) {
    return this.scope.write((tx) => {
      if (tx.get('mcp_tools', instanceId) === undefined) return false;
      tx.delete('mcp_tools', instanceId);
      return true;
    });
  }
}

class StoreValue<D extends DocName> implements ValueRepository<DocValues[D]> {
  constructor(
    private readonly scope: Scope,
    private readonly name: D,
  ) {}

  async get() {
    return this.scope.read().doc(this.name);
  }

  async set(value: DocValues[D]) {
    await this.scope.write((tx) => tx.setDoc(this.name, value));
  }

  async setIfUnchanged(expected: DocValues[D], next: DocValues[D]) {
    return this.scope.write((tx) => {
      if (!isDeepStrictEqual(tx.doc(this.name), expected)) return false;
      tx.setDoc(this.name, next);
      return true;
    });
  }
}

/** Every feature's repository over `store`: the daemon's, on the journal on disk. */
export function storeRepositories(store: Store): Repositories {
  const drafts = new DraftIndex(store);
  const keyHashes = new KeyHashIndex(store);
  const set = (scope: Scope): RepositorySet => ({
    accessRequests: new StoreAccessRequests(scope, drafts),
    apiKeys: new StoreApiKeys(scope, keyHashes),
    users: new StoreUsers(scope),
    sessions: new StoreRecords(scope, 'sessions'),
    mcpInstances: new StoreRecords(scope, 'mcp_instances'),
    mcpTools: new StoreToolCaches(scope),
    oauthClients: new StoreRecords(scope, 'oauth_clients'),
    oauthState: new StoreRecords(scope, 'oauth_state'),
    providers: new StoreRecords(scope, 'providers'),
    modelAliases: new StoreRecords(scope, 'model_aliases'),
    modelPulls: new StoreRecords(scope, 'model_pulls'),
    meta: new StoreValue(scope, 'meta'),
    signingKeys: new StoreValue(scope, 'oauth_keys'),
  });
  return {
    ...set(standalone(store)),
    transaction: (fn) => store.update((tx) => fn(set(within(store, tx)))),
  };
}

/**
 * The same repositories over the journaled store kept in memory (no file, every write durable at
 * once): what the service unit tests run on, so that they exercise the daemon's own backend.
 * `seed` may store records first, in one transaction (test fixtures).
 */
export async function inMemoryRepositories(seed?: (repos: RepositorySet) => Promise<void>): Promise<Repositories> {
  const repos = storeRepositories(Store.memory());
  if (seed) await repos.transaction(seed);
  return repos;
}
