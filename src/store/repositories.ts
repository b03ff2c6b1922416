import type { AliasRecord, OAuthClientRecord, OAuthStateRecord, ProviderRecord, PullRecord, ToolCache } from './records.js';
import type { AccessRequestRecord, ApiKeyRecord, DbMeta, McpInstanceRecord, SessionRecord, UserRecord } from './schema.js';

/**
 * The seam between svc's features and where their data lives. Every feature reaches
 * its records through its own repository below, and nothing outside src/store sees how they are
 * stored. Three implementations, two of them the same code: `storeRepositories`
 * (store-repositories.ts) over the journaled store on its files, the daemon's;
 * `inMemoryRepositories` (same file), that store opened with no files (every write durable at
 * once), which the service unit tests run on; and `postgresRepositories` (postgres/repositories.ts),
 * a team server's, shared by several processes; the features did not change for it.
 * repositories.test.ts holds all three to the same contract.
 *
 * Every method is async, so a backend may be remote. Called on the `Repositories` object, each
 * call is its own atomic change; `transaction` groups several. Reads outside a transaction see
 * durable data only: a change shows once it is acknowledged, never before.
 *
 * Records are values. A record handed out must never be changed in place: PostgreSQL hands out
 * frozen copies, the file store its own stored objects, frozen only under tests (freezing every
 * record costs the daemon time). A record given to `put` becomes the stored value on the file
 * store (frozen there under tests), so the caller does not change it afterwards either.
 */

/** Records under a key, with the conditional write every feature needs. */
export interface RecordRepository<T> {
  get(key: string): Promise<T | undefined>;
  /** every record, in the order they were first stored */
  list(): Promise<T[]>;
  count(): Promise<number>;
  /** stores a record, new or in place of the one under its key */
  put(record: T): Promise<T>;
  /** whether there was one */
  delete(key: string): Promise<boolean>;
  /**
   * The conditional write: `change` edits a copy of the current record and may throw to refuse
   * (then nothing is written). The check and the write are one atomic step, so of two concurrent
   * decisions on a draft exactly one sees `draft`. Answers the stored record; undefined (and
   * `change` not called) when there is none. A `change` that changes nothing writes nothing (and
   * tells no listener). On PostgreSQL it runs in a transaction that may be run again after a
   * conflict, so `change` may be called more than once, each time on a fresh copy: it only edits.
   */
  update(key: string, change: (record: T) => void): Promise<T | undefined>;
  /**
   * Each durable change (the new record, or undefined once deleted): an index follows it instead of
   * rebuilding. This process's changes are told as they commit; on a team server another
   * replica's arrive a moment after it answered (postgres/changes.ts), so nothing that must hold
   * at once (a revoke) may rest on it.
   */
  onChange(fn: (key: string, record: T | undefined) => void): void;
}

/** A single value stored whole (`meta`, the sealed signing keys). */
export interface ValueRepository<T> {
  get(): Promise<T>;
  set(value: T): Promise<void>;
  /**
   * Stores `next` only if the value is still `expected` (compared as stored: whole strings, or
   * undefined for none), as one atomic step also between replicas. Answers whether it stored it.
   */
  setIfUnchanged(expected: T, next: T): Promise<boolean>;
}

export interface DraftCaps {
  perClient: number;
  total: number;
}

export type DraftInsert = { stored: true } | { stored: false; full: 'client' | 'all'; count: number };

/** Which cap the undecided drafts (their app_client_ids) already reach for a new draft of `clientId`, if any. */
export function draftCapReached(undecided: Iterable<string>, clientId: string, caps: DraftCaps): DraftInsert | undefined {
  let all = 0;
  let mine = 0;
  for (const client of undecided) {
    all++;
    if (client === clientId) mine++;
  }
  return draftCapFromCounts(mine, all, caps);
}

/** The same answer from the counts: the client's own undecided drafts, and everyone's. */
export function draftCapFromCounts(mine: number, all: number, caps: DraftCaps): DraftInsert | undefined {
  if (mine >= caps.perClient) return { stored: false, full: 'client', count: mine };
  if (all >= caps.total) return { stored: false, full: 'all', count: all };
  return undefined;
}

