/**
 * The team store on a real PostgreSQL server: the schema's steps, what holds when several
 * replicas (here: several pools, as several processes would have) share one database, how the
 * repositories behave while the database is down, and that its password shows nowhere.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../src/store/durable-file.js';
import { openTeamStore, poolConfig, redactDatabaseUrl, type TeamStore } from '../src/store/postgres/connect.js';
import { appliedVersions, migrate, MIGRATIONS, SCHEMA_VERSION, SchemaTooNewError } from '../src/store/postgres/migrations.js';
import { postgresRepositories } from '../src/store/postgres/repositories.js';
import type { AliasRecord } from '../src/store/records.js';
import type { AccessRequestRecord, UserRecord } from '../src/store/schema.js';
import { eventually } from './helpers/wait.js';
import { postgresBinDir, usePostgres } from './helpers/postgres.js';
import { needs } from './helpers/requirements.js';
import { accessRequestRecord, userRecord } from './helpers/records.js';

const available = needs(postgresBinDir() !== null, 'team store on PostgreSQL', "PostgreSQL's server (initdb, pg_ctl)");

const NOW = Date.now();
let n = 0;
const draft = (client: string): AccessRequestRecord => accessRequestRecord({ id: `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}`, app_client_id: client }, NOW);
const alias = (id: string): AliasRecord => ({ id, provider: 'p', model: 'm', defaults: {}, created_at: new Date(NOW).toISOString() });
const user = (id: string, username = id): UserRecord => userRecord(id, NOW, { username });


describe.skipIf(!available)('the team store on PostgreSQL', () => {
  const { server, closeLater } = usePostgres();

  const client = async (url: string) => {
    const c = new pg.Client(url);
    c.on('error', () => undefined);
    await c.connect();
    closeLater(() => c.end());
    return c;
  };
  const open = async (url: string, opts: Parameters<typeof openTeamStore>[1] = {}): Promise<TeamStore> => {
    const store = await openTeamStore(url, opts);
    closeLater(() => store.close());
    return store;
  };

  describe('schema steps', () => {
    it('each step runs from the one before it and is recorded; running again changes nothing', async () => {
      const url = await server().createDatabase();
      const c = await client(url);
      expect(await appliedVersions(c)).toEqual([]);
      const pool = new pg.Pool(poolConfig(url));
      pool.on('error', () => undefined);
      closeLater(() => pool.end());
      const repos = postgresRepositories(pool);
      for (const step of MIGRATIONS) {
        expect(await migrate(c, { target: step.version - 1 })).toEqual([]);
        expect(await migrate(c, { target: step.version })).toEqual([step.version]);
        expect(await appliedVersions(c)).toEqual(MIGRATIONS.filter((m) => m.version <= step.version).map((m) => m.version));
        // what was stored before each step is still there after it (model aliases: a write of a
        // user, grant or key needs the numbering of the newest step)
        await repos.modelAliases.put(alias(`a${step.version}`));
        expect((await repos.modelAliases.list()).map((a) => a.id)).toEqual(MIGRATIONS.filter((m) => m.version <= step.version).map((m) => `a${m.version}`));
      }
      expect(await migrate(c)).toEqual([]);
      await repos.users.put(user('u1', 'User1'));
      expect((await repos.users.findByName('USER1'))?.id).toBe('u1');
    });

    it('replicas starting together on an empty database: exactly one runs the steps', async () => {
      const url = await server().createDatabase();
      const clients = await Promise.all([1, 2, 3, 4].map(() => client(url)));
      const ran = await Promise.all(clients.map((c) => migrate(c)));
      expect(ran.filter((r) => r.length > 0)).toEqual([MIGRATIONS.map((m) => m.version)]);
      expect(await appliedVersions(clients[0])).toEqual(MIGRATIONS.map((m) => m.version));
    });

    it('refuses a database whose schema is newer than this svc, touching nothing', async () => {
      const url = await server().createDatabase();
      const c = await client(url);
      await migrate(c);
      await c.query("INSERT INTO schema_migrations (version, name) VALUES ($1, 'from the future')", [SCHEMA_VERSION + 1]);
      await expect(migrate(c)).rejects.toThrow(SchemaTooNewError);
      await expect(openTeamStore(url)).rejects.toThrow(/newer than this svc knows/);
    });
  });

  describe('several replicas on one database', () => {
    it('the draft caps hold across replicas racing for the last places', async () => {
      const url = await server().createDatabase();
      const [a, b] = [await open(url), await open(url)];
      const caps = { perClient: 5, total: 7 };
      const tries = Array.from({ length: 24 }, (_, i) => (i % 2 ? a : b).repos.accessRequests.insertDraft(draft(i % 3 ? 'x' : 'y'), caps, NOW));
      const results = await Promise.all(tries);
      const stored = results.filter((r) => r.stored).length;
      expect(stored).toBe(7);
      const drafts = await a.repos.accessRequests.list();
      expect(drafts.length).toBe(7);
      expect(drafts.filter((d) => d.app_client_id === 'x').length).toBeLessThanOrEqual(5);
    });

    it('of two replicas deciding one draft at once, exactly one wins', async () => {
      const url = await server().createDatabase();
      const [a, b] = [await open(url), await open(url)];
      for (let round = 0; round < 10; round++) {
        const r = draft('app');
        await a.repos.accessRequests.put(r);
        const decide = (store: TeamStore, status: 'approved' | 'denied') =>
          store.repos.accessRequests.update(r.id, (rec) => {
            if (rec.status !== 'draft') throw new Error(`already ${rec.status}`);
            rec.status = status;
          });
        const results = await Promise.allSettled([decide(a, 'approved'), decide(b, 'denied')]);
        expect(results.map((x) => x.status).sort()).toEqual(['fulfilled', 'rejected']);
      }
    });

    it('login failures counted on two replicas at once add up, and old ones are forgotten', async () => {
      const url = await server().createDatabase();
      const [a, b] = [await open(url), await open(url)];
      const count = (store: TeamStore) =>
        store.repos.loginFailures!.modify('alice\u0000127.0.0.1', 0, (e) => ({ next: { count: (e?.count ?? 0) + 1, blockedUntil: 0, last: NOW }, result: undefined }));
      await Promise.all(Array.from({ length: 20 }, (_, i) => count(i % 2 ? a : b)));
      const seen = await a.repos.loginFailures!.modify('alice\u0000127.0.0.1', 0, (e) => ({ next: e, result: e?.count }));
      expect(seen).toBe(20);
      const c = await client(url);
      // stored under a hash: the table names neither the user nor the address
      expect(JSON.stringify((await c.query('SELECT * FROM login_failures')).rows)).not.toMatch(/alice|127\.0\.0\.1/);
      const after = await b.repos.loginFailures!.modify('alice\u0000127.0.0.1', NOW + 1, (e) => ({ next: e, result: e }));
      expect(after).toBeUndefined();
    });

    it("a replica's listeners hear the changes another replica commits, and not those rolled back", async () => {
      const url = await server().createDatabase();
      const [a, b] = [await open(url), await open(url)];
      const heard: [string, string | undefined][] = [];
      b.repos.providers.onChange((key, p) => heard.push([key, p?.base_url]));
      const provider = { name: 'p1', base_url: 'http://127.0.0.1:1/v1', api_key: null, models: [], discovered_models: [], discovered_at: null, discovery_error: null, timeout_ms: 1000, created_at: new Date(NOW).toISOString() };
      await a.repos.providers.put(provider);
      await eventually(() => heard.length === 1, 'the new provider to reach the other replica');
      await a.repos
        .transaction(async (t) => {
          await t.providers.put({ ...provider, name: 'never' });
          throw new Error('rolled back');
        })
        .catch(() => undefined);
      await a.repos.providers.delete('p1');
      await eventually(() => heard.length === 2, 'the removal to reach the other replica');
      // a follower reads each changed record as it is when it hears of it
      expect(heard).toEqual([
        ['p1', 'http://127.0.0.1:1/v1'],
        ['p1', undefined],
      ]);
    });
  });

  it('the URL is named without its password', () => {
    expect(redactDatabaseUrl('postgres://svc:s3cret@db.example:5432/svc?sslmode=require&password=other')).toBe('postgres://svc:***@db.example:5432/svc?sslmode=require&password=***');
    expect(redactDatabaseUrl('postgres://db.example/svc')).toBe('postgres://db.example/svc');
  });

  // last in the file's order is not guaranteed (shuffle): it stops and starts the server itself
  describe('while the database is down', () => {
    it('calls fail with store_unavailable within 5 s, and work again once it is back, by themselves', async () => {
      const url = await server().createDatabase();
      const errors: string[] = [];
      const store = await open(url, { onError: (m) => errors.push(m) });
      await store.repos.users.put(user('u1'));
      await server().stopServer();
      try {
        for (const call of [() => store.repos.users.get('u1'), () => store.repos.users.put(user('u2')), () => store.repos.transaction((t) => t.users.list())]) {
          const started = Date.now();
          await expect(call()).rejects.toBeInstanceOf(StoreUnavailableError);
          expect(Date.now() - started).toBeLessThan(5_000);
        }
      } finally {
        await server().startServer();
      }
      await eventually(() => store.repos.users.get('u1').then((u) => u !== undefined, () => false), 'a read to succeed again', 10_000);
      await store.repos.users.put(user('u2'));
      expect(await store.repos.users.count()).toBe(2);
      expect(errors.join('\n')).not.toContain(server().password);
    }, 30_000);
  });
});
