import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { ENDED_GRANT_MODEL } from '../records.js';
import { LOCK_NAMESPACE, LOCKS } from './migrations.js';

/**
 * Bearer leases: how a replica may answer the Bearer check from memory, and why a revoke is never
 * outlived by it.
 *
 * The Bearer check reads a grant, its user, an API key and the mark of an ended sign-in. Reading
 * them from the database on every call costs a round trip per call; keeping them in memory is safe
 * only if no replica answers from memory after a change to them has been answered. So:
 *
 * 1. Every committed change to those records ("guarded" below) is numbered in commit order: the
 *    writer takes an exclusive advisory lock just before its COMMIT, draws the next number and
 *    records it in `svc_invalidations`, and sends it with the change notice. The lock is held
 *    until the commit, so numbers commit in order and notices arrive in that order.
 * 2. A replica that hears notice n drops what it keeps of the changed records, and only then
 *    acknowledges n: at once with a notice (no write, so no wait for the disk), and in
 *    `svc_replicas.acked` at its next heartbeat, for a writer that missed the notice.
 * 3. A replica answers from memory only while it holds a lease: LEASE_MS from the moment it sent
 *    its last heartbeat that succeeded, on its own monotonic clock. A heartbeat renews the lease
 *    only if the replica has dropped every change committed so far (the highest committed number
 *    is at most what it acknowledged), and it takes the advisory lock shared: a renewal and a
 *    numbered commit never interleave, so a renewal either committed before the change (and the
 *    writer sees it) or saw the change's number.
 * 4. The writer, once committed, answers only when every replica whose lease may still run has
 *    acknowledged its number, or LEASE_MS after its commit, when every lease taken before the
 *    change has run out and none could be renewed without the acknowledgement. A writer whose
 *    COMMIT's answer was lost (it may have committed) waits so for the latest number before it
 *    fails (AckWaiter.waitForLatest), and every replica, the writer's own too, drops a change
 *    when its notice comes.
 *
 * A replica cut off from the notices (its listening connection lost or stalled) cannot renew, and
 * its lease runs out: a revoke then waits for it up to LEASE_MS, and is never outlived. A replica
 * that loses its listening connection stops answering from memory at once, and after it is back
 * drops everything it kept before it renews. What a person writes into the database by hand,
 * outside svc, is not numbered: the cache keeps an entry at most MAX_AGE_MS (bearer-cache.ts).
 */

/** How long a heartbeat that succeeded lets a replica answer from memory. */
export const LEASE_MS = 3_000;
/** A replica heartbeats three times a lease: one lost heartbeat does not end its lease. */
const HEARTBEAT_MS = LEASE_MS / 3;
/** How often a writer waiting for acknowledgements reads them again (a notice can be missed). */
const ACK_POLL_MS = 100;
/** Replicas whose acknowledgements a writer remembers before it forgets the silent ones. */
const MAX_REPLICAS_HEARD = 100;
/** Rows of replicas silent for this long are removed (each start is a new replica). */
const FORGET_REPLICA = "interval '1 day'";

/** The tables whose records the Bearer check reads, all of whose changes are numbered. */
const GUARDED_TABLES = new Set(['access_requests', 'users', 'api_keys']);
const ENDED_PREFIX = `${ENDED_GRANT_MODEL}:`;

/** Whether a change to (table, key) can change what a Bearer check answers. */
export const guards = (table: string, key: string) => GUARDED_TABLES.has(table) || (table === 'oauth_state' && key.startsWith(ENDED_PREFIX));

const lockArgs = `${LOCK_NAMESPACE}, ${LOCKS.invalidation}`;

/**
 * How far the database's clock may step forward without a writer taking a live replica for a
 * silent one: a writer waits for every replica heard from within a lease and this, and its own
 * monotonic clock ends the wait when the lease has surely run out. After a replica dies (its row
 * stays until a day has passed), writers wait for it at most a lease, for this long.
 */
const CLOCK_STEP_MS = 10_000;

/** The replicas other than `origin` whose lease may still run and who have not acknowledged `n` (SQL). */
const pendingSql = (origin: string, n: string) =>
  `SELECT origin FROM svc_replicas WHERE origin <> '${origin}' AND acked < ${n} AND heartbeat_at > now() - interval '${LEASE_MS + CLOCK_STEP_MS} milliseconds'`;