export interface AccessRequestRepository extends RecordRepository<AccessRequestRecord> {
  /**
   * Stores a new draft unless the undecided drafts (status draft, not expired at `now`, this
   * transaction's own included, and on the file store those of earlier changes still being
   * written) already reach a cap: for its app_client_id, or in all. Counting and storing are one
   * atomic step, so two concurrent inserts never both take the last place.
   */
  insertDraft(record: AccessRequestRecord, caps: DraftCaps, now: number): Promise<DraftInsert>;
  /** Approved requests that `clientId` made (and `userId` approved, when given). */
  approvedFor(clientId: string, userId?: string): Promise<AccessRequestRecord[]>;
}

export interface ApiKeyRepository extends RecordRepository<ApiKeyRecord> {
  /**
   * The key with this sha256 hash: one lookup, whatever the number of keys. The file store answers
   * from an index of durable keys, so inside a transaction it does not see keys that transaction
   * wrote (PostgreSQL does); nothing looks keys up in a transaction.
   */
  findByHash(keyHash: string): Promise<ApiKeyRecord | undefined>;
}

export interface UserRepository extends RecordRepository<UserRecord> {
  /** usernames compare case-insensitively */
  findByName(username: string): Promise<UserRecord | undefined>;
}

export type SessionRepository = RecordRepository<SessionRecord>;
export type McpInstanceRepository = RecordRepository<McpInstanceRecord>;
export type OAuthClientRepository = RecordRepository<OAuthClientRecord>;
export type OAuthStateRepository = RecordRepository<OAuthStateRecord>;
export type ProviderRepository = RecordRepository<ProviderRecord>;
export type ModelAliasRepository = RecordRepository<AliasRecord>;
export type ModelPullRepository = RecordRepository<PullRecord>;

/** An MCP instance's cached tool list, under the instance's id. */
export interface McpToolCacheRepository {
  get(instanceId: string): Promise<ToolCache | undefined>;
  set(instanceId: string, cache: ToolCache): Promise<void>;
  delete(instanceId: string): Promise<boolean>;
}

export interface RepositorySet {
  accessRequests: AccessRequestRepository;
  apiKeys: ApiKeyRepository;
  users: UserRepository;
  sessions: SessionRepository;
  mcpInstances: McpInstanceRepository;
  mcpTools: McpToolCacheRepository;
  oauthClients: OAuthClientRepository;
  oauthState: OAuthStateRepository;
  providers: ProviderRepository;
  modelAliases: ModelAliasRepository;
  modelPulls: ModelPullRepository;
  /** the store's identity: key check, key backend, sealed session keys */
  meta: ValueRepository<DbMeta | null>;
  /** the authorization server's signing keys, sealed */
  signingKeys: ValueRepository<string | undefined>;
}

/** A failed-login counter, as the login service keeps one per (username, address). */
export interface LoginFailureEntry {
  count: number;
  blockedUntil: number;
  last: number;
}

/**
 * Login failures kept where every replica of a team server counts them. `modify` reads the entry
 * under `key`, stores what `fn` answers for it (undefined: none) and answers `fn`'s result, as one
 * atomic step; entries last changed before `forgetBefore` go meanwhile.
 */
export interface LoginFailureRepository {
  modify<R>(key: string, forgetBefore: number, fn: (entry: LoginFailureEntry | undefined) => { next: LoginFailureEntry | undefined; result: R }): Promise<R>;
}

/**
 * A tool call held for the person, as a team server's replicas share it: any replica lists it and
 * takes a decision, and the replica that holds the app's request hears the decision through
 * `onChange`. `view` is the call as the person sees it (its `status` included).
 */
export interface SharedHeldCall {
  id: string;
  /** the grant's approver: who may decide, besides an admin */
  user_id: string | null;
  view: { status: string; created_at: string; expires_at: string } & Record<string, unknown>;
}
export type HeldCallRepository = RecordRepository<SharedHeldCall>;

