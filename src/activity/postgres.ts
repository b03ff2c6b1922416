import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { Logger } from '../log.js';
import { connectionLost, storeError } from '../store/postgres/errors.js';
import { LOCK_NAMESPACE, LOCKS } from '../store/postgres/migrations.js';
import { type ActivityEvent, activityEvent, type GrantUsage } from './schemas.js';
import { type ActivityBounds, type ActivityQuery, type ActivityStore, emptyTotals, type GrantTotals, localDay, usageFromTotals } from './store.js';

/**
 * The activity of a team server, in its PostgreSQL (tables of migration step 4), so every replica
 * lists every replica's events and a grant's totals are the team's.
 *
 * Recording never waits for the database: events wait in memory and are written a second's worth
 * at a time (sooner once FLUSH_EVENTS wait), one transaction per batch. A batch that cannot be
 * written (the database down) is kept for the next try, up to MAX_PENDING events; beyond that the
 * oldest are dropped, and said so in the log. A call is never failed for its event.
 *
 * A batch carries an id of its own, stored with it (`activity_batches`), and a batch whose write
 * failed is tried again as it was, same id and same events: when the failure was only the lost
 * answer to a COMMIT that went through, the second try finds its id and writes nothing, so no
 * event is counted twice. The ids are kept a week.
 *
 * Writers take one advisory lock for their transaction, so batches commit in the order their ids
 * were drawn: a reader never sees an id before a smaller one that is still to commit, and
 * following with `after` misses nothing. The lock is held for one insert and one upsert.
 *
 * Each grant's totals are a row of `activity_totals`, added to in the batch's transaction and taken
 * from, in the same statement, as retention deletes events: reading them is one row, however many
 * events the table holds. Retention deletes at most DELETE_BATCH events a transaction, under the
 * same lock, so writers wait for one batch at most.
 */

/** How often waiting events are written. */
const FLUSH_MS = 1000;
/** A write starts sooner once this many wait. */
const FLUSH_EVENTS = 500;
/** What waits in memory while the database cannot take it; past it the oldest go. */
const MAX_PENDING = 20_000;
/** Events deleted per retention transaction, and at most this many batches per sweep. */
const DELETE_BATCH = 5_000;
const MAX_BATCHES = 200;
const DAY_MS = 24 * 60 * 60 * 1000;
/** How long a written batch's id is kept: far longer than any batch waits to be tried again. */
const BATCH_IDS_KEPT = "interval '7 days'";
/** The fields of an event in the order the API answers them (jsonb keeps its own order). */
const FIELDS = Object.keys(activityEvent.shape) as (keyof ActivityEvent)[];

type Pending = Omit<ActivityEvent, 'id'>;

/** A batch as first tried, and as tried again after a failure. */
interface Batch {
  id: string;
  events: Pending[];
}

interface TotalsRow {
  calls: string;
  refused: string;
  tokens_in: string;
  tokens_out: string;
  last_used_at: Date | null;
  day: string;
  today_calls: string;
  today_tokens: string;
}

