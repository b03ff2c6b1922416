import pg from 'pg';
import { TargetNotEmptyError } from '../copy-image.js';
import type { Repositories } from '../repositories.js';
import { holdSessionLock, poolConfig, TIMEOUTS } from './connect.js';
import { LOCKS, migrate, SchemaTooNewError } from './migrations.js';
import { postgresRepositories, TABLES } from './repositories.js';
import { DatabaseUnavailableError, redactDatabaseUrl } from './url.js';

/**
 * The database `svc store copy` writes into: checked to hold no svc data before anything is
 * written to it (not even the schema), then brought to the current schema, then opened with a
 * pool of one connection. No change follower: nobody else is meant to use it meanwhile, and the
 * copy's own transaction checks again that it is empty.
 *
 * A replica started on the same empty database at the same time makes its store (meta, the first
 * admin) while it holds the first-start lock. The copy holds that lock too, from before its
 * transaction checks until it is closed: a replica mid-start has then finished, and the copy finds
 * its store and refuses; a replica that starts meanwhile waits, and then finds the copied store
 * rather than making a second one beside it.
 */

/** The application name of the copy's connection that holds the first-start lock. */
export const FIRST_START_HOLDER = 'svc store copy (first start)';

/** Every table svc keeps data in: none may hold a row. */
const DATA_TABLES = [...Object.values(TABLES).map((t) => t.table), 'svc_values', 'login_failures', 'grant_usage', 'activity_events', 'activity_totals'];

export interface CopyTarget {
  repos: Repositories;
  /** the URL without its password */
  where: string;
  close(): Promise<void>;
}

/** The tables of DATA_TABLES that exist and hold at least one row. */
export async function tablesWithRows(client: pg.ClientBase): Promise<string[]> {
  const held: string[] = [];
  for (const table of DATA_TABLES) {
    const exists = await client.query<{ t: string | null }>('SELECT to_regclass($1)::text AS t', [table]);
    if (!exists.rows[0].t) continue;
    const rows = await client.query<{ any: boolean }>(`SELECT EXISTS (SELECT 1 FROM ${table}) AS any`);
    if (rows.rows[0].any) held.push(table);
  }
  return held;
}

/** Refuses a database that holds svc data, then migrates it; on a client of its own, ended after. */
async function checkAndMigrate(url: string, where: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: TIMEOUTS.connectMs, query_timeout: 60_000, application_name: 'svc store copy' });
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (err) {
    throw new DatabaseUnavailableError(where, (err as Error)?.message ?? String(err));
  }
  try {
    const held = await tablesWithRows(client);
    if (held.length > 0) throw new TargetNotEmptyError(where, held);
    await migrate(client);
  } catch (err) {
    if (err instanceof TargetNotEmptyError) throw err;
    if (err instanceof SchemaTooNewError) throw new DatabaseUnavailableError(where, err.message);
    throw new DatabaseUnavailableError(where, (err as Error)?.message ?? String(err));
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The empty database at `url`, at the current schema, ready for the copy's one transaction. */
export async function openCopyTarget(url: string): Promise<CopyTarget> {
  const where = redactDatabaseUrl(url);
  await checkAndMigrate(url, where);
  const releaseFirstStart = await holdSessionLock(url, LOCKS.firstStart, () => undefined, FIRST_START_HOLDER).catch((err: Error) => {
    throw new DatabaseUnavailableError(where, err?.message ?? String(err));
  });
  const pool = new pg.Pool({ ...poolConfig(url), max: 1, application_name: 'svc store copy' });
  pool.on('error', () => undefined);
  return {
    repos: postgresRepositories(pool),
    where,
    close: async () => {
      try {
        await pool.end();
      } finally {
        await releaseFirstStart();
      }
    },
  };
}
