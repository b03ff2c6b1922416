import { AsyncLocalStorage } from 'node:async_hooks';
import { performance } from 'node:perf_hooks';
import { createHash, randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import type pg from 'pg';
import type { AliasRecord, OAuthClientRecord, OAuthStateRecord, ProviderRecord, PullRecord, ToolCache } from '../records.js';
import {
  type AccessRequestRepository,
  type ApiKeyRepository,
  type BearerRecordRepository,
  type DraftCaps,
  draftCapFromCounts,
  type DraftInsert,
  type GrantUsageRepository,
  type HeldCallRepository,
  type LoginFailureEntry,
  type LoginFailureRepository,
  type McpToolCacheRepository,
  type RecordRepository,
  type Repositories,
  type RepositorySet,
  type SharedHeldCall,
  type UserRepository,
  type ValueRepository,
} from '../repositories.js';
import type { AccessRequestRecord, ApiKeyRecord, DbMeta, McpInstanceRecord, SessionRecord, UserRecord } from '../schema.js';
import { StoreUnavailableError } from '../durable-file.js';
import { deepFreeze } from '../tables.js';
import { connectionLost, isRetryable, storeError } from './errors.js';
import { AckWaiter, committedNumber, guards, numberedCommit } from './leases.js';
import { noticeFor } from './notices.js';

/**
 * The repositories over PostgreSQL: the team server's backend, held to the same contract as the
 * file store's (repositories.test.ts runs against both). Tables are those of migrations.ts.
 *
 * Writes run in SERIALIZABLE transactions, run again (a few times, after a short random pause)
 * when PostgreSQL reports a conflict: a transaction's checks and writes then behave as if
 * transactions ran one at a time, which is what the file store's single writer gives, across every
 * replica on the database. `update` reads the row FOR UPDATE, so of two decisions on one draft
 * exactly one sees `draft`; `insertDraft` counts the undecided drafts and inserts in one such
 * transaction, so two replicas never both fill the last place. Reads outside a transaction are
 * single statements and see what is committed.
 *
 * `onChange` listeners hear every change this process commits, once it is committed. Changes
 * committed by other replicas reach them through `followChanges` (changes.ts), when it runs.
 */

/** one committed change, told to listeners */
export interface Change {
  table: string;
  key: string;
  record: unknown;
}

type Listener = (key: string, record: unknown) => void;
/** the channel on which replicas tell each other what they changed (changes.ts) */
export const CHANNEL = 'svc_changes';
type Query = (sql: string, params?: unknown[]) => Promise<pg.QueryResult>;

/**
 * A serializable transaction that conflicts is run again, with a growing random pause: under
 * contention on one row (twenty logins failing at once) only one of the writers commits per round,
 * so a fixed small number of tries would turn busy moments into errors. It is given up, as
 * store_unavailable, only after RETRY_MS.
 */
const MAX_ATTEMPTS = 60;
/** What a writer is told when the database took its COMMIT but the answer never came back. */
const COMMIT_UNKNOWN = 'The database did not confirm the change (the connection was lost after it was sent): it may have been saved. Look before trying again.';
const RETRY_MS = 2_000;
/** Set while a transaction's `fn` runs, in tests only (see store.ts for why not in the daemon). */
const inTransaction = process.env.NODE_ENV === 'test' ? new AsyncLocalStorage<boolean>() : null;
const nestedTransaction = () => new Error('a transaction was started inside another one: use the repositories the transaction gives');

/** What every repository of one postgresRepositories() shares: the pool, the listeners, the origin. */
export class PostgresShared {
  readonly listeners = new Map<string, Listener[]>();
  /** the writer's side of the Bearer leases: waits for the other replicas' acknowledgements */
  readonly acks: AckWaiter;
  /** drops what this replica keeps of records it changed itself, as soon as they are committed */
  dropKept: ((changes: [string, string][]) => void) | null = null;

  constructor(
    readonly pool: pg.Pool,
    /** this process's name in notices (changes.ts skips its own) */
    readonly origin: string,
  ) {
    this.acks = new AckWaiter(origin, (sql, params) => this.read(sql, params));
  }

  listen(table: string, fn: Listener): void {
    const list = this.listeners.get(table) ?? [];
    list.push(fn);
    this.listeners.set(table, list);
  }

  tell(changes: Change[]): void {
    for (const c of changes) for (const fn of this.listeners.get(c.table) ?? []) fn(c.key, c.record);
  }

  /**
   * One statement on the pool, outside any transaction: a read, or a write that is atomic alone (an
   * upsert). A `name` makes it a prepared statement, parsed and planned once per connection: for
   * the statements every call runs.
   */
  async read(sql: string, params: unknown[], name?: string): Promise<pg.QueryResult> {
    try {
      return await (name ? this.pool.query({ name, text: sql, values: params }) : this.pool.query(sql, params));
    } catch (err) {
      throw storeError(err);
    }
  }

  /**
   * Runs `fn` in a SERIALIZABLE transaction on one client, again after a conflict, and tells the
   * listeners its changes once it committed. A client whose connection failed is thrown away.
   */
  async transaction<R>(fn: (tx: TxState) => Promise<R>): Promise<R> {
    const { result, numbered } = await this.commitOnce(fn);
    // a change the Bearer check depends on is answered once no replica can answer from memory before it
    if (numbered) await this.acks.wait(numbered.n, numbered.at, numbered.pending);
    return result;
  }

  /** `fn` in a transaction that committed, with the number of its guarded change (leases.ts), if it made one. */
  private async commitOnce<R>(fn: (tx: TxState) => Promise<R>): Promise<{ result: R; numbered: Numbered | null }> {
    if (inTransaction?.getStore()) throw nestedTransaction();
    const began = Date.now();
    for (let attempt = 1; ; attempt++) {
      let client: pg.PoolClient;
      try {
        client = await this.pool.connect();
      } catch (err) {
        throw storeError(err);
      }
      const tx = new TxState(client);
      // A checked-out client that loses its connection between two statements reports it as an
      // event (the pool listens only to idle ones): unheard, it would end the process.
      const lost = (err: Error) => void (tx.failure ??= err);
      client.on('error', lost);
      let broken = false;
      try {
        await tx.query('BEGIN ISOLATION LEVEL SERIALIZABLE');
        const result = await (inTransaction ? inTransaction.run(true, () => fn(tx)) : fn(tx));
        // a failed statement that `fn` caught still fails the transaction, and says why
        if (tx.failure) throw tx.failure;
        const numbered = await this.commit(client, tx);
        this.dropKept?.(tx.changes.map((c) => [c.table, c.key]));
        this.tell(tx.changes);
        return { result, numbered };
      } catch (err) {
        const cause = tx.failure ?? err;
        broken = connectionLost(cause);
        if (!broken) await client.query('ROLLBACK').catch(() => (broken = true));
        // a numbered COMMIT that failed may have committed: its change is not told as failed (and
        // so not found made by a second try) before the other replicas can have dropped it
        if (tx.numbering && !isRetryable(cause)) await this.acks.waitForLatest();
        if (isRetryable(cause) && attempt < MAX_ATTEMPTS && Date.now() - began < RETRY_MS) {
          await sleep(Math.random() * Math.min(50, 2 ** attempt));
          continue;
        }
        // A connection lost with the COMMIT sent may have lost only its answer: say so, rather
        // than that nothing changed.
        if (tx.committing && broken) throw new StoreUnavailableError(storeError(cause), COMMIT_UNKNOWN);
        throw storeError(cause);
      } finally {
        client.off('error', lost);
        client.release(broken);
      }
    }
  }

  /**
   * COMMITs, with the notice of `changes` in the same round trip: PostgreSQL delivers it exactly
   * when the transaction commits, and never for one that does not. A change the Bearer check
   * depends on is numbered in the same round trip (leases.ts).
   */
  private async commit(client: pg.PoolClient, tx: TxState): Promise<Numbered | null> {
    const { changes } = tx;
    tx.committing = true;
    if (!changes.length) {
      await client.query('COMMIT');
      return null;
    }
    const notice = client.escapeLiteral(noticeFor(this.origin, changes));
    if (!changes.some((c) => guards(c.table, c.key))) {
      await client.query(`SELECT pg_notify('${CHANNEL}', ${notice}); COMMIT`);
      return null;
    }
    tx.numbering = true;
    const results = (await client.query(numberedCommit(CHANNEL, notice, this.origin))) as unknown as pg.QueryResult[];
    return { ...committedNumber(results), at: performance.now() };
  }
}

/** A guarded commit: its number, when it was answered, and the replicas it found yet to acknowledge it. */
interface Numbered {
  n: number;
  at: number;
  pending: string[];
}

/** The running transaction: its client, its changes so far, and the first statement that failed. */
class TxState {
  readonly changes: Change[] = [];
  failure: unknown = null;
  /** the COMMIT was sent: a connection lost from here on may have lost only its answer */
  committing = false;
  /** the numbered COMMIT was sent (leases.ts): a failure from here on may come after it committed */
  numbering = false;

  constructor(private readonly client: pg.PoolClient) {}

  readonly query: Query = async (sql, params) => {
    try {
      return await this.client.query(sql, params);
    } catch (err) {
      this.failure ??= err;
      throw storeError(err);
    }
  };
}

/** Where a repository works: on its own (each write a transaction of its own) or in a transaction. */
interface Scope {
  shared: PostgresShared;
  tx?: TxState;
}

const read = (scope: Scope, sql: string, params: unknown[]) => (scope.tx ? scope.tx.query(sql, params) : scope.shared.read(sql, params));
const write = <R>(scope: Scope, fn: (tx: TxState) => Promise<R>): Promise<R> => (scope.tx ? fn(scope.tx) : scope.shared.transaction(fn));

/** A record as stored and read back: what JSON keeps of it, frozen. */
const stored = <T>(record: T): T => deepFreeze(JSON.parse(JSON.stringify(record)) as T);

/** How a collection is laid out: its table, its key, and the columns its lookups use. */
export interface TableSpec<T> {
  table: string;
  keyOf: ((record: T) => string) | null;
  columns?: Record<string, (record: T) => string | number | null>;
}

const msOf = (iso: string | null | undefined) => {
  const t = iso ? Date.parse(iso) : NaN;
  return Number.isFinite(t) ? t : null;
};

export const TABLES = {
  users: { table: 'users', keyOf: (u) => u.id, columns: { username_lower: (u) => u.username.toLowerCase() } } as TableSpec<UserRecord>,
  sessions: { table: 'sessions', keyOf: (s) => s.id_hash, columns: { user_id: (s) => s.user_id } } as TableSpec<SessionRecord>,
  access_requests: {
    table: 'access_requests',
    keyOf: (r) => r.id,
    columns: { app_client_id: (r) => r.app_client_id, status: (r) => r.status, user_id: (r) => r.user_id, expires_ms: (r) => msOf(r.expires_at) },
  } as TableSpec<AccessRequestRecord>,
  api_keys: { table: 'api_keys', keyOf: (k) => k.id, columns: { key_hash: (k) => k.key_hash, access_request_id: (k) => k.access_request_id } } as TableSpec<ApiKeyRecord>,
  oauth_clients: { table: 'oauth_clients', keyOf: (c) => c.client_id } as TableSpec<OAuthClientRecord>,
  oauth_state: { table: 'oauth_state', keyOf: (r) => `${r.model}:${r.id}`, columns: { model: (r) => r.model, grant_id: (r) => r.grant_id, expires_at: (r) => r.expires_at } } as TableSpec<OAuthStateRecord>,
  providers: { table: 'providers', keyOf: (p) => p.name } as TableSpec<ProviderRecord>,
  mcp_instances: { table: 'mcp_instances', keyOf: (m) => m.id } as TableSpec<McpInstanceRecord>,
  mcp_tools: { table: 'mcp_tools', keyOf: null } as TableSpec<ToolCache>,
  model_aliases: { table: 'model_aliases', keyOf: (a) => a.id } as TableSpec<AliasRecord>,
  model_pulls: { table: 'model_pulls', keyOf: (p) => p.id } as TableSpec<PullRecord>,
  held_calls: { table: 'held_calls', keyOf: (c) => c.id, columns: { status: (c) => c.view.status, created_ms: (c) => Date.parse(c.view.created_at) } } as TableSpec<SharedHeldCall>,
};

/** INSERT or replace one record (keeping the order it was first stored in), with its columns. */
export async function putRow<T>(query: Query, spec: TableSpec<T>, key: string, record: T): Promise<void> {
  const names = Object.keys(spec.columns ?? {});
  const values = names.map((n) => spec.columns![n](record));
  const cols = ['key', 'record', ...names].join(', ');
  const params = names.map((_, i) => `$${i + 3}`);
  const set = ['record = EXCLUDED.record', ...names.map((n) => `${n} = EXCLUDED.${n}`)].join(', ');
  await query(`INSERT INTO ${spec.table} (${cols}) VALUES ($1, $2${params.length ? `, ${params.join(', ')}` : ''}) ON CONFLICT (key) DO UPDATE SET ${set}`, [key, JSON.stringify(record), ...values]);
}

class PgRecords<T> implements RecordRepository<T> {
  constructor(
    protected readonly scope: Scope,
    protected readonly spec: TableSpec<T>,
  ) {}

  protected get table() {
    return this.spec.table;
  }

  /** the first record a query answers, or undefined */
  protected async one(sql: string, params: unknown[]): Promise<T | undefined> {
    const res = await read(this.scope, sql, params);
    return res.rows.length ? deepFreeze(res.rows[0].record as T) : undefined;
  }

  protected async many(sql: string, params: unknown[]): Promise<T[]> {
    const res = await read(this.scope, sql, params);
    return res.rows.map((r) => deepFreeze(r.record as T));
  }

  get(key: string) {
    return this.one(`SELECT record FROM ${this.table} WHERE key = $1`, [key]);
  }

  list() {
    return this.many(`SELECT record FROM ${this.table} ORDER BY seq`, []);
  }

  async count() {
    const res = await read(this.scope, `SELECT count(*)::int AS n FROM ${this.table}`, []);
    return res.rows[0].n as number;
  }

  put(record: T) {
    return this.putUnder(this.spec.keyOf!(record), record);
  }

  /** stores `record` under `key` (the key a record without one of its own is given) */
  putUnder(key: string, record: T): Promise<T> {
    const kept = stored(record);
    return write(this.scope, async (tx) => {
      await putRow(tx.query, this.spec, key, kept);
      tx.changes.push({ table: this.table, key, record: kept });
      return kept;
    });
  }

  delete(key: string) {
    return write(this.scope, async (tx) => {
      const res = await tx.query(`DELETE FROM ${this.table} WHERE key = $1`, [key]);
      if (!res.rowCount) return false;
      tx.changes.push({ table: this.table, key, record: undefined });
      return true;
    });
  }

  update(key: string, change: (record: T) => void) {
    return write(this.scope, async (tx) => {
      const res = await tx.query(`SELECT record FROM ${this.table} WHERE key = $1 FOR UPDATE`, [key]);
      if (!res.rows.length) return undefined;
      const current = res.rows[0].record as T;
      // a copy, stored only if `change` returns: a refusal halfway leaves nothing behind
      const next = structuredClone(current);
      change(next);
      // nothing changed, nothing written (and no listener called)
      if (isDeepStrictEqual(next, current)) return deepFreeze(current);
      const kept = stored(next);
      await putRow(tx.query, this.spec, key, kept);
      tx.changes.push({ table: this.table, key, record: kept });
      return kept;
    });
  }

  onChange(fn: (key: string, record: T | undefined) => void) {
    this.scope.shared.listen(this.table, fn as Listener);
  }
}

class PgAccessRequests extends PgRecords<AccessRequestRecord> implements AccessRequestRepository {
  constructor(scope: Scope) {
    super(scope, TABLES.access_requests);
  }

  insertDraft(record: AccessRequestRecord, caps: DraftCaps, now: number): Promise<DraftInsert> {
    const kept = stored(record);
    return write(this.scope, async (tx): Promise<DraftInsert> => {
      // Serializable: a draft another replica inserts meanwhile makes one of the two run again.
      const res = await tx.query(
        "SELECT count(*) FILTER (WHERE app_client_id = $1)::int AS mine, count(*)::int AS everyone FROM access_requests WHERE status = 'draft' AND expires_ms > $2",
        [record.app_client_id, now],
      );
      const full = draftCapFromCounts(res.rows[0].mine as number, res.rows[0].everyone as number, caps);
      if (full) return full;
      await putRow(tx.query, this.spec, kept.id, kept);
      tx.changes.push({ table: this.table, key: kept.id, record: kept });
      return { stored: true };
    });
  }

  approvedFor(clientId: string, userId?: string) {
    return this.many(
      `SELECT record FROM access_requests WHERE app_client_id = $1 AND status = 'approved' AND ($2::text IS NULL OR user_id = $2) ORDER BY seq`,
      [clientId, userId ?? null],
    );
  }
}

class PgApiKeys extends PgRecords<ApiKeyRecord> implements ApiKeyRepository {
  constructor(scope: Scope) {
    super(scope, TABLES.api_keys);
  }

  findByHash(keyHash: string) {
    return this.one('SELECT record FROM api_keys WHERE key_hash = $1 ORDER BY seq LIMIT 1', [keyHash]);
  }
}

class PgUsers extends PgRecords<UserRecord> implements UserRepository {
  constructor(scope: Scope) {
    super(scope, TABLES.users);
  }

  findByName(username: string) {
    return this.one('SELECT record FROM users WHERE username_lower = $1 ORDER BY seq LIMIT 1', [username.toLowerCase()]);
  }
}

/** A tool cache carries no key of its own: it is stored under the instance id given. */
class PgToolCaches implements McpToolCacheRepository {
  private readonly records: PgRecords<ToolCache>;

  constructor(scope: Scope) {
    this.records = new PgRecords(scope, TABLES.mcp_tools);
  }

  get(instanceId: string) {
    return this.records.get(instanceId);
  }

  async set(instanceId: string, cache: ToolCache) {
    await this.records.putUnder(instanceId, cache);
  }

  delete(instanceId: string) {
    return this.records.delete(instanceId);
  }
}

class PgValue<T> implements ValueRepository<T> {
  constructor(
    private readonly scope: Scope,
    private readonly name: string,
    private readonly empty: T,
  ) {}

  async get() {
    const res = await read(this.scope, 'SELECT value FROM svc_values WHERE name = $1', [this.name]);
    return res.rows.length ? deepFreeze(res.rows[0].value as T) : this.empty;
  }

  async set(value: T) {
    await write(this.scope, async (tx) => {
      if (value === undefined) await tx.query('DELETE FROM svc_values WHERE name = $1', [this.name]);
      else await tx.query('INSERT INTO svc_values (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value', [this.name, JSON.stringify(value)]);
    });
  }

  async setIfUnchanged(expected: T, next: T) {
    return write(this.scope, async (tx) => {
      // the row locked while it is compared, so that of two replicas only the first changes it
      const res = await tx.query('SELECT value FROM svc_values WHERE name = $1 FOR UPDATE', [this.name]);
      const current = res.rows.length ? (res.rows[0].value as T) : this.empty;
      if (!isDeepStrictEqual(current, expected)) return false;
      if (next === undefined) await tx.query('DELETE FROM svc_values WHERE name = $1', [this.name]);
      else if (res.rows.length) await tx.query('UPDATE svc_values SET value = $2 WHERE name = $1', [this.name, JSON.stringify(next)]);
      else {
        // none yet: of two replicas inserting at once, the second finds the first's row
        const inserted = await tx.query('INSERT INTO svc_values (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [this.name, JSON.stringify(next)]);
        return inserted.rowCount === 1;
      }
      return true;
    });
  }
}

/** Login failures in one table every replica counts in, under a hash of the key. */
class PgLoginFailures implements LoginFailureRepository {
  constructor(private readonly shared: PostgresShared) {}

  modify<R>(key: string, forgetBefore: number, fn: (entry: LoginFailureEntry | undefined) => { next: LoginFailureEntry | undefined; result: R }): Promise<R> {
    const hashed = createHash('sha256').update(key).digest('base64url');
    return this.shared.transaction(async (tx) => {
      await tx.query('DELETE FROM login_failures WHERE last < $1', [forgetBefore]);
      const res = await tx.query('SELECT count, blocked_until, last FROM login_failures WHERE key = $1 FOR UPDATE', [hashed]);
      const row = res.rows[0];
      const { next, result } = fn(row ? { count: Number(row.count), blockedUntil: Number(row.blocked_until), last: Number(row.last) } : undefined);
      if (!next) await tx.query('DELETE FROM login_failures WHERE key = $1', [hashed]);
      else {
        await tx.query(
          'INSERT INTO login_failures (key, count, blocked_until, last) VALUES ($1, $2, $3, $4) ON CONFLICT (key) DO UPDATE SET count = EXCLUDED.count, blocked_until = EXCLUDED.blocked_until, last = EXCLUDED.last',
          [hashed, next.count, next.blockedUntil, next.last],
        );
      }
      return result;
    });
  }
}

/**
 * Each grant's calls in its current window and its tokens on one day, one row per grant. Every
 * change is a single upsert, atomic on its row, so replicas counting at once never lose a count.
 */
class PgGrantUsage implements GrantUsageRepository {
  constructor(private readonly shared: PostgresShared) {}

  async takeCall(grantId: string, now: number, windowMs: number, max: number) {
    // a call beyond `max` is not counted further: the row never grows past max + 1
    const res = await this.shared.read(
      `INSERT INTO grant_usage AS u (grant_id, window_start, window_calls, day, day_tokens) VALUES ($1, $2, 1, '', 0)
       ON CONFLICT (grant_id) DO UPDATE SET
         window_start = CASE WHEN $2 - u.window_start >= $3 THEN $2 ELSE u.window_start END,
         window_calls = CASE WHEN $2 - u.window_start >= $3 THEN 1 ELSE LEAST(u.window_calls + 1, $4 + 1) END
       RETURNING window_start, window_calls`,
      [grantId, now, windowMs, max],
    );
    const row = res.rows[0] as { window_start: string; window_calls: number };
    return { allowed: row.window_calls <= max, windowStart: Number(row.window_start) };
  }

  async addTokens(grantId: string, day: string, tokens: number) {
    await this.shared.read(
      `INSERT INTO grant_usage AS u (grant_id, window_start, window_calls, day, day_tokens) VALUES ($1, 0, 0, $2, $3)
       ON CONFLICT (grant_id) DO UPDATE SET
         day_tokens = CASE WHEN u.day = $2 THEN u.day_tokens + $3 ELSE $3 END,
         day_held = CASE WHEN u.day = $2 THEN u.day_held ELSE 0 END,
         day = $2`,
      [grantId, day, tokens],
    );
  }

  async reserveTokens(grantId: string, day: string, tokens: number, budget: number) {
    // what is spent and reserved on the row's day is compared and added to in one statement; a
    // new day starts both again
    const res = await this.shared.read(
      `INSERT INTO grant_usage AS u (grant_id, window_start, window_calls, day, day_tokens, day_held) VALUES ($1, 0, 0, $2, 0, $3)
       ON CONFLICT (grant_id) DO UPDATE SET
         day_held = CASE WHEN u.day = $2 THEN u.day_held + $3 ELSE $3 END,
         day_tokens = CASE WHEN u.day = $2 THEN u.day_tokens ELSE 0 END,
         day = $2
       WHERE u.day <> $2 OR u.day_tokens + u.day_held < $4
       RETURNING day_held`,
      [grantId, day, tokens, budget],
    );
    return res.rows.length > 0;
  }

  async settleTokens(grantId: string, day: string, held: number, spent: number) {
    // (a row gone on to another day meanwhile is left as it is: what was held went with its day)
    await this.shared.read('UPDATE grant_usage SET day_held = GREATEST(0, day_held - $3), day_tokens = day_tokens + $4 WHERE grant_id = $1 AND day = $2', [grantId, day, held, spent]);
  }

  async forgetIdle(before: number, today: string) {
    const res = await this.shared.read('DELETE FROM grant_usage WHERE window_start < $1 AND day <> $2', [before, today]);
    return res.rowCount ?? 0;
  }

  async tokensOn(grantId: string, day: string) {
    const res = await this.shared.read('SELECT day_tokens FROM grant_usage WHERE grant_id = $1 AND day = $2', [grantId, day]);
    return res.rows.length ? Number(res.rows[0].day_tokens) : 0;
  }
}

/**
 * The Bearer check's records in one statement each: a call then waits for one round trip, and one
 * server process, instead of three. What a replica keeps of them, under its lease, is
 * bearer-cache.ts's; this reads the database each time it is asked.
 */
class PgBearerRecords implements BearerRecordRepository {
  constructor(private readonly shared: PostgresShared) {}

  async forToken(accessRequestId: string, userId: string, endedKey: string | null) {
    const res = await this.shared.read(
      `SELECT (SELECT record FROM access_requests WHERE key = $1) AS grant_record,
              (SELECT record FROM users WHERE key = $2) AS user_record,
              (SELECT record FROM oauth_state WHERE key = $3) AS ended_record`,
      [accessRequestId, userId, endedKey],
      'svc_bearer_token',
    );
    const row = res.rows[0] as { grant_record: AccessRequestRecord | null; user_record: UserRecord | null; ended_record: OAuthStateRecord | null };
    return { record: frozenOrUndefined(row.grant_record), user: frozenOrUndefined(row.user_record), ended: frozenOrUndefined(row.ended_record) };
  }

  async forKey(keyHash: string) {
    const res = await this.shared.read(
      `SELECT k.record AS key_record, a.record AS grant_record, u.record AS user_record FROM api_keys k
         LEFT JOIN access_requests a ON a.key = k.access_request_id
         LEFT JOIN users u ON u.key = k.record->>'user_id'
       WHERE k.key_hash = $1 ORDER BY k.seq LIMIT 1`,
      [keyHash],
      'svc_bearer_key',
    );
    const row = res.rows[0] as { key_record: ApiKeyRecord; grant_record: AccessRequestRecord | null; user_record: UserRecord | null } | undefined;
    return row ? { key: deepFreeze(row.key_record), record: frozenOrUndefined(row.grant_record), user: frozenOrUndefined(row.user_record) } : {};
  }
}

const frozenOrUndefined = <T>(record: T | null): T | undefined => (record === null ? undefined : deepFreeze(record));

function repositorySet(scope: Scope): RepositorySet {
  return {
    accessRequests: new PgAccessRequests(scope),
    apiKeys: new PgApiKeys(scope),
    users: new PgUsers(scope),
    sessions: new PgRecords(scope, TABLES.sessions),
    mcpInstances: new PgRecords(scope, TABLES.mcp_instances),
    mcpTools: new PgToolCaches(scope),
    oauthClients: new PgRecords(scope, TABLES.oauth_clients),
    oauthState: new PgRecords(scope, TABLES.oauth_state),
    providers: new PgRecords(scope, TABLES.providers),
    modelAliases: new PgRecords(scope, TABLES.model_aliases),
    modelPulls: new PgRecords(scope, TABLES.model_pulls),
    meta: new PgValue<DbMeta | null>(scope, 'meta', null),
    signingKeys: new PgValue<string | undefined>(scope, 'oauth_keys', undefined),
  };
}

export interface PostgresRepositories extends Repositories {
  /** the pool and listeners these repositories share (changes.ts follows other replicas through it) */
  readonly shared: PostgresShared;
}

/**
 * Every feature's repository over `pool`, whose database migrate() has brought to the current
 * schema. The pool is the caller's to end.
 */
export function postgresRepositories(pool: pg.Pool, origin = newOrigin()): PostgresRepositories {
  const shared = new PostgresShared(pool, origin);
  const scope0: Scope = { shared };
  return {
    ...repositorySet({ shared }),
    shared,
    loginFailures: new PgLoginFailures(shared),
    heldCalls: new PgRecords(scope0, TABLES.held_calls) as HeldCallRepository,
    grantUsage: new PgGrantUsage(shared),
    bearerRecords: new PgBearerRecords(shared),
    transaction: (fn) => shared.transaction((tx) => fn(repositorySet({ shared, tx }))),
    exclusive: (name, fn) => exclusive(pool, name, fn),
  };
}

/**
 * `fn` under a session advisory lock on a connection of its own, taken from the pool and held
 * for `fn`'s time (its reads go through other connections, and see what was committed before
 * the lock was granted).
 */
async function exclusive<R>(pool: pg.Pool, name: string, fn: () => Promise<R>): Promise<R> {
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    throw storeError(err);
  }
  let broken = false;
  const lost = () => void (broken = true);
  client.on('error', lost);
  try {
    await client.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [name]).catch((err: unknown) => {
      broken = true;
      throw storeError(err);
    });
    try {
      return await fn();
    } finally {
      await client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [name]).catch(() => (broken = true));
    }
  } finally {
    client.off('error', lost);
    // a connection whose unlock failed is thrown away: its lock goes with it
    client.release(broken);
  }
}

/** A name for this process in change notifications, so that it skips its own. */
export const newOrigin = () => randomBytes(9).toString('base64url');