/**
 * The statements that end a guarded transaction, in one round trip: the lock, the number, the
 * notice carrying it, the COMMIT, and then (in a transaction of its own, which sees the commit)
 * the replicas that may keep what it changed. `noticeLiteral` is a JSON object's text, already
 * escaped as a literal; `origin` is base64url.
 */
export function numberedCommit(channel: string, noticeLiteral: string, origin: string): string {
  return `SELECT pg_advisory_xact_lock(${lockArgs});
WITH c AS (INSERT INTO svc_invalidations (n) VALUES (nextval('svc_invalidation_seq')) RETURNING n)
  SELECT n, pg_notify('${channel}', '{"n":' || n || ',' || substr(${noticeLiteral}, 2)) FROM c;
COMMIT;
${pendingSql(origin, "currval('svc_invalidation_seq')")}`;
}

/** A numberedCommit's number, and the replicas it found yet to acknowledge it. */
export const committedNumber = (results: pg.QueryResult[]) => ({ n: Number(results[1].rows[0].n), pending: results[3].rows.map((r) => r.origin as string) });

/** An acknowledgement notice: replica `a` has dropped every change up to `p`. */
export interface AckNotice {
  a: string;
  p: number;
}

/** Origins go into SQL text: only base64url is accepted. */
function assertOrigin(origin: string): void {
  if (!/^[A-Za-z0-9_-]+$/.test(origin)) throw new Error('a replica origin is base64url');
}

type Read = (sql: string, params: unknown[]) => Promise<pg.QueryResult>;

/**
 * The writer's side: waits, after a guarded commit numbered `n`, until every replica whose lease
 * may still run has acknowledged `n`, or until LEASE_MS after the commit.
 */
export class AckWaiter {
  private readonly waiting = new Set<() => void>();
  /**
   * The highest number each replica acknowledged, as heard. An acknowledgement can arrive before
   * the writer's own COMMIT round trip has returned, so it is kept rather than only passed to
   * writers already waiting. Acknowledgements only grow, so the highest says it all.
   */
  private readonly heardFrom = new Map<string, { p: number; at: number }>();

  constructor(
    private readonly origin: string,
    private readonly read: Read,
  ) {
    assertOrigin(origin);
  }

  /** An acknowledgement notice heard from any replica. */
  heard(ack: AckNotice): void {
    const now = performance.now();
    if (this.heardFrom.size >= MAX_REPLICAS_HEARD) this.forgetSilent(now);
    this.heardFrom.set(ack.a, { p: Math.max(ack.p, this.heardFrom.get(ack.a)?.p ?? 0), at: now });
    for (const wake of this.waiting) wake();
  }

  /** `pending`: the replicas the commit found yet to acknowledge (read again while waiting). */
  async wait(n: number, committedAt: number, pending: string[] | null): Promise<void> {
    if (pending?.length === 0) return;
    const deadline = committedAt + LEASE_MS;
    let wake: () => void = () => undefined;
    const onAck = () => wake();
    this.waiting.add(onAck);
    try {
      let lastRead = performance.now();
      for (;;) {
        // a database that cannot be asked (null): wait out the leases instead
        if (pending && pending.every((o) => (this.heardFrom.get(o)?.p ?? 0) >= n)) return;
        const left = deadline - performance.now();
        if (left <= 0) return;
        const heardOne = new Promise<void>((resolve) => (wake = resolve));
        await Promise.race([heardOne, sleep(Math.min(ACK_POLL_MS, left))]);
        // an acknowledgement notice can be missed (this replica's listening connection down)
        if (performance.now() - lastRead >= ACK_POLL_MS) {
          pending = await this.pendingOrigins(n);
          lastRead = performance.now();
        }
      }
    } finally {
      this.waiting.delete(onAck);
    }
  }

  /**
   * After a numbered COMMIT whose answer was lost (it may have committed all the same): waits as
   * for the highest number committed by now, which is at least its own if it committed, or out the
   * lease when the database cannot be asked. A writer told of the failure, then tried again and
   * finding the change made, answers without a wait of its own.
   */
  async waitForLatest(): Promise<void> {
    const at = performance.now();
    let top: number;
    try {
      top = Number((await this.read('SELECT coalesce(max(n), 0) AS top FROM svc_invalidations', [])).rows[0].top);
    } catch {
      // no database to ask again meanwhile: every lease taken before the commit runs out by then
      await sleep(Math.max(0, at + LEASE_MS - performance.now()));
      return;
    }
    await this.wait(top, at, await this.pendingOrigins(top));
  }

