import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { CachedBearerRecords } from './bearer-cache.js';
import { followChanges } from './changes.js';
import { ReplicaLease } from './leases.js';
import { LOCK_NAMESPACE, LOCKS, migrate } from './migrations.js';
import { CHANNEL, newOrigin, postgresRepositories, type PostgresRepositories } from './repositories.js';
import { redactDatabaseUrl } from './url.js';

export { redactDatabaseUrl } from './url.js';

/**
 * Opening the team store: a pool whose every wait is bounded, the schema brought up to date, the
 * repositories, and the follower of other replicas' changes.
 *
 * While the database is down or stuck, a call must fail within a few seconds (503
 * store_unavailable), never hang: a connection attempt gives up after CONNECT_MS (also the
 * longest wait for a free pooled client), the server cancels a statement after STATEMENT_MS or a
 * lock wait after LOCK_MS, and the client stops waiting for any reply after QUERY_MS (a server
 * that does not answer at all). The pool opens connections again by itself once the database is back.
 */
export const TIMEOUTS = { connectMs: 2_000, statementMs: 2_500, lockMs: 2_000, queryMs: 3_000, idleInTransactionMs: 10_000 };
const POOL_SIZE = 10;

export function poolConfig(url: string): pg.PoolConfig {
  return {
    connectionString: url,
    max: POOL_SIZE,
    connectionTimeoutMillis: TIMEOUTS.connectMs,
    statement_timeout: TIMEOUTS.statementMs,
    lock_timeout: TIMEOUTS.lockMs,
    query_timeout: TIMEOUTS.queryMs,
    idle_in_transaction_session_timeout: TIMEOUTS.idleInTransactionMs,
    idleTimeoutMillis: 30_000,
    // A few connections stay open through quiet spells: a new one costs a handshake (about 5 ms on
    // loopback, more with TLS across a network) that the first call after the spell would pay.
    min: 2,
    keepAlive: true,
    application_name: 'svc',
  };
}

export interface TeamStore {
  repos: PostgresRepositories;
  pool: pg.Pool;
  /** the database URL with no password, for logs */
  where: string;
  /**
   * Waits for the first-start lock (another replica may hold it while it sets up), calling
   * `stillWanted` (which throws to give up) as it waits; answers its release. Held on a connection
   * of its own, so a replica that dies holding it lets it go with its connection.
   */
  holdFirstStart(stillWanted: () => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

const SETUP_WAIT_MS = 120_000;

export async function holdSessionLock(url: string, key: number, stillWanted: () => void, applicationName = 'svc setup'): Promise<() => Promise<void>> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: TIMEOUTS.connectMs, query_timeout: TIMEOUTS.queryMs, keepAlive: true, application_name: applicationName });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const until = Date.now() + SETUP_WAIT_MS;
    // polled rather than waited for in one statement: a start that is stopped must stop waiting
    while (!(await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, $2) AS ok', [LOCK_NAMESPACE, key])).rows[0].ok) {
      stillWanted();
      if (Date.now() > until) throw new Error(`another replica held the first-start lock for over ${SETUP_WAIT_MS / 1000} s`);
      await sleep(100);
    }
  } catch (err) {
    await client.end().catch(() => undefined);
    throw err;
  }
  let released: Promise<void> | null = null;
  return () => (released ??= client.end().catch(() => undefined));
}

export interface TeamStoreOptions {
  onError?: (message: string) => void;
  onRecovered?: () => void;
  /** stop waiting for the migration lock (another replica migrating) after this long */
  migrateDeadlineMs?: number;
}

/** A client of its own for the schema steps: they may outlast a statement timeout, and may wait for another replica's. */
async function migrateDatabase(url: string, deadlineMs: number): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: TIMEOUTS.connectMs, query_timeout: deadlineMs, keepAlive: true, application_name: 'svc migrate' });
  client.on('error', () => undefined);
  await client.connect();
  try {
    await migrate(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * The Bearer check's records kept in memory while `lease` holds (leases.ts), and dropped as soon as
 * this replica commits a change to them.
 */
function withBearerCache(repos: PostgresRepositories, lease: ReplicaLease): PostgresRepositories {
  const cache = new CachedBearerRecords(repos.bearerRecords!, lease);
  lease.hold(cache);
  repos.shared.dropKept = (changes) => cache.drop(changes);
  return { ...repos, bearerRecords: cache };
}

/** Connects, migrates and opens the repositories; throws (the pool ended) when the database cannot be reached. */
export async function openTeamStore(url: string, opts: TeamStoreOptions = {}): Promise<TeamStore> {
  await migrateDatabase(url, opts.migrateDeadlineMs ?? 60_000);
  const config = poolConfig(url);
  const pool = new pg.Pool(config);
  // A pooled client idle when the server goes away reports it here; unheard, it would end the process.
  pool.on('error', (err) => opts.onError?.(`a pooled database connection failed: ${err.message}`));
  const origin = newOrigin();
  const base = postgresRepositories(pool, origin);
  const lease = new ReplicaLease(origin, pool, CHANNEL);
  const repos = withBearerCache(base, lease);
  try {
    const follower = await followChanges(repos, {
      client: () => new pg.Client({ connectionString: url, connectionTimeoutMillis: TIMEOUTS.connectMs, keepAlive: true, application_name: 'svc changes' }),
      lease,
      onError: opts.onError,
      onRecovered: opts.onRecovered,
    });
    return {
      repos,
      pool,
      where: redactDatabaseUrl(url),
      holdFirstStart: (stillWanted) => holdSessionLock(url, LOCKS.firstStart, stillWanted),
      async close() {
        await lease.close();
        await follower.close();
        await pool.end();
      },
    };
  } catch (err) {
    await lease.close();
    await pool.end().catch(() => undefined);
    throw err;
  }
}