/** One batch's additions to each grant's totals: per grant, the counts, and those of its newest day in the batch. */
function batchTotals(batch: Pending[]) {
  const by = new Map<string, { calls: number; refused: number; tin: number; tout: number; last: string; day: string; todayCalls: number; todayTokens: number }>();
  for (const e of batch) {
    const day = localDay(Date.parse(e.time));
    const tokens = (e.tokens_in ?? 0) + (e.tokens_out ?? 0);
    const t = by.get(e.access_request_id) ?? { calls: 0, refused: 0, tin: 0, tout: 0, last: e.time, day, todayCalls: 0, todayTokens: 0 };
    t.calls++;
    if (e.outcome === 'refused') t.refused++;
    t.tin += e.tokens_in ?? 0;
    t.tout += e.tokens_out ?? 0;
    if (e.time > t.last) t.last = e.time;
    if (day > t.day) Object.assign(t, { day, todayCalls: 0, todayTokens: 0 });
    if (day === t.day) {
      t.todayCalls++;
      t.todayTokens += tokens;
    }
    by.set(e.access_request_id, t);
  }
  // in key order: no two writers could lock the same rows in opposite orders (they take the lock anyway)
  return [...by.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

const INSERT_EVENTS = `INSERT INTO activity_events (time, day, access_request_id, app_client_id, "user", kind, outcome, tokens_in, tokens_out, event)
SELECT time, day, grant_id, client, username, kind, outcome, tin, tout, event
FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::bigint[], $10::jsonb[])
  WITH ORDINALITY AS e(time, day, grant_id, client, username, kind, outcome, tin, tout, event, n)
ORDER BY n`;

// A day later than the row's starts its `today` again; an earlier one (a late batch) adds to no day.
const ADD_TOTALS = `INSERT INTO activity_totals AS t (access_request_id, calls, refused, tokens_in, tokens_out, last_used_at, day, today_calls, today_tokens)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::timestamptz[], $7::text[], $8::bigint[], $9::bigint[])
ON CONFLICT (access_request_id) DO UPDATE SET
  calls = t.calls + EXCLUDED.calls,
  refused = t.refused + EXCLUDED.refused,
  tokens_in = t.tokens_in + EXCLUDED.tokens_in,
  tokens_out = t.tokens_out + EXCLUDED.tokens_out,
  last_used_at = GREATEST(t.last_used_at, EXCLUDED.last_used_at),
  day = GREATEST(t.day, EXCLUDED.day),
  today_calls = CASE WHEN EXCLUDED.day > t.day THEN EXCLUDED.today_calls WHEN EXCLUDED.day = t.day THEN t.today_calls + EXCLUDED.today_calls ELSE t.today_calls END,
  today_tokens = CASE WHEN EXCLUDED.day > t.day THEN EXCLUDED.today_tokens WHEN EXCLUDED.day = t.day THEN t.today_tokens + EXCLUDED.today_tokens ELSE t.today_tokens END`;

/**
 * Deletes one batch of the events `victims` selects and takes them from their grants' totals in
 * the same statement; answers how many went and the grants left with none. Today's counts stay as
 * they are: they are what the tokens-a-day limit reads, and an event dropped by the count bound
 * was still spent today (or an app could flood cheap calls until its spending is dropped, and have
 * its budget back). A new day starts them again.
 */
const deleteBatch = (victims: string) => `WITH gone AS (
  DELETE FROM activity_events WHERE id IN (${victims}) RETURNING access_request_id, outcome, tokens_in, tokens_out, day
), sums AS (
  SELECT g.access_request_id, count(*) AS calls, count(*) FILTER (WHERE g.outcome = 'refused') AS refused,
    coalesce(sum(g.tokens_in), 0) AS tin, coalesce(sum(g.tokens_out), 0) AS tout
  FROM gone g GROUP BY g.access_request_id
), changed AS (
  UPDATE activity_totals t SET calls = t.calls - s.calls, refused = t.refused - s.refused, tokens_in = t.tokens_in - s.tin, tokens_out = t.tokens_out - s.tout
  FROM sums s WHERE t.access_request_id = s.access_request_id
  RETURNING t.access_request_id, t.calls
)
SELECT (SELECT count(*) FROM gone)::int AS removed, coalesce((SELECT array_agg(access_request_id) FROM changed WHERE calls <= 0), '{}') AS emptied`;

export class PostgresActivity implements ActivityStore {
  private pending: Pending[] = [];
  /** the batch being written, kept as it is until a try succeeds */
  private inflight: Batch | null = null;
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  private trimming: Promise<number> | null = null;
  private sinceTrim = 0;
  private dropped = 0;
  private closed = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly bounds: ActivityBounds,
    private readonly clock: () => number,
    private readonly logger: Logger,
  ) {}

  record(event: Pending): void {
    if (this.closed) return;
    this.pending.push(event);
    if (this.pending.length > MAX_PENDING) {
      this.dropped += this.pending.length - MAX_PENDING;
      this.pending.splice(0, this.pending.length - MAX_PENDING);
    }
    if (this.pending.length >= FLUSH_EVENTS) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), FLUSH_MS).unref();
  }

  flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.flushing ??= this.writePending().finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  private async writePending(): Promise<void> {
    while (this.pending.length > 0 || this.inflight) {
      const batch = (this.inflight ??= { id: randomUUID(), events: this.pending.slice(0, FLUSH_EVENTS * 4) });
      try {
        await this.write(batch);
      } catch (err) {
        // kept, as it is, for the next try; the timer brings it, as it would new events
        this.logger.warn({ events: batch.events.length, err: (err as Error).message }, 'activity: could not write events to the database; will try again');
        if (!this.closed) this.timer ??= setTimeout(() => void this.flush(), FLUSH_MS).unref();
        return;
      }
      this.inflight = null;
      // what came while writing stays (and what was dropped meanwhile is gone either way)
      const written = new Set(batch.events);
      this.pending = this.pending.filter((e) => !written.has(e));
      this.sinceTrim += batch.events.length;
    }
    if (this.dropped > 0) {
      this.logger.warn({ events: this.dropped }, 'activity: dropped events that waited too long for the database');
      this.dropped = 0;
    }
    if (this.sinceTrim > this.bounds.maxEvents / 10 + 100) void this.dropOld().catch((err: Error) => this.logger.warn({ err: err.message }, 'activity: could not remove old events'));
  }

  private async write({ id, events: batch }: Batch): Promise<void> {
    const col = <T>(fn: (e: Pending) => T) => batch.map(fn);
    const totals = batchTotals(batch);
    await this.locked(async (client) => {
      // written already, by a try whose COMMIT went through but whose answer was lost
      if (!(await client.query('INSERT INTO activity_batches (id) VALUES ($1) ON CONFLICT DO NOTHING', [id])).rowCount) return;
      await client.query(INSERT_EVENTS, [
        col((e) => e.time),
        col((e) => localDay(Date.parse(e.time))),
        col((e) => e.access_request_id),
        col((e) => e.app_client_id),
        col((e) => e.user),
        col((e) => e.kind),
        col((e) => e.outcome),
        col((e) => e.tokens_in ?? null),
        col((e) => e.tokens_out ?? null),
        col((e) => JSON.stringify(e)),
      ]);
      const t = totals.map(([, v]) => v);
      await client.query(ADD_TOTALS, [
        totals.map(([k]) => k),
        t.map((v) => v.calls),
        t.map((v) => v.refused),
        t.map((v) => v.tin),
        t.map((v) => v.tout),
        t.map((v) => v.last),
        t.map((v) => v.day),
        t.map((v) => v.todayCalls),
        t.map((v) => v.todayTokens),
      ]);
    });
  }

  /** Runs `fn` in a transaction holding the activity lock; a client whose connection failed is thrown away. */
  private async locked<R>(fn: (client: pg.PoolClient) => Promise<R>): Promise<R> {
    const client = await this.pool.connect();
    let failure: unknown = null;
    const lost = (err: Error) => void (failure ??= err);
    client.on('error', lost);
    let broken = false;
    try {
      await client.query('BEGIN');
      await client.query('SELECT pg_advisory_xact_lock($1, $2)', [LOCK_NAMESPACE, LOCKS.activity]);
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      broken = connectionLost(failure ?? err);
      if (!broken) await client.query('ROLLBACK').catch(() => (broken = true));
      throw storeError(failure ?? err);
    } finally {
      client.off('error', lost);
      client.release(broken);
    }
  }

  async list(q: ActivityQuery): Promise<ActivityEvent[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (q.grants) {
      if (q.grants.size === 0) return [];
      params.push([...q.grants]);
      where.push(`access_request_id = ANY($${params.length}::text[])`);
    }
    if (q.since !== undefined) {
      params.push(new Date(q.since).toISOString());
      where.push(`time >= $${params.length}`);
    }
    if (q.after !== undefined) {
      params.push(q.after);
      where.push(`id > $${params.length}`);
    }
    params.push(q.limit);
    const sql = `SELECT id::text AS id, event FROM activity_events ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT $${params.length}`;
    const res = await this.query<{ id: string; event: Record<string, unknown> }>(sql, params);
    return res.rows.map((r) => {
      const all: Record<string, unknown> = { ...r.event, id: r.id };
      const out: Record<string, unknown> = {};
      for (const k of FIELDS) if (all[k] !== undefined) out[k] = all[k];
      return out as ActivityEvent;
    });
  }

  async grantTotals(grantId: string): Promise<GrantTotals> {
    return (await this.totalsOf([grantId])).get(grantId)!;
  }

  /** The totals of `grantIds` in one statement; a grant with no events has empty ones. */
  private async totalsOf(grantIds: string[]): Promise<Map<string, GrantTotals>> {
    const today = localDay(this.clock());
    const out = new Map(grantIds.map((id) => [id, emptyTotals(today)]));
    if (grantIds.length === 0) return out;
    const res = await this.query<TotalsRow & { access_request_id: string }>(
      'SELECT access_request_id, calls, refused, tokens_in, tokens_out, last_used_at, day, today_calls, today_tokens FROM activity_totals WHERE access_request_id = ANY($1)',
      [grantIds],
    );
    for (const row of res.rows) {
      const isToday = row.day === today;
      out.set(row.access_request_id, {
        calls: Number(row.calls),
        refused: Number(row.refused),
        tokens_in: Number(row.tokens_in),
        tokens_out: Number(row.tokens_out),
        last_used_at: row.last_used_at ? row.last_used_at.toISOString() : null,
        day: today,
        today_calls: isToday ? Number(row.today_calls) : 0,
        today_tokens: isToday ? Number(row.today_tokens) : 0,
      });
    }
    return out;
  }

  async usagesOf(grantIds: string[]): Promise<Map<string, GrantUsage>> {
    const totals = await this.totalsOf(grantIds);
    return new Map([...totals].map(([id, t]) => [id, usageFromTotals(t)]));
  }

  async usageOf(grantId: string): Promise<GrantUsage> {
    return usageFromTotals(await this.grantTotals(grantId));
  }

  /** One sweep at a time in this process; replicas sweeping together take turns batch by batch. */
  dropOld(): Promise<number> {
    this.trimming ??= this.trim().finally(() => {
      this.trimming = null;
    });
    return this.trimming;
  }

  private async trim(): Promise<number> {
    this.sinceTrim = 0;
    let removed = 0;
    if (this.bounds.retentionDays > 0) {
      const before = new Date(this.clock() - this.bounds.retentionDays * DAY_MS).toISOString();
      removed += await this.deleteWhile(`SELECT id FROM activity_events WHERE time < $1 LIMIT ${DELETE_BATCH}`, [before]);
    }
    // the newest maxEvents stay: the id of the first one past them, if any
    const past = await this.query<{ id: string }>('SELECT id::text AS id FROM activity_events ORDER BY id DESC OFFSET $1 LIMIT 1', [this.bounds.maxEvents]);
    if (past.rows.length) removed += await this.deleteWhile(`SELECT id FROM activity_events WHERE id <= $1 ORDER BY id LIMIT ${DELETE_BATCH}`, [past.rows[0].id]);
    await this.query(`DELETE FROM activity_batches WHERE written_at < now() - ${BATCH_IDS_KEPT}`, []);
    // a grant left with no event that spent something on its last day: kept until that day was over
    await this.query('DELETE FROM activity_totals WHERE calls <= 0 AND day < $1', [localDay(this.clock())]);
    return removed;
  }

  private async deleteWhile(victims: string, params: unknown[]): Promise<number> {
    let removed = 0;
    for (let i = 0; i < MAX_BATCHES; i++) {
      const n = await this.locked(async (client) => {
        const res = await client.query<{ removed: number; emptied: string[] }>(deleteBatch(victims), params);
        const { removed: gone, emptied } = res.rows[0];
        // a grant with no event left has no totals either (nothing grows with grants long gone)
        // (but for one that spent something today: that counts until the day is over, and goes
        // at the first trim after it)
        if (emptied.length) await client.query('DELETE FROM activity_totals WHERE access_request_id = ANY($1::text[]) AND calls <= 0 AND (today_calls <= 0 OR day < $2)', [emptied, localDay(this.clock())]);
        return gone;
      });
      removed += n;
      if (n < DELETE_BATCH) break;
    }
    return removed;
  }

  private async query<R extends pg.QueryResultRow>(sql: string, params: unknown[]): Promise<pg.QueryResult<R>> {
    try {
      return await this.pool.query<R>(sql, params);
    } catch (err) {
      throw storeError(err);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.flush();
    await this.trimming?.catch(() => undefined);
  }
}
