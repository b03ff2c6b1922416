/**
 * The Bearer check on a team server answers from memory while its replica holds a lease, and no
 * revoke is outlived by it: a replica that keeps a grant in memory must have dropped it before
 * the revoke is answered, or its lease must have run out. Real replicas on real PostgreSQL behind
 * the round-robin balancer; the database cut off by a relay, a replica's listening connection
 * stalled by stopping its server process.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { LEASE_MS } from '../src/store/postgres/leases.js';
import { postgresBinDir } from './helpers/postgres.js';
import { needs } from './helpers/requirements.js';
import { startTcpProxy } from './helpers/tcp-proxy.js';
import { type Team, useTeamServer } from './helpers/team.js';
import { eventually } from './helpers/wait.js';

const available = needs(postgresBinDir() !== null, 'team server (replicas on PostgreSQL)', "PostgreSQL's server (initdb, pg_ctl)");

describe.skipIf(!available)("a team replica's Bearer check from memory, under leases", () => {
  const { pg: cluster, running, startTeam } = useTeamServer();

  /** An API key of a new grant, checked once on every replica (so each keeps it). */
  async function keyCheckedEverywhere(team: Team) {
    const admin = await team.api().login('admin', team.password);
    const key = await admin.post('/svc/v1/keys', { name: 'lease key' });
    expect(key.status).toBe(201);
    const bearer = { Authorization: `Bearer ${key.body.key}` };
    for (let i = 0; i < team.replicas.length; i++) expect((await team.api().get('/v1/models', bearer)).status).toBe(200);
    return { admin, key, bearer };
  }

  /** The server processes of the replicas' listening connections on the team's database. */
  async function listenerPids(database: string): Promise<number[]> {
    const c = new pg.Client(database);
    c.on('error', () => undefined);
    await c.connect();
    try {
      const res = await c.query("SELECT pid FROM pg_stat_activity WHERE application_name = 'svc changes' AND datname = current_database()");
      return res.rows.map((r) => r.pid as number);
    } finally {
      await c.end();
    }
  }

  /**
   * Waits for the next heartbeat that renewed a replica's lease (its row's time moves), read on a
   * connection of its own to `database`: just after it, a lease has nearly all of LEASE_MS to run.
   * A busy machine can delay heartbeats by a second or more, so a test that needs a lease to hold
   * starts from a fresh one rather than from wherever the last one happens to be.
   */
  async function nextRenewal(database: string) {
    const c = new pg.Client(database);
    c.on('error', () => undefined);
    await c.connect();
    try {
      const newest = async () => (await c.query<{ at: string | null }>('SELECT max(heartbeat_at)::text AS at FROM svc_replicas')).rows[0].at;
      const before = await newest();
      await eventually(async () => (await newest()) !== before, 'a heartbeat to renew the lease', LEASE_MS * 2);
    } finally {
      await c.end();
    }
  }

  it('a grant checked once is answered from memory: with the database cut off, its calls go on until the lease runs out, then 503', async () => {
    const relay = await startTcpProxy(cluster.port);
    running.push({ stop: () => relay.close() });
    const team = await startTeam(1, (url) => url.replace(`:${cluster.port}/`, `:${relay.port}/`));
    const { admin, bearer } = await keyCheckedEverywhere(team);
    // checked once more under a lease just renewed, so that it is kept and the lease holds a while
    await nextRenewal(team.database.replace(`:${relay.port}/`, `:${cluster.port}/`));
    expect((await team.api().get('/v1/models', bearer)).status).toBe(200);
    relay.freeze();
    try {
      const cutAt = Date.now();
      // a session is read from the database on every call: refused at once (within its timeouts)
      const me = admin.get('/svc/v1/auth/me');
      // the key's grant was kept: no database needed while the lease holds
      const call = await team.api().get('/v1/models', bearer);
      expect(call.status).toBe(200);
      expect(Date.now() - cutAt).toBeLessThan(LEASE_MS);
      expect((await me).status).toBe(503);
      // and once no heartbeat could renew it, nothing is answered from memory
      await eventually(async () => (await team.api().get('/v1/models', bearer)).status === 503, 'the lease to run out under the cut', LEASE_MS + 8_000);
    } finally {
      relay.thaw();
    }
    await eventually(async () => (await team.api().get('/v1/models', bearer)).status === 200, 'the key to work again after the cut');
  }, 60_000);

  it('a revoke is answered once the other replica has dropped the grant, and refuses the very next call there', async () => {
    const team = await startTeam();
    const { admin, key, bearer } = await keyCheckedEverywhere(team);
    const started = Date.now();
    expect((await admin.post(`/svc/v1/keys/${key.body.id}/revoke`)).status).toBe(200);
    // acknowledged through the change notices, well before any lease could run out
    expect(Date.now() - started).toBeLessThan(LEASE_MS);
    for (let i = 0; i < 2; i++) expect((await team.api().get('/v1/models', bearer)).status).toBe(401);
    expect(new Set(team.balancer.history.slice(-2)).size).toBe(2);
  });

  it('replicas whose listening connections were cut answer from the database meanwhile, then take up their leases again', async () => {
    const team = await startTeam();
    const { admin, key, bearer } = await keyCheckedEverywhere(team);
    const before = await listenerPids(team.database);
    expect(before).toHaveLength(2);
    const c = new pg.Client(team.database);
    c.on('error', () => undefined);
    await c.connect();
    try {
      await c.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [before]);
    } finally {
      await c.end();
    }
    // still served, and correctly, while they reconnect
    for (let i = 0; i < 2; i++) expect((await team.api().get('/v1/models', bearer)).status).toBe(200);
    await eventually(async () => {
      const now = await listenerPids(team.database);
      return now.length === 2 && now.every((pid) => !before.includes(pid));
    }, 'both replicas to listen again');
    // checked again on both (kept once a lease is renewed), then revoked: the acknowledgement comes
    // through the new connections, well before a lease could run out
    for (let i = 0; i < 4; i++) expect((await team.api().get('/v1/models', bearer)).status).toBe(200);
    const started = Date.now();
    expect((await admin.post(`/svc/v1/keys/${key.body.id}/revoke`)).status).toBe(200);
    expect(Date.now() - started).toBeLessThan(LEASE_MS);
    for (let i = 0; i < 2; i++) expect((await team.api().get('/v1/models', bearer)).status).toBe(401);
    expect(new Set(team.balancer.history.slice(-2)).size).toBe(2);
  }, 40_000);

  it('a replica that stops hearing the changes cannot outlive a revoke: the revoke waits for its lease to run out', async () => {
    const team = await startTeam();
    const { admin, key, bearer } = await keyCheckedEverywhere(team);
    const pids = await listenerPids(team.database);
    expect(pids).toHaveLength(2);
    for (const pid of pids) process.kill(pid, 'SIGSTOP');
    try {
      const started = Date.now();
      const revoked = await admin.post(`/svc/v1/keys/${key.body.id}/revoke`);
      const took = Date.now() - started;
      expect(revoked.status).toBe(200);
      // no acknowledgement could come: the revoke waited out the other replica's lease, and no more
      expect(took).toBeGreaterThan(LEASE_MS / 3);
      expect(took).toBeLessThan(LEASE_MS + 2_000);
      // while neither replica hears a change, neither answers the revoked key from memory
      for (let i = 0; i < 4; i++) expect((await team.api().get('/v1/models', bearer)).status).toBe(401);
      expect(new Set(team.balancer.history.slice(-2)).size).toBe(2);
    } finally {
      for (const pid of pids) process.kill(pid, 'SIGCONT');
    }
  }, 40_000);
});