  /** Replicas not heard from for a minute are forgotten (each start of a replica is a new one). */
  private forgetSilent(now: number): void {
    for (const [origin, { at }] of this.heardFrom) if (now - at > 60_000) this.heardFrom.delete(origin);
  }

  private async pendingOrigins(n: number): Promise<string[] | null> {
    try {
      return (await this.read(pendingSql(this.origin, String(n)), [])).rows.map((r) => r.origin as string);
    } catch {
      return null;
    }
  }
}

/** What the lease tells the cache that depends on it. */
export interface LeaseHolder {
  /** drop what is kept of these changed records */
  drop(changes: [string, string][]): void;
  /** drop everything kept */
  clear(): void;
}

/**
 * A replica's side: the lease it holds, the highest change it has dropped, and the heartbeat
 * that renews the one and acknowledges the other.
 */
export class ReplicaLease {
  private processed = 0;
  private leaseUntil = 0;
  /**
   * The same end on the wall clock. The monotonic clock does not run while the machine or its
   * virtual machine is suspended, so a replica resumed after a long suspend would still find its
   * lease young; the wall clock did run. A wall clock stepped forward only ends a lease early (a
   * read from the database), and one stepped back is still bounded by the monotonic end.
   */
  private leaseWallUntil = 0;
  private listening = false;
  private beating = false;
  private beatAgain = false;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private holder: LeaseHolder | null = null;
  /** counts the listening connections lost: a listen() begun on an earlier one does not count */
  private connection = 0;
  private beats = 0;

  constructor(
    private readonly origin: string,
    private readonly pool: pg.Pool,
    private readonly channel: string,
  ) {
    assertOrigin(origin);
  }

  /** The cache this lease guards (one per replica). */
  hold(holder: LeaseHolder): void {
    this.holder = holder;
  }

  /** Whether kept records may answer a call now. */
  valid(): boolean {
    return this.listening && performance.now() < this.leaseUntil && Date.now() < this.leaseWallUntil;
  }

  /**
   * A numbered change was heard: drop it (`changes` null: it named only its tables, so drop
   * everything), then acknowledge it. This replica's own changes come back here too, in their
   * place in the order, so that `processed` vouches for every change before them; their writer
   * waits for no acknowledgement of its own. They are dropped here as well as when their COMMIT
   * answered: a COMMIT whose answer was lost (a connection cut, a reply timed out) may have
   * committed all the same, and then only its notice says so.
   */
  changed(n: number, changes: [string, string][] | null, own = false): void {
    if (changes) this.holder?.drop(changes);
    else this.holder?.clear();
    if (n > this.processed) this.processed = n;
    // a writer waits for the other replicas only: its own change needs no acknowledgement
    if (!own) this.acknowledge();
  }

  /**
   * A change heard without a number: from a replica of a version before the leases, during a
   * rolling upgrade (a replica of this version numbers every change guards() names). Its records
   * are dropped all the same, as soon as its notice comes; its writer waited for nobody.
   */
  heardUnnumbered(changes: [string, string][] | undefined, tables: string[] | undefined): void {
    if (changes) this.holder?.drop(changes.filter(([table, key]) => guards(table, key)));
    else if (tables?.some((table) => GUARDED_TABLES.has(table) || table === 'oauth_state')) this.holder?.clear();
  }

  /** Tells the writers what this replica has dropped: a notice only (the heartbeat records it). */
  private acknowledge(): void {
    if (this.closed) return;
    const ack = JSON.stringify({ a: this.origin, p: this.processed } satisfies AckNotice);
    // A NOTIFY commits a transaction, which would wait for the disk: not this one. The notice goes
    // out at the commit all the same, and losing it to a crash of the database loses nothing that
    // must last (it speaks of this replica's memory). A lost acknowledgement costs a writer a wait
    // (for the next heartbeat, or the lease), never safety.
    this.pool.query(`BEGIN; SET LOCAL synchronous_commit = off; SELECT pg_notify('${this.channel}', '${ack}'); COMMIT`).catch(() => undefined);
  }

  /** The listening connection is lost: notices may be missed, so nothing kept answers from now. */
  deaf(): void {
    this.listening = false;
    this.leaseUntil = 0;
    this.leaseWallUntil = 0;
    this.connection++;
    this.holder?.clear();
  }

