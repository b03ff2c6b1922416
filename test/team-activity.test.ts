/**
 * The activity of a team server: real replicas on one real PostgreSQL behind a round-robin
 * balancer. Calls served by either replica are listed by both, a grant's usage in its review data
 * counts the calls of both, and retention (days and a number) removes events for the whole team,
 * their counts with them.
 */
import net, { type AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { Pool as PgPool } from 'pg';
import { describe, expect, it } from 'vitest';
import { PostgresActivity } from '../src/activity/postgres.js';
import type { ActivityEvent } from '../src/activity/schemas.js';
import type { Config } from '../src/config.js';
import { createLogger } from '../src/log.js';
import { StoreUnavailableError } from '../src/store/durable-file.js';
import { openTeamStore, poolConfig } from '../src/store/postgres/connect.js';
import { eventually } from './helpers/wait.js';
import { testClock, type TestDaemon } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { postgresBinDir } from './helpers/postgres.js';
import { useTeamServer } from './helpers/team.js';
import { needs } from './helpers/requirements.js';
import { startUpstream } from './helpers/upstream.js';

const available = needs(postgresBinDir() !== null, 'team server activity (replicas on PostgreSQL)', "PostgreSQL's server (initdb, pg_ctl)");
const DAY_MS = 24 * 60 * 60 * 1000;


describe.skipIf(!available)("a team server's activity, kept in PostgreSQL", () => {
  const { pg, running, startTeam: startReplicas } = useTeamServer();

  /** Two replicas on a new database behind the balancer; the admin logged in through it, and an API key of theirs. */
  async function startTeam(clock?: () => number, config: Partial<Config> = {}) {
    const { balancer, replicas, password } = await startReplicas(2, undefined, clock, config);
    const admin = await new Api(balancer.url).login('admin', password);
    const key = await admin.post('/svc/v1/keys', { name: 'team activity' });
    expect(key.status, key.text).toBe(201);
    return { balancer, replicas, password, grant: key.body.access_request_id as string, bearer: { Authorization: `Bearer ${key.body.key}` } };
  }

  /** The grant's events as one replica lists them (asked of it directly, not through the balancer). */
  const listedBy = async (replica: TestDaemon, person: Api, grant: string, extra = '') => {
    const res = await person.get(`/svc/v1/activity?grant=${grant}&limit=1000${extra}`);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('x-svc-instance')).toBe(replica.deps.instanceId);
    return res.body.data as ActivityEvent[];
  };

  it('calls served by both replicas are listed by either, and the grant\'s usage in its review data counts them all', async () => {
    const upstream = await startUpstream();
    running.push({ stop: () => upstream.close() });
    const team = await startTeam();
    const admin = await new Api(team.balancer.url).login('admin', team.password);
    expect((await admin.post('/svc/v1/providers', { name: 'shared', base_url: upstream.url })).status).toBe(201);
    const app = new Api(team.balancer.url);
    const before = team.balancer.history.length;
    for (let i = 0; i < 4; i++) expect((await app.get('/v1/models', team.bearer)).status).toBe(200);
    for (let i = 0; i < 2; i++) {
      const chat = await app.post('/v1/chat/completions', { model: 'fake-model', messages: [{ role: 'user', content: 'a' }] }, team.bearer);
      expect(chat.status, chat.text).toBe(200);
    }
    // both replicas served the app's calls, three each
    const servedBy = team.balancer.history.slice(before);
    expect(new Set(servedBy).size).toBe(2);

    for (const replica of team.replicas) {
      const person = await new Api(replica.url).login('admin', team.password);
      const events = await eventually(async () => {
        const listed = await listedBy(replica, person, team.grant);
        return listed.length === 6 ? listed : undefined;
      }, `replica ${replica.url} to list all 6 calls`);
      // newest first, with ids every replica agrees on
      const ids = events.map((e) => Number(e.id));
      expect([...ids].sort((a, b) => b - a)).toEqual(ids);
      expect(new Set(ids).size).toBe(6);
      expect(events.filter((e) => e.kind === 'chat')).toHaveLength(2);
      expect(events.filter((e) => e.kind === 'models')).toHaveLength(4);
      expect(events.every((e) => e.access_request_id === team.grant && e.user === 'admin' && e.outcome === 'ok')).toBe(true);
      // following: only what is newer than an id
      expect((await listedBy(replica, person, team.grant, `&after=${ids[2]}`)).map((e) => e.id)).toEqual(events.slice(0, 2).map((e) => e.id));

      const review = await person.get(`/svc/v1/access-requests/${team.grant}/review`);
      expect(review.status, review.text).toBe(200);
      const tokensIn = events.reduce((n, e) => n + (e.tokens_in ?? 0), 0);
      const tokensOut = events.reduce((n, e) => n + (e.tokens_out ?? 0), 0);
      expect(tokensIn + tokensOut).toBeGreaterThan(0);
      expect(review.body.usage).toEqual({ calls: 6, refused: 0, tokens_in: tokensIn, tokens_out: tokensOut, last_used_at: events[0].time, today: { calls: 6, tokens: tokensIn + tokensOut } });
      // the list reads the usage of all its grants at once, and says the same
      const listed = (await person.get('/svc/v1/access-requests')).body.data as { id: string; usage?: unknown; user: string | null }[];
      expect(listed.find((r) => r.id === team.grant)).toMatchObject({ usage: review.body.usage, user: 'admin' });
    }
  }, 60_000);

  it('retention removes old events for the whole team, by age and by number, and the usage counts only what is kept', async () => {
    // one clock for both replicas, standing still: the test moves it past the days kept
    const clock = testClock();
    const team = await startTeam(clock, { activityRetentionDays: 30, activityMaxEvents: 3 });
    const app = new Api(team.balancer.url);
    const person = await new Api(team.replicas[0].url).login('admin', team.password);
    const calls = async (n: number) => {
      for (let i = 0; i < n; i++) expect((await app.get('/v1/models', team.bearer)).status).toBe(200);
    };
    await calls(4);
    await eventually(async () => ((await listedBy(team.replicas[0], person, team.grant)).length === 4 ? true : undefined), 'the 4 old calls written');
    clock.advance(31 * DAY_MS);
    await calls(4);
    const later = await new Api(team.replicas[0].url).login('admin', team.password);
    const all = await eventually(async () => {
      const listed = await listedBy(team.replicas[0], later, team.grant);
      return listed.length === 8 ? listed : undefined;
    }, 'all 8 calls written');

    // what the hourly sweep runs, on one replica: the 4 past 30 days go, then the oldest beyond 3
    expect(await team.replicas[1].activity.dropOld()).toBe(5);
    for (const replica of team.replicas) {
      const fresh = await new Api(replica.url).login('admin', team.password);
      expect((await listedBy(replica, fresh, team.grant)).map((e) => e.id)).toEqual(all.slice(0, 3).map((e) => e.id));
      const review = await fresh.get(`/svc/v1/access-requests/${team.grant}/review`);
      // today's count is what was spent today, the event dropped by the count bound included (an
      // app must not free its daily budget by flooding calls until its spending is dropped)
      expect(review.body.usage).toMatchObject({ calls: 3, refused: 0, last_used_at: all[0].time, today: { calls: 4 } });
    }
    expect(await team.replicas[0].activity.dropOld()).toBe(0);
  }, 60_000);

  it('a batch whose COMMIT went through but whose answer was lost is tried again and written once, not twice', async () => {
    const url = await pg.createDatabase();
    const store = await openTeamStore(url);
    running.push({ stop: () => store.close() });
    // a relay that cuts the connection instead of passing on the next answer to a COMMIT
    let cutNextCommit = false;
    const commitDone = Buffer.from('COMMIT\0');
    const relay = net.createServer((app) => {
      const db = net.connect(pg.port, '127.0.0.1');
      app.on('error', () => db.destroy());
      db.on('error', () => app.destroy());
      app.pipe(db);
      db.on('data', (chunk: Buffer) => {
        if (cutNextCommit && chunk.includes(commitDone)) {
          cutNextCommit = false;
          app.destroy();
          db.destroy();
        } else app.write(chunk);
      });
      db.on('end', () => app.end());
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    running.push({ stop: () => new Promise<void>((resolve) => relay.close(() => resolve())) });
    const pool = new PgPool(poolConfig(url.replace(`:${pg.port}/`, `:${(relay.address() as AddressInfo).port}/`)));
    pool.on('error', () => undefined);
    running.push({ stop: () => pool.end() });
    const logs: string[] = [];
    const clock = testClock();
    const activity = new PostgresActivity(pool, { retentionDays: 30, maxEvents: 1000 }, clock, createLogger('debug', new Writable({ write: (chunk, _enc, cb) => cb(void logs.push(String(chunk))) })));
    running.push({ stop: () => activity.close() });
    activity.record({ time: new Date(clock()).toISOString(), access_request_id: 'grant-1', app_client_id: 'app-1', user: 'alice', kind: 'chat', endpoint: '/v1/chat/completions', status: 200, outcome: 'ok', duration_ms: 1, tokens_in: 5, tokens_out: 1 });
    cutNextCommit = true;
    await activity.flush();
    expect(cutNextCommit).toBe(false);
    expect(logs.join('')).toMatch(/could not write events to the database/);
    // the event went in all the same; the next flush tries the same batch again
    await activity.flush();
    expect(await activity.list({ limit: 10 })).toHaveLength(1);
    expect(await activity.usageOf('grant-1')).toMatchObject({ calls: 1, tokens_in: 5, tokens_out: 1 });
  }, 60_000);

  it('events the database cannot take wait and are written once it answers again; the failure is only logged', async () => {
    const store = await openTeamStore(await pg.createDatabase());
    running.push({ stop: () => store.close() });
    const logs: string[] = [];
    const logger = createLogger('debug', new Writable({ write: (chunk, _enc, cb) => cb(void logs.push(String(chunk))) }));
    const clock = testClock();
    const activity = new PostgresActivity(store.pool, { retentionDays: 30, maxEvents: 1000 }, clock, logger);
    running.push({ stop: () => activity.close() });
    const event = (tokens: number): Omit<ActivityEvent, 'id'> => ({
      time: new Date(clock()).toISOString(),
      access_request_id: 'grant-1',
      app_client_id: 'app-1',
      user: 'alice',
      kind: 'chat',
      endpoint: '/v1/chat/completions',
      status: 200,
      outcome: 'ok',
      duration_ms: 1,
      tokens_in: tokens,
      tokens_out: 1,
    });
    activity.record(event(1));
    await activity.flush();
    expect(await activity.list({ limit: 10 })).toHaveLength(1);
    await pg.stopServer();
    try {
      activity.record(event(2));
      activity.record(event(3));
      // the write fails, and says so in the log; nothing is thrown at the caller
      await activity.flush();
      expect(logs.join('')).toMatch(/could not write events to the database/);
      expect(logs.join('')).not.toContain(pg.password);
      await expect(activity.list({ limit: 10 })).rejects.toBeInstanceOf(StoreUnavailableError);
    } finally {
      await pg.startServer();
    }
    const events = await eventually(async () => {
      const listed = await activity.list({ limit: 10 }).catch(() => []);
      return listed.length === 3 ? listed : undefined;
    }, 'the waiting events written once the database answers');
    expect(events.map((e) => e.tokens_in)).toEqual([3, 2, 1]);
    expect(await activity.usageOf('grant-1')).toEqual({ calls: 3, refused: 0, tokens_in: 6, tokens_out: 3, last_used_at: events[0].time, today: { calls: 3, tokens: 9 } });
    // a day later, today's counts start again; the totals stay
    clock.advance(DAY_MS);
    expect(await activity.usageOf('grant-1')).toMatchObject({ calls: 3, today: { calls: 0, tokens: 0 } });
  }, 60_000);
});
