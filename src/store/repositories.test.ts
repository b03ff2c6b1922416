/**
 * The repositories' contract, held against every implementation: the journaled store on disk, the
 * same store in memory (what the service unit tests run on), and the team server's PostgreSQL
 * backend (on a real server the test starts, when its binaries are there).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { postgresBinDir, startPostgres, type TestPostgres } from '../../test/helpers/postgres.js';
import { needs } from '../../test/helpers/requirements.js';
import { migrate } from './postgres/migrations.js';
import { postgresRepositories } from './postgres/repositories.js';
import { poolConfig } from './postgres/connect.js';
import type { Repositories } from './repositories.js';
import type { AccessRequestRecord, ApiKeyRecord, UserRecord } from './schema.js';
import { inMemoryRepositories, storeRepositories } from './store-repositories.js';
import { Store } from './store.js';
import { accessRequestRecord, userRecord } from '../../test/helpers/records.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  // pools before the server they use
  for (const fn of cleanups.reverse()) await fn();
}, 30_000);

let server: Promise<TestPostgres> | null = null;
/** A new database on the test server (started on first use), migrated, behind a pool of its own. */
async function postgresBackend(): Promise<Repositories> {
  if (!server) {
    server = startPostgres();
    cleanups.push(async () => (await server!).close());
  }
  const url = await (await server).createDatabase();
  const client = new pg.Client(url);
  await client.connect();
  await migrate(client);
  await client.end();
  const pool = new pg.Pool(poolConfig(url));
  // the server may close a connection the pool is still ending: nothing to report
  pool.on('error', () => undefined);
  cleanups.push(() => pool.end());
  return postgresRepositories(pool);
}

const implementations: [string, () => Promise<Repositories>][] = [
  [
    'the journaled store on disk',
    async () => {
      const dir = await mkdtemp(path.join(tmpdir(), 'svc-repos-'));
      cleanups.push(() => rm(dir, { recursive: true, force: true }));
      return storeRepositories(await Store.open(dir));
    },
  ],
  ['the journaled store in memory', () => inMemoryRepositories()],
];
if (needs(postgresBinDir() !== null, 'repositories: PostgreSQL', "PostgreSQL's server (initdb, pg_ctl)")) implementations.push(['PostgreSQL', postgresBackend]);

const NOW = Date.parse('2026-11-26T12:00:00Z');
let n = 0;
const request = (over: Partial<AccessRequestRecord> = {}): AccessRequestRecord => accessRequestRecord({ id: `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}`, ...over }, NOW);
const user = (id: string, username = id): UserRecord => userRecord(id, NOW, { username });