  /**
   * The listening connection is (again) listening: what was kept may have missed changes, so it
   * is dropped, and the changes committed so far count as dropped. Then the lease is renewed. A
   * failure is tried again while that connection lasts.
   */
  async listen(): Promise<void> {
    const connection = this.connection;
    try {
      const res = await this.pool.query('SELECT coalesce(max(n), 0) AS top FROM svc_invalidations');
      if (connection !== this.connection || this.closed) return;
      this.holder?.clear();
      this.processed = Math.max(this.processed, Number(res.rows[0].top));
      this.listening = true;
    } catch (err) {
      if (connection === this.connection && !this.closed) setTimeout(() => void this.listen().catch(() => undefined), HEARTBEAT_MS).unref();
      throw err;
    }
    this.heartbeat();
    if (!this.timer && !this.closed) {
      this.timer = setInterval(() => this.heartbeat(), HEARTBEAT_MS);
      this.timer.unref();
    }
  }

  /** Renews the lease and acknowledges what was dropped; one at a time, again if asked meanwhile. */
  heartbeat(): void {
    if (this.closed) return;
    if (this.beating) {
      this.beatAgain = true;
      return;
    }
    this.beating = true;
    void this.beat().finally(() => {
      this.beating = false;
      if (this.beatAgain) {
        this.beatAgain = false;
        this.heartbeat();
      }
    });
  }

  private async beat(): Promise<void> {
    const sentAt = performance.now();
    const sentAtWall = Date.now();
    const p = this.processed;
    // a tenth of the heartbeats also forget what no one needs any more: acknowledgements stay short
    const prune = ++this.beats % 10 === 0;
    try {
      const results = (await this.pool.query(heartbeatSql(this.origin, p, this.channel, prune))) as unknown as pg.QueryResult[];
      const renewed = results[1].rows[0]?.renewed === true;
      if (!renewed || !this.listening) return;
      // a lease that ran out may have missed a change meanwhile: start again from nothing
      if (sentAt >= this.leaseUntil || sentAtWall >= this.leaseWallUntil) this.holder?.clear();
      this.leaseUntil = sentAt + LEASE_MS;
      this.leaseWallUntil = sentAtWall + LEASE_MS;
    } catch {
      // the lease runs out by itself; the next heartbeat tries again
    }
  }

  /** Stops renewing, and tells the other replicas not to wait for this one. */
  async close(): Promise<void> {
    this.closed = true;
    this.listening = false;
    this.leaseUntil = 0;
    this.leaseWallUntil = 0;
    if (this.timer) clearInterval(this.timer);
    this.holder?.clear();
    await this.pool.query('DELETE FROM svc_replicas WHERE origin = $1', [this.origin]).catch(() => undefined);
  }
}

/**
 * One heartbeat: under the shared advisory lock, acknowledge `p`, and renew the lease if no change
 * numbered above `p` has committed; tell waiting writers; with `prune`, forget the numbers below
 * the highest and the replicas silent for a day.
 */
function heartbeatSql(origin: string, p: number, channel: string, prune: boolean): string {
  const ack = JSON.stringify({ a: origin, p } satisfies AckNotice);
  const beat = `SELECT pg_advisory_xact_lock_shared(${lockArgs});
WITH m AS (SELECT coalesce(max(n), 0) AS top FROM svc_invalidations)
INSERT INTO svc_replicas AS r (origin, heartbeat_at, acked)
  SELECT '${origin}', CASE WHEN m.top <= ${p} THEN now() ELSE '-infinity'::timestamptz END, ${p} FROM m
ON CONFLICT (origin) DO UPDATE SET acked = greatest(r.acked, EXCLUDED.acked),
  heartbeat_at = CASE WHEN EXCLUDED.heartbeat_at = '-infinity' THEN r.heartbeat_at ELSE EXCLUDED.heartbeat_at END
RETURNING r.heartbeat_at = now() AS renewed;
SELECT pg_notify('${channel}', '${ack}')`;
  if (!prune) return beat;
  return `${beat};
DELETE FROM svc_invalidations WHERE n < (SELECT max(n) FROM svc_invalidations);
DELETE FROM svc_replicas WHERE heartbeat_at < now() - ${FORGET_REPLICA}`;
}
