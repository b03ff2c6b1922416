import type pg from 'pg';

/**
 * The team store's schema, as numbered steps. Each step runs once, in its own transaction, and is
 * recorded in schema_migrations; a database is at version N when steps 1..N are recorded. Steps
 * are never edited once released: a change to the schema is a new step. Replicas that start
 * together take a session-level advisory lock first, so exactly one of them runs the steps and
 * the others find them done.
 */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** One table per collection: the record whole (jsonb), its key, the order it was first stored, and the columns lookups need. */
const collection = (name: string, extra = '') => `CREATE TABLE ${name} (key text PRIMARY KEY, seq bigint GENERATED ALWAYS AS IDENTITY, record jsonb NOT NULL${extra});
CREATE INDEX ${name}_seq ON ${name} (seq);`;

export const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'collections and values',
    sql: [
      collection('users', ', username_lower text NOT NULL'),
      'CREATE INDEX users_username_lower ON users (username_lower);',
      collection('sessions', ', user_id text'),
      'CREATE INDEX sessions_user_id ON sessions (user_id);',
      collection('access_requests', ', app_client_id text NOT NULL, status text NOT NULL, user_id text, expires_ms bigint'),
      'CREATE INDEX access_requests_client_status ON access_requests (app_client_id, status);',
      'CREATE INDEX access_requests_user ON access_requests (user_id);',
      "CREATE INDEX access_requests_drafts ON access_requests (expires_ms) WHERE status = 'draft';",
      collection('api_keys', ', key_hash text NOT NULL, access_request_id text'),
      'CREATE INDEX api_keys_key_hash ON api_keys (key_hash);',
      'CREATE INDEX api_keys_access_request ON api_keys (access_request_id);',
      collection('oauth_clients'),
      collection('oauth_state', ', model text NOT NULL, grant_id text, expires_at bigint'),
      'CREATE INDEX oauth_state_grant ON oauth_state (grant_id);',
      'CREATE INDEX oauth_state_expires ON oauth_state (expires_at);',
      collection('providers'),
      collection('mcp_instances'),
      collection('mcp_tools'),
      collection('model_aliases'),
      collection('model_pulls'),
      // single values stored whole: meta (the key check, the sealed session keys), the sealed signing keys
      'CREATE TABLE svc_values (name text PRIMARY KEY, value jsonb NOT NULL);',
    ].join('\n'),
  },
  {
    version: 2,
    name: 'login failures counted across replicas',
    // keyed by a hash of (username, address): the table names neither
    sql: `CREATE TABLE login_failures (key text PRIMARY KEY, count integer NOT NULL, blocked_until bigint NOT NULL, last bigint NOT NULL);
CREATE INDEX login_failures_last ON login_failures (last);`,
  },
  {
    version: 3,
    name: 'held tool calls and grant usage shared by replicas',
    sql: [
      collection('held_calls', ', status text NOT NULL, created_ms bigint NOT NULL'),
      'CREATE INDEX held_calls_created ON held_calls (created_ms);',
      // a grant's calls in its current minute window, and its upstream tokens on one day
      'CREATE TABLE grant_usage (grant_id text PRIMARY KEY, window_start bigint NOT NULL, window_calls integer NOT NULL, day text NOT NULL, day_tokens bigint NOT NULL);',
    ].join('\n'),
  },
  {
    version: 4,
    name: 'activity shared by replicas',
    sql: [
      // one row per call: the event whole (jsonb, without its id), and the columns the filters and
      // the totals read; `day` is the recording replica's local calendar day of `time`
      `CREATE TABLE activity_events (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, time timestamptz NOT NULL, day text NOT NULL,
  access_request_id text NOT NULL, app_client_id text NOT NULL, "user" text, kind text NOT NULL, outcome text NOT NULL,
  tokens_in bigint, tokens_out bigint, event jsonb NOT NULL);`,
      'CREATE INDEX activity_events_grant ON activity_events (access_request_id, id);',
      'CREATE INDEX activity_events_time ON activity_events (time);',
      // each grant's totals over the events kept: added to as events are written, taken from as they go
      `CREATE TABLE activity_totals (access_request_id text PRIMARY KEY, calls bigint NOT NULL, refused bigint NOT NULL, tokens_in bigint NOT NULL,
  tokens_out bigint NOT NULL, last_used_at timestamptz, day text NOT NULL, today_calls bigint NOT NULL, today_tokens bigint NOT NULL);`,
    ].join('\n'),
  },
  {
    version: 5,
    name: 'bearer leases',
    sql: [
      // every committed change the Bearer check depends on, numbered in commit order (leases.ts)
      'CREATE SEQUENCE svc_invalidation_seq;',
      'CREATE TABLE svc_invalidations (n bigint PRIMARY KEY);',
      // each live replica: when its lease was last renewed, and the highest change it has dropped
      'CREATE TABLE svc_replicas (origin text PRIMARY KEY, heartbeat_at timestamptz NOT NULL, acked bigint NOT NULL);',
    ].join('\n'),
  },
  {
    version: 6,
    name: 'activity batch ids',
    sql: [
      // the id of each activity batch written (src/activity/postgres.ts): a batch tried again after
      // a COMMIT whose answer was lost finds its id and is not written twice
      'CREATE TABLE activity_batches (id text PRIMARY KEY, written_at timestamptz NOT NULL DEFAULT now());',
      'CREATE INDEX activity_batches_written ON activity_batches (written_at);',
    ].join('\n'),
  },
  {
    version: 7,
    name: 'tokens reserved by calls in flight',
    // what a grant's calls still running reserved of its day (src/activity/limits.ts), beside what it spent
    sql: 'ALTER TABLE grant_usage ADD COLUMN day_held bigint NOT NULL DEFAULT 0;',
  },
];

