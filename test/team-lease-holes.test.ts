/**
 * Ways a team replica could keep answering a changed Bearer record from memory, each tried on a
 * real PostgreSQL server with the real lease, cache and change follower (openTeamStore): the
 * writer's own replica when its COMMIT's answer is lost, another replica that has not heard such
 * a change when the person is answered, and a change to more records than one notice names.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { openTeamStore, type TeamStore } from '../src/store/postgres/connect.js';
import type { AccessRequestRecord } from '../src/store/schema.js';
import { postgresBinDir, usePostgres } from './helpers/postgres.js';
import { accessRequestRecord, userRecord } from './helpers/records.js';
import { needs } from './helpers/requirements.js';
import { eventually } from './helpers/wait.js';

const available = needs(postgresBinDir() !== null, 'team store on PostgreSQL', "PostgreSQL's server (initdb, pg_ctl)");

const NOW = Date.now();
const approved = (id: string, userId: string): AccessRequestRecord =>
  accessRequestRecord({ id, status: 'approved', approved_role: 'scope_user_user', user_id: userId, expires_at: new Date(NOW + 86_400_000).toISOString() }, NOW);

describe.skipIf(!available)('a changed Bearer record is never answered from memory after its change', () => {
  const { server, closeLater } = usePostgres();

  const open = async (url: string): Promise<TeamStore> => {
    const store = await openTeamStore(url);
    closeLater(() => store.close());
    return store;
  };
  const sql = async (url: string, text: string, params: unknown[] = []) => {
    const c = new pg.Client(url);
    c.on('error', () => undefined);
    await c.connect();
    try {
      return (await c.query(text, params)).rows;
    } finally {
      await c.end();
    }
  };
  /** Reads the grant through the replica's Bearer records until the replica keeps it (its lease holds). */
  const keptOn = async (store: TeamStore, grantId: string, userId: string) => {
    await eventually(async () => {
      await store.repos.bearerRecords!.forToken(grantId, userId, null);
      return (store.repos.bearerRecords as unknown as { size: number }).size > 0;
    }, 'the replica to keep the grant under its lease');
  };

  /**
   * The pool's clients answer the numbered COMMIT with a lost connection once `armed`: the COMMIT
   * ran on the server, but its answer never came back (a connection cut, a reply timed out).
   */
  function loseNextCommitAnswer(store: TeamStore) {
    const state = { armed: false };
    const pool = store.pool as unknown as { connect: (...args: unknown[]) => Promise<pg.PoolClient> };
    const connect = pool.connect.bind(pool);
    // (the pool's own query() connects with a callback: left as it is)
    pool.connect = async (...args: unknown[]) => {
      if (args.length) return connect(...args);
      const client = await connect();
      const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
      (client as unknown as { query: unknown }).query = (...args: unknown[]) => {
        const answer = query(...args);
        if (state.armed && typeof args[0] === 'string' && args[0].includes('svc_invalidation_seq')) {
          state.armed = false;
          return answer.then(() => Promise.reject(new Error('Connection terminated unexpectedly')));
        }
        return answer;
      };
      return client;
    };
    return state;
  }

  it("the writer's own replica drops a change whose COMMIT answer was lost, once its notice comes", async () => {
    const url = await server().createDatabase();
    const b = await open(url);
    await b.repos.users.put(userRecord('u1', NOW));
    await b.repos.accessRequests.put(approved('g1', 'u1'));
    await keptOn(b, 'g1', 'u1');
    const lost = loseNextCommitAnswer(b);
    lost.armed = true;
    // the revoke commits, but its writer hears only a lost connection (the person sees a 503)
    // (and is not told that nothing changed: it may have)
    await expect(b.repos.accessRequests.update('g1', (r) => void (r.status = 'revoked'))).rejects.toThrow(/did not confirm the change .*it may have been saved/);
    expect((await sql(url, "SELECT record->>'status' AS s FROM access_requests WHERE key = 'g1'"))[0].s).toBe('revoked');
    // tried again, the revoke finds nothing to change and is answered
    expect((await b.repos.accessRequests.update('g1', (r) => void (r.status = 'revoked')))?.status).toBe('revoked');
    // once the replica has heard its own change and renewed its lease past it...
    const top = Number((await sql(url, 'SELECT max(n) AS n FROM svc_invalidations'))[0].n);
    await eventually(async () => {
      const rows = await sql(url, 'SELECT acked, heartbeat_at > now() - interval \'1 second\' AS fresh FROM svc_replicas WHERE origin = $1', [b.repos.shared.origin]);
      return rows[0] && Number(rows[0].acked) >= top && rows[0].fresh;
    }, 'the replica to acknowledge the revoke and renew its lease');
    // ...its Bearer check must not find the grant approved
    expect((await b.repos.bearerRecords!.forToken('g1', 'u1', null)).record?.status).toBe('revoked');
  });

  it("a revoke whose COMMIT answer was lost is answered, when tried again, only once no other replica can answer it from memory", async () => {
    const url = await server().createDatabase();
    // the replica that keeps the grant, and the server process of its listening connection
    const c = await open(url);
    const pids = (await sql(url, "SELECT pid FROM pg_stat_activity WHERE application_name = 'svc changes' AND datname = current_database()")).map((r) => r.pid as number);
    expect(pids).toHaveLength(1);
    const b = await open(url);
    await b.repos.users.put(userRecord('u1', NOW));
    await b.repos.accessRequests.put(approved('g1', 'u1'));
    await keptOn(c, 'g1', 'u1');
    const lost = loseNextCommitAnswer(b);
    // the keeping replica stops hearing changes (a stuck connection): its lease runs on a while
    process.kill(pids[0], 'SIGSTOP');
    try {
      lost.armed = true;
      // (and is not told that nothing changed: it may have)
    await expect(b.repos.accessRequests.update('g1', (r) => void (r.status = 'revoked'))).rejects.toThrow(/did not confirm the change .*it may have been saved/);
      // the person tries again and is told the grant is revoked...
      expect((await b.repos.accessRequests.update('g1', (r) => void (r.status = 'revoked')))?.status).toBe('revoked');
      // ...so no replica may still find it approved
      expect((await c.repos.bearerRecords!.forToken('g1', 'u1', null)).record?.status).toBe('revoked');
    } finally {
      process.kill(pids[0], 'SIGCONT');
    }
  });

  it('a change to more records than a notice can name drops everything on the other replicas', async () => {
    const url = await server().createDatabase();
    const c = await open(url);
    const b = await open(url);
    await b.repos.users.put(userRecord('u1', NOW));
    const ids = Array.from({ length: 300 }, (_, i) => `grant-with-a-longish-id-${String(i).padStart(4, '0')}`);
    await b.repos.transaction(async (repos) => {
      for (const id of ids) await repos.accessRequests.put(approved(id, 'u1'));
    });
    await keptOn(c, ids[7], 'u1');
    // one transaction revokes them all: its notice names only the table
    await b.repos.transaction(async (repos) => {
      for (const id of ids) await repos.accessRequests.update(id, (r) => void (r.status = 'revoked'));
    });
    expect((await c.repos.bearerRecords!.forToken(ids[7], 'u1', null)).record?.status).toBe('revoked');
  });
});
