import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { AckWaiter, guards, LEASE_MS } from './leases.js';

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