export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1].version;

/** The advisory lock keys svc takes (one namespace, so nothing else in the database collides by chance). */
export const LOCK_NAMESPACE = 0x5356_4300; // "SVC\0"
export const LOCKS = { migrate: 1, firstStart: 2, activity: 3, invalidation: 4 } as const;

export class SchemaTooNewError extends Error {
  constructor(found: number) {
    super(`The database's schema is at version ${found}, newer than this svc knows (${SCHEMA_VERSION}); run the newer svc, or a database of this one.`);
    this.name = 'SchemaTooNewError';
  }
}

/** The versions recorded, or [] on a database svc never touched. */
export async function appliedVersions(client: pg.ClientBase): Promise<number[]> {
  const exists = await client.query<{ t: string | null }>("SELECT to_regclass('schema_migrations')::text AS t");
  if (!exists.rows[0].t) return [];
  const rows = await client.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
  return rows.rows.map((r) => r.version);
}

/**
 * Brings the database to `target` (the newest by default), step by step, under the migration
 * lock. Answers the steps it ran. A database newer than this svc is refused, untouched.
 */
export async function migrate(client: pg.ClientBase, opts: { target?: number; migrations?: Migration[] } = {}): Promise<number[]> {
  const steps = opts.migrations ?? MIGRATIONS;
  const target = opts.target ?? steps[steps.length - 1].version;
  await client.query('SELECT pg_advisory_lock($1, $2)', [LOCK_NAMESPACE, LOCKS.migrate]);
  try {
    await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())');
    const done = new Set(await appliedVersions(client));
    const newest = Math.max(0, ...done);
    if (newest > steps[steps.length - 1].version) throw new SchemaTooNewError(newest);
    const ran: number[] = [];
    for (const step of steps) {
      if (step.version > target || done.has(step.version)) continue;
      await client.query('BEGIN');
      try {
        await client.query(step.sql);
        await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [step.version, step.name]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      }
      ran.push(step.version);
    }
    return ran;
  } finally {
    await client.query('SELECT pg_advisory_unlock($1, $2)', [LOCK_NAMESPACE, LOCKS.migrate]).catch(() => undefined);
  }
}