/** A grant's usage as every replica of a team server counts it, for the limits its approver set. */
export interface GrantUsageRepository {
  /**
   * Counts one call in the grant's window of `windowMs` from its first call (a new window starts
   * once the last one ended), unless the window already holds `max`. One atomic step. Answers
   * whether the call fits, and when its window started.
   */
  takeCall(grantId: string, now: number, windowMs: number, max: number): Promise<{ allowed: boolean; windowStart: number }>;
  /** Adds upstream tokens to the grant's count for `day` (a new day starts the count again). */
  addTokens(grantId: string, day: string, tokens: number): Promise<void>;
  /** The grant's tokens counted on `day` (spent, not what calls in flight reserved). */
  tokensOn(grantId: string, day: string): Promise<number>;
  /**
   * Reserves `tokens` of the grant's `day` for a call about to start, unless what is spent and
   * reserved already reaches `budget`. One atomic step. Answers whether the call may start.
   */
  reserveTokens(grantId: string, day: string, tokens: number, budget: number): Promise<boolean>;
  /** A call's end on the day it reserved on: gives back the `held` tokens and counts the `spent` ones. */
  settleTokens(grantId: string, day: string, held: number, spent: number): Promise<void>;
  /** Forgets the rows that say nothing any more: a window started before `before`, a day other than `today`. Answers how many. */
  forgetIdle(before: number, today: string): Promise<number>;
}

/**
 * The records a Bearer call stands on, read in one statement: a remote store answers in one round
 * trip what would take three reads. Each answer is what the separate reads would answer at that
 * moment (nothing is kept between calls), so a revoke counts from the next call as before.
 */
export interface BearerRecordRepository {
  /** A token's grant, its subject, and the oauthState row under `endedKey` (when given). */
  forToken(accessRequestId: string, userId: string, endedKey: string | null): Promise<{ record?: AccessRequestRecord; user?: UserRecord; ended?: OAuthStateRecord }>;
  /** The API key with this hash (the first stored, as findByHash), its grant and its owner. */
  forKey(keyHash: string): Promise<{ key?: ApiKeyRecord; record?: AccessRequestRecord; user?: UserRecord }>;
}

export interface Repositories extends RepositorySet {
  /**
   * Where login failures are counted when other processes serve the same data (a team server);
   * absent, this process is the only one, and the login service counts them in memory.
   */
  loginFailures?: LoginFailureRepository;
  /** Held tool calls where every replica sees them (a team server); absent, they live in this process only. */
  heldCalls?: HeldCallRepository;
  /** Per-grant usage where every replica counts it (a team server); absent, this process counts it. */
  grantUsage?: GrantUsageRepository;
  /**
   * The Bearer check's reads in one statement (a team server, whose replica also keeps them in
   * memory under a lease: postgres/leases.ts); absent, they are read one by one.
   */
  bearerRecords?: BearerRecordRepository;
  /**
   * Runs `fn` as one atomic change across repositories: every write in it becomes durable
   * together or not at all, and its reads see its own writes and every change acknowledged before
   * it. Throwing in `fn` keeps nothing of it. `fn` uses only the repositories it is given and
   * awaits nothing else (no network, no timers), and has no effect outside them, because:
   * - the file store (on disk or in memory) runs transactions one at a time, so every other write
   *   waits while `fn` runs; it runs `fn` exactly once, never again;
   * - PostgreSQL runs it SERIALIZABLE beside other transactions (on this and other replicas), and
   *   after a conflict rolls it back and runs `fn` again from the start, for up to about 2 s.
   * Never start a transaction inside `fn`: under tests both backends refuse it at once; in the
   * daemon the file store refuses it after waiting 10 s for its turn (it would wait for itself),
   * and PostgreSQL would run it as a separate transaction, outside `fn`'s atomic change.
   */
  transaction<R>(fn: (repos: RepositorySet) => Promise<R>): Promise<R>;
  /**
   * Runs `fn` while holding a lock named `name` that every process on the same data holds to (a
   * team server's replicas: a PostgreSQL advisory lock); `fn` may await the network, and reads
   * what others committed before it got the lock. Absent, this process is the only one, and the
   * caller's own single-flight is enough.
   */
  exclusive?<R>(name: string, fn: () => Promise<R>): Promise<R>;
}
