import { afterEach, describe, expect, it } from 'vitest';
import { AppError } from '../src/errors.js';
import { hostile, running, session, testSupervisor } from './helpers/command.js';

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanup.map((c) => c()));
  cleanup = [];
});

function supervisor(...args: Parameters<typeof testSupervisor>) {
  const t = testSupervisor(...args);
  cleanup.push(t.done);
  return t;
}

describe('command supervisor: a session', () => {
  it('runs a server per key, each with state of its own, and ends it on close', async () => {
    const { sup } = supervisor();
    const a = await sup.start('inst', 'g1:s1', hostile('stateful'), []);
    const b = await sup.start('inst', 'g2:s1', hostile('stateful'), []);
    const sa = session(a);
    const sb = session(b);
    expect((await sa.initialize()).result.serverInfo.name).toBe('hostile');
    await sb.initialize();
    expect((await sa.call('count')).result.content[0].text).toBe('1');
    expect((await sa.call('count')).result.content[0].text).toBe('2');
    expect((await sb.call('count')).result.content[0].text).toBe('1');
    expect(a.pid).not.toBe(b.pid);
    expect(sup.status('inst')).toMatchObject({ live: 2, status: 'running' });
    await a.close();
    expect(running(a.pid)).toBe(false);
    expect((await a.exited).reason).toBe('stopped');
    expect(sup.status('inst')).toMatchObject({ live: 1, last_exit: { reason: 'stopped' } });
    expect(() => a.send({ jsonrpc: '2.0', method: 'ping', id: 9 })).toThrow(AppError);
  });
});
