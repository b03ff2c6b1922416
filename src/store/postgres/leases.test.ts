import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { describe, expect, it, vi } from 'vitest';
import { AckWaiter, guards, LEASE_MS, ReplicaLease } from './leases.js';

/** A read of svc_replicas that answers `rows()` (or fails), counting the reads. */
function replicasTable(rows: () => string[] | Error) {
  let reads = 0;
  const read = async () => {
    reads++;
    const answer = rows();
    if (answer instanceof Error) throw answer;
    return { rows: answer.map((origin) => ({ origin })) } as unknown as pg.QueryResult;
  };
  return { read, reads: () => reads };
}

describe("a writer's wait for the other replicas' acknowledgements", () => {
  it('returns at once when the commit found no replica to wait for', async () => {
    const table = replicasTable(() => []);
    const started = performance.now();
    await new AckWaiter('me', table.read).wait(7, performance.now(), []);
    expect(performance.now() - started).toBeLessThan(50);
    expect(table.reads()).toBe(0);
  });

  it('counts an acknowledgement heard before the wait began (it can beat the COMMIT round trip home)', async () => {
    const acks = new AckWaiter('me', replicasTable(() => ['b']).read);
    acks.heard({ a: 'b', p: 9 });
    const started = performance.now();
    await acks.wait(8, performance.now(), ['b']);
    expect(performance.now() - started).toBeLessThan(50);
  });

  it('waits for every replica named, until each has acknowledged this number or a later one', async () => {
    const acks = new AckWaiter('me', replicasTable(() => ['b', 'c']).read);
    let done = false;
    const waiting = acks.wait(5, performance.now(), ['b', 'c']).then(() => (done = true));
    acks.heard({ a: 'b', p: 5 });
    acks.heard({ a: 'c', p: 4 });
    await new Promise((r) => setTimeout(r, 30));
    expect(done).toBe(false);
    acks.heard({ a: 'c', p: 6 });
    await waiting;
    expect(done).toBe(true);
  });

  it('reads the table again for a missed acknowledgement, and waits out the lease when it cannot read', async () => {
    let answer: string[] | Error = ['b'];
    const table = replicasTable(() => answer);
    const acks = new AckWaiter('me', table.read);
    const waiting = acks.wait(3, performance.now(), ['b']);
    answer = [];
    await waiting;
    expect(table.reads()).toBeGreaterThan(0);
    // a database that cannot be asked: the wait ends when every lease taken before the commit has run out
    answer = new Error('connection lost');
    const committedAt = performance.now() - LEASE_MS + 300;
    await acks.wait(4, committedAt, null);
    expect(performance.now()).toBeGreaterThanOrEqual(committedAt + LEASE_MS);
  });

  it('after a COMMIT whose answer was lost, waits as for the latest number, or out the lease when it cannot read', async () => {
    let fail = false;
    const asked: string[] = [];
    const read = async (sql: string) => {
      asked.push(sql);
      if (fail) throw new Error('connection lost');
      return { rows: sql.includes('max(n)') ? [{ top: 12 }] : [] } as unknown as pg.QueryResult;
    };
    const acks = new AckWaiter('me', read);
    let started = performance.now();
    await acks.waitForLatest();
    expect(performance.now() - started).toBeLessThan(50);
    // the replicas yet to acknowledge were asked about the latest number
    expect(asked.some((sql) => sql.includes('acked < 12'))).toBe(true);
    fail = true;
    started = performance.now();
    await acks.waitForLatest();
    expect(performance.now() - started).toBeGreaterThanOrEqual(LEASE_MS - 1);
  });

  it('numbers the changes of the records a Bearer check reads, and no others', () => {
    expect(['access_requests', 'users', 'api_keys'].every((t) => guards(t, 'x'))).toBe(true);
    expect(guards('oauth_state', 'EndedGrant:abc')).toBe(true);
    expect(guards('oauth_state', 'RefreshToken:abc')).toBe(false);
    expect(guards('providers', 'x') || guards('held_calls', 'x') || guards('sessions', 'x')).toBe(false);
  });
});

describe("a replica's lease", () => {
  /** A pool that answers the listen's read and renews every heartbeat. */
  const renewingPool = () =>
    ({
      query: async (sql: string) => (sql.includes('renewed') ? [{ rows: [] }, { rows: [{ renewed: true }] }] : { rows: [{ top: 0 }] }),
    }) as unknown as pg.Pool;

  it('ends when the wall clock has run past it, as after a suspend the monotonic clock did not see', async () => {
    const lease = new ReplicaLease('replica-a', renewingPool(), 'svc_changes');
    let cleared = 0;
    lease.hold({ drop: () => undefined, clear: () => void cleared++ });
    const wallNow = vi.spyOn(Date, 'now');
    try {
      await lease.listen();
      await vi.waitFor(() => expect(lease.valid()).toBe(true), { timeout: 2000 });
      // suspended for a minute: the wall clock moved on, the monotonic clock did not
      const resumedAt = Date.now() + 60_000;
      wallNow.mockReturnValue(resumedAt);
      expect(lease.valid()).toBe(false);
      // the next heartbeat renews from the new time, and drops what was kept before
      const before = cleared;
      lease.heartbeat();
      await vi.waitFor(() => expect(lease.valid()).toBe(true), { timeout: 2000 });
      expect(cleared).toBeGreaterThan(before);
    } finally {
      wallNow.mockRestore();
      await lease.close();
    }
  });
});

describe('a change heard without a number (a replica of an older version, during an upgrade)', () => {
  it('drops the guarded records it names, or everything when it names a guarded table, and nothing else', () => {
    const lease = new ReplicaLease('replica-b', {} as pg.Pool, 'svc_changes');
    const dropped: [string, string][][] = [];
    let cleared = 0;
    lease.hold({ drop: (c) => void dropped.push(c), clear: () => void cleared++ });
    lease.heardUnnumbered([['access_requests', 'g1'], ['providers', 'p1'], ['oauth_state', 'EndedGrant:x'], ['oauth_state', 'Session:y']], undefined);
    expect(dropped).toEqual([[['access_requests', 'g1'], ['oauth_state', 'EndedGrant:x']]]);
    lease.heardUnnumbered(undefined, ['providers']);
    expect(cleared).toBe(0);
    lease.heardUnnumbered(undefined, ['providers', 'api_keys']);
    expect(cleared).toBe(1);
    lease.heardUnnumbered(undefined, ['oauth_state']);
    expect(cleared).toBe(2);
  });
});
