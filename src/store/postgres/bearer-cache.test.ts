import { describe, expect, it } from 'vitest';
import type { BearerRecordRepository } from '../repositories.js';
import type { AccessRequestRecord, ApiKeyRecord, UserRecord } from '../schema.js';
import { CachedBearerRecords } from './bearer-cache.js';

const grant = (id: string, status = 'approved') => ({ id, status }) as unknown as AccessRequestRecord;
const user = (id: string) => ({ id }) as unknown as UserRecord;
const apiKey = (id: string) => ({ id, access_request_id: 'g1', user_id: 'u1' }) as unknown as ApiKeyRecord;

/** A store whose records the test changes, counting the reads that reach it; a read may be held open. */
function fakeStore() {
  const state = { grants: new Map([['g1', grant('g1')]]), ended: new Set<string>(), keys: new Map([['h1', apiKey('k1')]]) };
  let reads = 0;
  let hold: Promise<void> | null = null;
  const inner: BearerRecordRepository = {
    async forToken(a, u, e) {
      reads++;
      const snapshot = { record: state.grants.get(a), user: user(u), ended: e !== null && state.ended.has(e) ? ({ model: 'EndedGrant' } as never) : undefined };
      if (hold) await hold;
      return snapshot;
    },
    async forKey(h) {
      reads++;
      const key = state.keys.get(h);
      return key ? { key, record: state.grants.get('g1'), user: user('u1') } : {};
    },
  };
  return {
    inner,
    state,
    reads: () => reads,
    holdReads() {
      let release!: () => void;
      hold = new Promise((r) => (release = r));
      return () => {
        hold = null;
        release();
      };
    },
  };
}

describe('the Bearer records kept on a team replica', () => {
  const lease = { ok: true, valid() {
    return this.ok;
  } };

  it('answers a second check from memory, and reads again once a record it was read from changes', async () => {
    const store = fakeStore();
    const cache = new CachedBearerRecords(store.inner, lease);
    expect((await cache.forToken('g1', 'u1', 'EndedGrant:f1')).record?.status).toBe('approved');
    expect((await cache.forToken('g1', 'u1', 'EndedGrant:f1')).record?.status).toBe('approved');
    expect(store.reads()).toBe(1);
    store.state.grants.set('g1', grant('g1', 'revoked'));
    cache.drop([['access_requests', 'g1']]);
    expect((await cache.forToken('g1', 'u1', 'EndedGrant:f1')).record?.status).toBe('revoked');
    expect(store.reads()).toBe(2);
  });

  it('drops an entry when the sign-in mark it found absent is written', async () => {
    const store = fakeStore();
    const cache = new CachedBearerRecords(store.inner, lease);
    expect((await cache.forToken('g1', 'u1', 'EndedGrant:f1')).ended).toBeUndefined();
    store.state.ended.add('EndedGrant:f1');
    cache.drop([['oauth_state', 'EndedGrant:f1']]);
    expect((await cache.forToken('g1', 'u1', 'EndedGrant:f1')).ended).toBeDefined();
  });

  it("drops an API key's entry when the key, its grant or its owner changes", async () => {
    const store = fakeStore();
    const cache = new CachedBearerRecords(store.inner, lease);
    for (const changed of [['api_keys', 'k1'], ['access_requests', 'g1'], ['users', 'u1']] as [string, string][]) {
      await cache.forKey('h1');
      const before = store.reads();
      await cache.forKey('h1');
      expect(store.reads()).toBe(before);
      cache.drop([changed]);
      await cache.forKey('h1');
      expect(store.reads()).toBe(before + 1);
    }
    // a change to anything else keeps it
    cache.drop([['users', 'u2'], ['providers', 'k1']]);
    const before = store.reads();
    await cache.forKey('h1');
    expect(store.reads()).toBe(before);
  });

  it('does not keep a read that was under way when something was dropped: it may predate the change', async () => {
    const store = fakeStore();
    const cache = new CachedBearerRecords(store.inner, lease);
    const release = store.holdReads();
    const stale = cache.forToken('g1', 'u1', null);
    store.state.grants.set('g1', grant('g1', 'revoked'));
    cache.drop([['access_requests', 'g1']]);
    release();
    expect((await stale).record?.status).toBe('approved');
    expect((await cache.forToken('g1', 'u1', null)).record?.status).toBe('revoked');
    expect(store.reads()).toBe(2);
  });

  it('keeps nothing and answers nothing from memory without a lease, and keeps no unknown key', async () => {
    const store = fakeStore();
    const cache = new CachedBearerRecords(store.inner, lease);
    await cache.forToken('g1', 'u1', null);
    lease.ok = false;
    try {
      await cache.forToken('g1', 'u1', null);
      await cache.forToken('g2', 'u1', null);
      expect(store.reads()).toBe(3);
    } finally {
      lease.ok = true;
    }
    expect(cache.size).toBe(1);
    for (let i = 0; i < 5; i++) await cache.forKey(`guess${i}`);
    expect(cache.size).toBe(1);
  });

  it('reads again after an entry has been kept a minute, and after clear()', async () => {
    const store = fakeStore();
    let now = 0;
    const cache = new CachedBearerRecords(store.inner, lease, () => now);
    await cache.forToken('g1', 'u1', null);
    now = 59_999;
    await cache.forToken('g1', 'u1', null);
    expect(store.reads()).toBe(1);
    now = 60_000;
    await cache.forToken('g1', 'u1', null);
    expect(store.reads()).toBe(2);
    cache.clear();
    await cache.forToken('g1', 'u1', null);
    expect(store.reads()).toBe(3);
  });
});