describe.each(implementations)('repositories: %s', (_name, make) => {
  it('stores, reads, lists in the order first stored, replaces in place and deletes', async () => {
    const repos = await make();
    await repos.users.put(user('a'));
    await repos.users.put(user('b'));
    await repos.users.put({ ...user('a'), role: 'admin' });
    expect((await repos.users.list()).map((u) => [u.id, u.role])).toEqual([
      ['a', 'admin'],
      ['b', 'user'],
    ]);
    expect(await repos.users.count()).toBe(2);
    expect(await repos.users.get('a')).toMatchObject({ role: 'admin' });
    expect(await repos.users.delete('a')).toBe(true);
    expect(await repos.users.delete('a')).toBe(false);
    expect(await repos.users.get('a')).toBeUndefined();
  });

  it('hands out values: a record read cannot be changed in place', async () => {
    const repos = await make();
    await repos.users.put(user('a'));
    const read = (await repos.users.get('a'))!;
    expect(() => {
      read.role = 'admin';
    }).toThrow(TypeError);
    expect((await repos.users.get('a'))!.role).toBe('user');
  });

  it('update: the change sees the current record; a refusal writes nothing; no record, no call', async () => {
    const repos = await make();
    const r = request();
    await repos.accessRequests.put(r);
    const refused = repos.accessRequests.update(r.id, (rec) => {
      rec.status = 'approved';
      throw new Error('refused halfway');
    });
    await expect(refused).rejects.toThrow('refused halfway');
    expect((await repos.accessRequests.get(r.id))!.status).toBe('draft');
    const done = await repos.accessRequests.update(r.id, (rec) => {
      rec.status = 'denied';
    });
    expect(done?.status).toBe('denied');
    expect((await repos.accessRequests.get(r.id))!.status).toBe('denied');
    let called = false;
    expect(
      await repos.accessRequests.update('nope', () => {
        called = true;
      }),
    ).toBeUndefined();
    expect(called).toBe(false);
  });

  it('of two concurrent conditional writes on a draft, exactly one wins', async () => {
    const repos = await make();
    const r = request();
    await repos.accessRequests.put(r);
    const decide = (status: 'approved' | 'denied') =>
      repos.accessRequests.update(r.id, (rec) => {
        if (rec.status !== 'draft') throw new Error(`already ${rec.status}`);
        rec.status = status;
      });
    const results = await Promise.allSettled([decide('approved'), decide('denied')]);
    expect(results.map((x) => x.status).sort()).toEqual(['fulfilled', 'rejected']);
    // which of the two wins is the backend's (a database serves concurrent clients in no set order)
    const winner = results[0].status === 'fulfilled' ? 'approved' : 'denied';
    expect((await repos.accessRequests.get(r.id))!.status).toBe(winner);
  });

  it('a transaction lands whole or not at all, and sees its own writes', async () => {
    const repos = await make();
    await expect(
      repos.transaction(async (t) => {
        await t.users.put(user('a'));
        expect(await t.users.get('a')).toBeDefined();
        expect(await t.users.count()).toBe(1);
        await t.sessions.put({ id_hash: 'h', user_id: 'a', csrf: 'c', expires_at: NOW, data: {} });
        throw new Error('no');
      }),
    ).rejects.toThrow('no');
    expect(await repos.users.count()).toBe(0);
    expect(await repos.sessions.count()).toBe(0);
    const answer = await repos.transaction(async (t) => {
      await t.users.put(user('a'));
      await t.sessions.put({ id_hash: 'h', user_id: 'a', csrf: 'c', expires_at: NOW, data: {} });
      return 'kept';
    });
    expect(answer).toBe('kept');
    expect(await repos.users.count()).toBe(1);
    expect(await repos.sessions.get('h')).toMatchObject({ user_id: 'a' });
  });

  it('reads outside a transaction see only what is committed', async () => {
    const repos = await make();
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let staged!: () => void;
    const stagedOne = new Promise<void>((resolve) => (staged = resolve));
    const running = repos.transaction(async (t) => {
      await t.users.put(user('a'));
      staged();
      await held;
    });
    await stagedOne;
    expect(await repos.users.get('a')).toBeUndefined();
    release();
    await running;
    expect(await repos.users.get('a')).toBeDefined();
  });

  it('refuses a transaction started inside another instead of waiting for ever', async () => {
    const repos = await make();
    await expect(repos.transaction(async () => repos.users.put(user('a')))).rejects.toThrow(/inside another/);
    expect(await repos.users.count()).toBe(0);
  });

  it('tells each committed change to its listeners, and nothing of a failed transaction', async () => {
    const repos = await make();
    const seen: [string, string | undefined][] = [];
    repos.users.onChange((key, u) => seen.push([key, u?.role]));
    await repos.users.put(user('a'));
    await repos.transaction(async (t) => {
      await t.users.put(user('b'));
      throw new Error('no');
    }).catch(() => undefined);
    await repos.users.update('a', (u) => {
      u.role = 'admin';
    });
    await repos.users.delete('a');
    expect(seen).toEqual([
      ['a', 'user'],
      ['a', 'admin'],
      ['a', undefined],
    ]);
  });

  it('insertDraft: caps undecided drafts per client and in all, counting its own transaction and not expired ones', async () => {
    const repos = await make();
    const caps = { perClient: 2, total: 3 };
    await repos.accessRequests.put(request({ app_client_id: 'x', expires_at: new Date(NOW - 1).toISOString() }));
    await repos.accessRequests.put(request({ app_client_id: 'x', status: 'approved' }));
    expect(await repos.accessRequests.insertDraft(request({ app_client_id: 'x' }), caps, NOW)).toEqual({ stored: true });
    const both = await repos.transaction(async (t) => [await t.accessRequests.insertDraft(request({ app_client_id: 'x' }), caps, NOW), await t.accessRequests.insertDraft(request({ app_client_id: 'x' }), caps, NOW)]);
    expect(both).toEqual([{ stored: true }, { stored: false, full: 'client', count: 2 }]);
    expect(await repos.accessRequests.insertDraft(request({ app_client_id: 'y' }), caps, NOW)).toEqual({ stored: true });
    expect(await repos.accessRequests.insertDraft(request({ app_client_id: 'z' }), caps, NOW)).toEqual({ stored: false, full: 'all', count: 3 });
    expect(await repos.accessRequests.count()).toBe(5);
  });

  it('finds approved requests per client and user, keys by hash and users by any case of their name', async () => {
    const repos = await make();
    const mine = request({ status: 'approved', user_id: 'u1' });
    await repos.accessRequests.put(mine);
    await repos.accessRequests.put(request({ status: 'approved', user_id: 'u2' }));
    await repos.accessRequests.put(request({ status: 'approved', app_client_id: 'other', user_id: 'u1' }));
    await repos.accessRequests.put(request({ status: 'revoked', user_id: 'u1' }));
    expect((await repos.accessRequests.approvedFor('app')).length).toBe(2);
    expect((await repos.accessRequests.approvedFor('app', 'u1')).map((r) => r.id)).toEqual([mine.id]);

    const key: ApiKeyRecord = { id: 'k1', name: 'k', user_id: 'u1', access_request_id: mine.id, key_hash: 'abc', created_at: new Date(NOW).toISOString(), expires_at: null, revoked_at: null };
    await repos.apiKeys.put(key);
    expect((await repos.apiKeys.findByHash('abc'))?.id).toBe('k1');
    await repos.apiKeys.put({ ...key, key_hash: 'def' });
    expect(await repos.apiKeys.findByHash('abc')).toBeUndefined();
    expect((await repos.apiKeys.findByHash('def'))?.id).toBe('k1');
    await repos.apiKeys.delete('k1');
    expect(await repos.apiKeys.findByHash('def')).toBeUndefined();

    await repos.users.put(user('u1', 'Alice'));
    expect((await repos.users.findByName('aLiCe'))?.id).toBe('u1');
    expect(await repos.users.findByName('bob')).toBeUndefined();
  });

  it("bearerRecords, where offered, answers what the separate reads answer, each time afresh", async (ctx) => {
    const repos = await make();
    if (!repos.bearerRecords) return ctx.skip();
    const reads = repos.bearerRecords;
    const grant = request({ status: 'approved', user_id: 'u1' });
    await repos.accessRequests.put(grant);
    await repos.users.put(user('u1'));
    expect(await reads.forToken(grant.id, 'u1', null)).toEqual({ record: grant, user: user('u1'), ended: undefined });
    expect(await reads.forToken('gone', 'nobody', 'EndedGrant:none')).toEqual({ record: undefined, user: undefined, ended: undefined });
    const mark = { model: 'EndedGrant', id: 'g1', payload: '', grant_id: null, expires_at: NOW + 1000, created_at: NOW };
    await repos.oauthState.put(mark);
    expect((await reads.forToken(grant.id, 'u1', 'EndedGrant:g1')).ended).toEqual(mark);
    // a revoke shows on the very next read
    await repos.accessRequests.update(grant.id, (r) => {
      r.status = 'revoked';
    });
    expect((await reads.forToken(grant.id, 'u1', null)).record?.status).toBe('revoked');

    const key: ApiKeyRecord = { id: 'k1', name: 'k', user_id: 'u1', access_request_id: grant.id, key_hash: 'abc', created_at: new Date(NOW).toISOString(), expires_at: null, revoked_at: null };
    await repos.apiKeys.put(key);
    expect(await reads.forKey('abc')).toEqual({ key, record: await repos.accessRequests.get(grant.id), user: user('u1') });
    expect(await reads.forKey('nothing')).toEqual({});
    await repos.apiKeys.put({ ...key, revoked_at: new Date(NOW).toISOString() });
    expect((await reads.forKey('abc')).key?.revoked_at).not.toBeNull();
    await repos.users.delete('u1');
    await repos.accessRequests.delete(grant.id);
    expect(await reads.forKey('abc')).toEqual({ key: { ...key, revoked_at: new Date(NOW).toISOString() }, record: undefined, user: undefined });
    // what it hands out is a value, as every read's
    expect(Object.isFrozen((await reads.forKey('abc')).key)).toBe(true);
  });

  it('keeps tool lists by instance, and single values', async () => {
    const repos = await make();
    expect(await repos.mcpTools.get('i1')).toBeUndefined();
    await repos.mcpTools.set('i1', { tools: [{ name: 't', input_schema: {} }], refreshed_at: 'now' });
    expect((await repos.mcpTools.get('i1'))?.tools[0].name).toBe('t');
    expect(await repos.mcpTools.delete('i1')).toBe(true);
    expect(await repos.mcpTools.get('i1')).toBeUndefined();
    expect(await repos.meta.get()).toBeNull();
    expect(await repos.signingKeys.get()).toBeUndefined();
    await repos.signingKeys.set('sealed');
    expect(await repos.signingKeys.get()).toBe('sealed');
  });

  it('changes a single value only from what the writer saw, and of two such writes at once one wins', async () => {
    const repos = await make();
    expect(await repos.signingKeys.setIfUnchanged('not-there', 'a')).toBe(false);
    expect(await repos.signingKeys.get()).toBeUndefined();
    const first = await Promise.all([repos.signingKeys.setIfUnchanged(undefined, 'a'), repos.signingKeys.setIfUnchanged(undefined, 'b')]);
    expect(first.filter(Boolean)).toHaveLength(1);
    const stored = await repos.signingKeys.get();
    expect(stored).toBe(first[0] ? 'a' : 'b');
    const next = await Promise.all([repos.signingKeys.setIfUnchanged(stored, 'c'), repos.signingKeys.setIfUnchanged(stored, 'd')]);
    expect(next.filter(Boolean)).toHaveLength(1);
    expect(await repos.signingKeys.get()).toBe(next[0] ? 'c' : 'd');
    expect(await repos.signingKeys.setIfUnchanged(stored, 'e')).toBe(false);
  });
});
