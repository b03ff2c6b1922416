import pg from 'pg';
import type { ReplicaLease } from './leases.js';
import { parseNotice } from './notices.js';
import { CHANNEL, type PostgresRepositories, TABLES } from './repositories.js';

/**
 * Tells this replica's `onChange` listeners about changes other replicas commit, through
 * PostgreSQL's LISTEN/NOTIFY. A writing transaction announces the keys it changed with its COMMIT,
 * so the notice goes out exactly when the change commits, and never for a transaction rolled
 * back. A follower reads each announced record of a table it listens to afresh and tells its
 * listeners.
 *
 * It is prompt, not synchronous: a listener hears another replica's change a moment after that
 * replica answered. The indexes that follow it are caches of data that only admins change (the
 * model catalog). The records of the Bearer check are the exception: a change to them is numbered,
 * and its writer answers only once every replica that keeps them has dropped it (leases.ts). When the follower loses its connection it may miss notices,
 * so once it is back it tells every current record of the tables listened to (a record deleted
 * meanwhile is not told: the listeners that matter drop their whole index on any change).
 */

const KNOWN_TABLES: Set<string> = new Set(Object.values(TABLES).map((t) => t.table));

export interface ChangeFollower {
  close(): Promise<void>;
}

export interface FollowOptions {
  /** a new client for the listening connection, on the same database as the pool */
  client: () => pg.Client;
  /** this replica's Bearer lease: told every numbered change (its own too) and when listening starts or stops */
  lease?: ReplicaLease;
  onError?: (message: string) => void;
  onRecovered?: () => void;
}

/** Starts following the other replicas' changes. */
export async function followChanges(repos: PostgresRepositories, opts: FollowOptions): Promise<ChangeFollower> {
  const { shared } = repos;
  // only what someone here listens to is read again
  const followed = (table: string) => KNOWN_TABLES.has(table) && shared.listeners.has(table);
  // One at a time, in the order notices arrive, so the last read of a key is its latest state.
  let queue: Promise<void> = Promise.resolve();
  const enqueue = (job: () => Promise<void>) => {
    queue = queue.then(job).catch((err) => opts.onError?.(`following another replica's change failed: ${(err as Error).message}`));
  };
  const tellKeys = async (pairs: [string, string][]) => {
    for (const [table, key] of pairs) {
      if (!followed(table)) continue;
      const res = await shared.read(`SELECT record FROM ${table} WHERE key = $1`, [key]);
      shared.tell([{ table, key, record: res.rows[0]?.record }]);
    }
  };
  const tellTables = async (tables: Iterable<string>) => {
    for (const table of tables) {
      if (!followed(table)) continue;
      const res = await shared.read(`SELECT key, record FROM ${table} ORDER BY seq`, []);
      shared.tell(res.rows.map((r) => ({ table, key: r.key as string, record: r.record })));
    }
  };
  const onNotice = (msg: pg.Notification) => {
    const notice = parseNotice(msg.payload);
    if (!notice) return;
    if (typeof notice.a === 'string' && typeof notice.p === 'number') return shared.acks.heard({ a: notice.a, p: notice.p });
    // a numbered change is dropped and acknowledged even when it is this replica's own: the
    // acknowledgement vouches for every change numbered before it too
    if (typeof notice.n === 'number') opts.lease?.changed(notice.n, notice.t ? null : (notice.c ?? null), notice.o === shared.origin);
    if (notice.o === shared.origin) return;
    if (typeof notice.n !== 'number') opts.lease?.heardUnnumbered(notice.c, notice.t);
    if (notice.c) enqueue(() => tellKeys(notice.c!));
    if (notice.t) enqueue(() => tellTables(notice.t!));
  };
  const connection = new ListeningConnection(opts, onNotice, () => enqueue(() => tellTables(shared.listeners.keys())));
  await connection.open();
  try {
    await opts.lease?.listen();
  } catch (err) {
    await connection.close();
    throw err;
  }
  return {
    async close() {
      await connection.close();
      await queue;
    },
  };
}

/** The LISTENing client, opened again (with a growing pause) whenever it is lost. */
class ListeningConnection {
  private client: pg.Client | null = null;
  private closed = false;
  private timer: NodeJS.Timeout | null = null;
  private pauseMs = 250;
  private failing = false;

  constructor(
    private readonly opts: FollowOptions,
    private readonly onNotice: (msg: pg.Notification) => void,
    private readonly onReconnected: () => void,
  ) {}

  /** Connects and listens; a first failure is the caller's (the start fails), later ones are retried. */
  async open(): Promise<void> {
    const client = this.opts.client();
    client.on('notification', this.onNotice);
    client.on('error', () => this.lost(client));
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
    } catch (err) {
      client.removeAllListeners();
      client.on('error', () => undefined);
      await client.end().catch(() => undefined);
      throw err;
    }
    this.client = client;
  }

  private lost(client: pg.Client): void {
    if (this.client !== client || this.closed) return;
    this.client = null;
    client.on('error', () => undefined);
    void client.end().catch(() => undefined);
    this.opts.lease?.deaf();
    if (!this.failing) this.opts.onError?.('lost the connection that follows other replicas; reconnecting');
    this.failing = true;
    this.retry();
  }

  private retry(): void {
    if (this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.open().then(
        () => {
          this.pauseMs = 250;
          this.failing = false;
          this.opts.onRecovered?.();
          // notices sent while it was away are lost: tell what is there now
          this.onReconnected();
          // (tried again by the lease itself; meanwhile every call is checked in the database)
          this.opts.lease?.listen().catch(() => undefined);
        },
        () => {
          this.pauseMs = Math.min(this.pauseMs * 2, 5_000);
          this.retry();
        },
      );
    }, this.pauseMs);
    this.timer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    const client = this.client;
    this.client = null;
    if (client) {
      client.removeAllListeners('end');
      await client.end().catch(() => undefined);
    }
  }
}
