/**
 * The command supervisor on its own, with no daemon: real child processes (the hostile servers of
 * test/helpers/hostile-stdio) started, bounded, faulted and ended.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AppError } from '../src/errors.js';
import type { SupervisedChild } from '../src/mcp/command/child.js';
import type { ChildExit, CommandChild } from '../src/mcp/command/supervisor.js';
import { gone, hostile, running, session, testSupervisor } from './helpers/command.js';
import { eventually } from './helpers/wait.js';

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

/** The exit `onexit` reports (set before anything can make the child exit). */
function exitOf(child: CommandChild): Promise<ChildExit> {
  return new Promise((resolve) => (child.onexit = resolve));
}

async function refusal(p: Promise<unknown>): Promise<AppError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AppError);
  return err as AppError;
}

describe('command supervisor: sessions', () => {
  it('runs a server per key, each with state of its own, and ends it on close', async () => {
    const { sup, dir } = supervisor();
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
    const record = JSON.parse(readFileSync(path.join(dir, 'command-children.json'), 'utf8'));
    expect(record.children.map((c: any) => c.pid).sort()).toEqual([a.pid, b.pid].sort());
    expect(record.children[0]).toMatchObject({ instance: 'inst', pgid: record.children[0].pid, start: expect.any(Number) });
    expect(JSON.stringify(record)).not.toContain('g1:s1');
    await a.close();
    expect(running(a.pid)).toBe(false);
    expect((await a.exited).reason).toBe('stopped');
    expect(sup.status('inst')).toMatchObject({ live: 1, last_exit: { reason: 'stopped', at: expect.any(String) } });
    expect(() => a.send({ jsonrpc: '2.0', method: 'ping', id: 9 })).toThrow(AppError);
    await eventually(() => !readFileSync(path.join(dir, 'command-children.json'), 'utf8').includes(`"pid": ${a.pid},`), 'the closed child out of the record');
  });

  it('stops the children of a key prefix (a revoked grant) and of an instance, and no others', async () => {
    const { sup } = supervisor();
    const g1a = await sup.start('one', 'g1:a', hostile('stateful'), []);
    const g1b = await sup.start('two', 'g1:b', hostile('stateful'), []);
    const g2 = await sup.start('one', 'g2:a', hostile('stateful'), []);
    const other = await sup.start('three', 'g3:a', hostile('stateful'), []);
    await sup.stopKeys('g1:');
    expect([running(g1a.pid), running(g1b.pid), running(g2.pid), running(other.pid)]).toEqual([false, false, true, true]);
    await sup.stopInstance('one');
    expect([running(g2.pid), running(other.pid)]).toEqual([false, true]);
    expect(sup.totalLive()).toBe(1);
  });

  it('a child that exits before its handlers are set still reports its exit', async () => {
    const { sup } = supervisor();
    const child = await sup.start('inst', 'k', hostile('exit-at-start'), []);
    await child.exited;
    const exit = await exitOf(child);
    expect(exit).toMatchObject({ code: 2, signal: null, reason: 'crash' });
  });
});

describe('command supervisor: bounds', () => {
  it('refuses a start past the bound of an instance, at once, with 503 and Retry-After', async () => {
    const { sup } = supervisor({ maxPerInstance: 2, maxTotal: 10 });
    await sup.start('inst', 'a', hostile('stateful'), []);
    await sup.start('inst', 'b', hostile('stateful'), []);
    const err = await refusal(sup.start('inst', 'c', hostile('stateful'), []));
    expect(err).toMatchObject({ status: 503, code: 'mcp_servers_busy' });
    expect(Number(err.headers['Retry-After'])).toBeGreaterThanOrEqual(1);
    expect(sup.status('inst').live).toBe(2);
    // another instance still has room
    await sup.start('other', 'a', hostile('stateful'), []);
  });

  it('refuses a start past the bound in all, counting starts under way', async () => {
    const { sup } = supervisor({ maxPerInstance: 10, maxTotal: 3 });
    const started = await Promise.allSettled(['a', 'b', 'c', 'd', 'e'].map((k, i) => sup.start(`inst${i % 2}`, k, hostile('stateful'), [])));
    expect(started.filter((s) => s.status === 'fulfilled')).toHaveLength(3);
    const refused = started.filter((s) => s.status === 'rejected').map((s) => (s as PromiseRejectedResult).reason);
    expect(refused.map((e) => [e.status, e.code, typeof e.headers['Retry-After']])).toEqual([
      [503, 'mcp_servers_busy', 'string'],
      [503, 'mcp_servers_busy', 'string'],
    ]);
    expect(sup.totalLive()).toBe(3);
  });

  it('a slot frees when its child ends', async () => {
    const { sup } = supervisor({ maxPerInstance: 1 });
    const a = await sup.start('inst', 'a', hostile('stateful'), []);
    await refusal(sup.start('inst', 'b', hostile('stateful'), []));
    await a.close();
    await sup.start('inst', 'b', hostile('stateful'), []);
  });
});

describe('command supervisor: what a child writes', () => {
  it('a 20 MiB line ends the child (line_too_long) and the reader never holds more than the limit', async () => {
    const limit = 16 * 1024 * 1024;
    const { sup } = supervisor({ maxLineBytes: limit });
    const child = (await sup.start('inst', 'k', hostile('long-line', [String(20 * 1024 * 1024)]), [])) as SupervisedChild;
    const exit = exitOf(child);
    const s = session(child);
    void s.request('ping');
    expect(await exit).toMatchObject({ reason: 'line_too_long' });
    expect(child.stdout.highWater).toBeLessThanOrEqual(limit);
    expect(child.stdout.highWater).toBeGreaterThan(limit / 2);
    expect(child.stdout.holding).toBe(0);
    await gone(child.pid, 'the child with the long line to be ended');
    expect(sup.status('inst')).toMatchObject({ live: 0, last_exit: { reason: 'line_too_long' } });
  });

  it('a line within the limit passes whole', async () => {
    const { sup } = supervisor({ maxLineBytes: 64 * 1024 });
    const child = await sup.start('inst', 'k', hostile('stateful'), []);
    const s = session(child);
    await s.initialize();
    const big = 'x'.repeat(40 * 1024);
    const answer = await s.request('tools/call', { name: 'nope', arguments: { big } });
    expect(answer.error.code).toBe(-32602);
    expect(child.ended).toBe(false);
  });

  for (const kind of ['text', 'json']) {
    it(`output that is not JSON-RPC (${kind}) ends the child (not_json_rpc)`, async () => {
      const { sup } = supervisor();
      const child = await sup.start('inst', 'k', hostile('garbage', [kind]), []);
      const exit = exitOf(child);
      const s = session(child);
      void s.initialize();
      expect(await exit).toMatchObject({ reason: 'not_json_rpc' });
      expect(s.received).toEqual([]);
      await gone(child.pid, 'the child that wrote garbage to be ended');
    });
  }

  it('a child flooding stdout is read with bounded memory and still stops at once', async () => {
    const { sup } = supervisor({ maxLineBytes: 64 * 1024 });
    const child = (await sup.start('inst', 'k', hostile('flood'), [])) as SupervisedChild;
    const s = session(child);
    await s.initialize();
    await eventually(() => s.received.length > 5000, 'a flood of notifications');
    expect(child.stdout.highWater).toBeLessThanOrEqual(64 * 1024);
    await child.close();
    expect(running(child.pid)).toBe(false);
  });
});

describe('command supervisor: what svc sends', () => {
  it('a child that stops reading its stdin is ended before svc holds more than the backlog bound (stdin_full)', async () => {
    const { sup } = supervisor();
    const child = await sup.start('inst', 'k', hostile('deaf'), []);
    const exit = exitOf(child);
    child.onmessage = () => undefined;
    const big = 'x'.repeat(1024 * 1024);
    let sent = 0;
    while (!child.ended && sent < 64) {
      child.send({ jsonrpc: '2.0', method: 'notifications/message', params: { data: big } });
      sent++;
    }
    expect(child.ended).toBe(true);
    expect(sent).toBeLessThanOrEqual(10);
    expect(await exit).toMatchObject({ reason: 'stdin_full' });
    await gone(child.pid, 'the deaf child to be ended');
  });
});

describe('command supervisor: faults', () => {
  it('a crash reports the exit at once, and the next start is a fresh process', async () => {
    const { sup } = supervisor();
    const child = await sup.start('inst', 'k', hostile('crash-on-call'), []);
    const exit = exitOf(child);
    const s = session(child);
    await s.initialize();
    void s.call('count');
    expect(await exit).toMatchObject({ code: 3, signal: null, reason: 'crash' });
    expect(sup.status('inst')).toMatchObject({ live: 0, last_exit: { code: 3, reason: 'crash' }, status: 'not running; the last one exited with code 3' });
    const next = await sup.start('inst', 'k', hostile('crash-on-call'), []);
    expect(next.pid).not.toBe(child.pid);
    expect((await session(next).initialize()).result).toBeTruthy();
  });

  it('a crash loop backs off, says why in the status, and starts again after the wait (doubled next time)', async () => {
    let now = Date.parse('2026-01-01T00:00:00Z');
    const { sup } = supervisor({ clock: () => now, crashLoop: { crashes: 3, windowMs: 60_000, backoffMs: 10_000, maxBackoffMs: 60_000 } });
    const crashThrice = async () => {
      for (let i = 0; i < 3; i++) {
        const child = await sup.start('inst', `k${i}`, hostile('exit-at-start'), []);
        await child.exited;
        now += 1000;
      }
    };
    await crashThrice();
    const err = await refusal(sup.start('inst', 'k', hostile('stateful'), []));
    expect(err).toMatchObject({ status: 503, code: 'mcp_server_backoff' });
    // the third failure came 1 s ago: 9 s of the 10 s wait are left
    expect(err.headers['Retry-After']).toBe('9');
    expect(sup.status('inst').status).toBe('backing off for 9 s: 3 failures within 60 s, the last exited with code 2');
    // another instance is not held back
    await sup.start('other', 'k', hostile('stateful'), []);
    now += 9000;
    await crashThrice();
    const again = await refusal(sup.start('inst', 'k', hostile('stateful'), []));
    expect(again.headers['Retry-After']).toBe('19');
    // a quiet spell of a whole window after the wait starts the waits from 10 s again
    now += 19_000 + 60_001;
    await crashThrice();
    expect((await refusal(sup.start('inst', 'k', hostile('stateful'), []))).headers['Retry-After']).toBe('9');
  });

  it('a child idle for the timeout is ended, and traffic either way resets the timer', async () => {
    const { sup } = supervisor({ idleTimeoutMs: 1500 });
    const busy = await sup.start('inst', 'busy', hostile('stateful'), []);
    const idle = await sup.start('inst', 'idle', hostile('stateful'), []);
    const idleExit = exitOf(idle);
    const s = session(busy);
    await session(idle).initialize();
    // the busy one, pinged every 100 ms, outlives the idle one and several timeouts more
    let pings = 0;
    while (!idle.ended || pings < 40) {
      await s.request('ping');
      pings++;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await idleExit).toMatchObject({ reason: 'idle' });
    expect(busy.ended).toBe(false);
    const busyExit = exitOf(busy);
    expect(await busyExit).toMatchObject({ reason: 'idle' });
    await gone(busy.pid, 'the idle child to be ended');
  });
});

describe('command supervisor: stderr', () => {
  const secret = 'sekrit-9f3a7c1e2b4d6f80';

  it('logs stderr a line at a time, bounded a second, control characters inert and the secrets scrubbed', async () => {
    const { sup, log } = supervisor({ clock: () => 1_000_000 });
    const child = await sup.start('inst', 'k', hostile('stderr-secret', ['500'], { SECRET_TOKEN: secret }), [secret, 'short']);
    const s = session(child);
    await s.initialize();
    await s.call('count');
    await child.close();
    const stderr = log.lines().filter((l) => l.msg === 'command server stderr');
    expect(stderr).toHaveLength(20);
    expect(stderr[0]).toMatchObject({ mcp_instance: 'inst', pid: child.pid, stderr: 'line 0 token=[redacted] \uFFFD[31mred\uFFFD[0m' });
    await eventually(() => log.lines().find((l) => l.msg.includes('stderr lines dropped')), 'the count of dropped lines');
    expect(log.lines().find((l) => l.msg.includes('stderr lines dropped'))!.dropped).toBe(481);
    expect(log.text()).not.toContain('sekrit');
    expect(log.text()).not.toContain('\u001b');
  });

  it('a line over the cap is cut, and a secret astride the cut is scrubbed', async () => {
    const { sup, log } = supervisor();
    const child = await sup.start('inst', 'k', hostile('stderr-secret', ['0'], { SECRET_TOKEN: secret }), [secret]);
    const s = session(child);
    await s.initialize();
    await s.call('count');
    const line = await eventually(() => log.lines().find((l) => l.msg === 'command server stderr'), 'the long stderr line');
    expect(line.cut).toBe(true);
    expect(line.stderr.length).toBeLessThanOrEqual(4096);
    expect(line.stderr).toMatch(/^y+\[redacted\]$/);
    expect(log.text()).not.toContain('sekrit');
  });
});

describe('command supervisor: stopping', () => {
  it('stopAll ends every child and grandchild, TERM-ignoring ones too, and starts no more', async () => {
    const { sup } = supervisor();
    const kids = await Promise.all(['stateful', 'stubborn', 'grandchild', 'silent'].map((n) => sup.start(n, n, hostile(n), [])));
    const sessions = kids.map(session);
    await Promise.all(sessions.slice(0, 3).map((s) => s.initialize()));
    const grand = (await sessions[2].call('pid')).result.grandchild as number;
    expect(running(grand)).toBe(true);
    const watchdog = sup.watchdogPid!;
    expect(running(watchdog)).toBe(true);
    await sup.stopAll();
    expect([...kids.map((k) => running(k.pid)), running(grand)]).toEqual([false, false, false, false, false]);
    expect((await kids[1].exited).signal).toBe('SIGKILL');
    await gone(watchdog, 'the watchdog to exit once its children are ended');
    const err = await refusal(sup.start('stateful', 'again', hostile('stateful'), []));
    expect(err.code).toBe('mcp_servers_busy');
  });

  it('a group left by a child that exited is ended too', async () => {
    const { sup } = supervisor();
    const child = await sup.start('inst', 'k', hostile('grandchild'), []);
    const s = session(child);
    await s.initialize();
    const grand = (await s.call('pid')).result.grandchild as number;
    const exit = exitOf(child);
    // the leader exits at the end of its input; its grandchild ignores that and SIGTERM
    (child as SupervisedChild)['proc'].stdin!.end();
    expect(await exit).toMatchObject({ reason: 'crash', code: 0 });
    await gone(grand, 'the grandchild of an exited server to be ended');
  });
});

describe('command supervisor: tryOnce', () => {
  it('answers ok for a server that answers initialize, and leaves nothing running', async () => {
    const { sup } = supervisor();
    expect(await sup.tryOnce(hostile('stateful'), [], 10_000)).toEqual({ ok: true });
    expect(sup.totalLive()).toBe(0);
  });

  it('names the command and its exit code, or signal, and what it said on stderr', async () => {
    const { sup, log } = supervisor();
    const spec = hostile('exit-at-start');
    const code = await sup.tryOnce(spec, [], 10_000);
    expect(code).toEqual({ ok: false, message: `${JSON.stringify(process.execPath)} exited with code 2 before it answered initialize: error: DATABASE_PATH is not set` });
    const signal = await sup.tryOnce(hostile('exit-at-start', ['SIGKILL']), [], 10_000);
    expect(signal).toMatchObject({ ok: false, message: expect.stringContaining('was killed by SIGKILL before it answered initialize') });
    expect(log.lines().some((l) => l.msg === 'command server ended' && l.code === 2)).toBe(true);
  });

  it('names a command that does not exist, one that is no program, and a missing directory', async () => {
    const { sup, dir: tmp } = supervisor();
    const plain = path.join(tmp, 'not-a-program');
    writeFileSync(plain, 'just text\n', { mode: 0o644 });
    const missing = await sup.tryOnce({ command: 'no-such-mcp-server-x', args: [], env: {}, cwd: null }, [], 10_000);
    expect(missing).toEqual({ ok: false, message: 'Cannot run "no-such-mcp-server-x": no such command (ENOENT).' });
    const notProgram = await sup.tryOnce({ command: plain, args: [], env: {}, cwd: null }, [], 10_000);
    expect(notProgram).toEqual({ ok: false, message: `Cannot run ${JSON.stringify(plain)}: permission denied (EACCES).` });
    const dir = await sup.tryOnce({ ...hostile('stateful'), cwd: '/no/such/dir' }, [], 10_000);
    expect(dir).toEqual({ ok: false, message: `Cannot run ${JSON.stringify(process.execPath)}: its working directory /no/such/dir does not exist.` });
    const empty = await sup.tryOnce({ command: '', args: [], env: {}, cwd: null }, [], 10_000);
    expect(empty).toEqual({ ok: false, message: `Cannot run "": The argument 'file' cannot be empty.` });
    const nul = await sup.tryOnce({ ...hostile('stateful'), args: ['a\0b'] }, [], 10_000);
    expect(nul).toMatchObject({ ok: false, message: expect.stringContaining('without null bytes') });
    // start() refuses the same with an error naming it
    const err = await refusal(sup.start('inst', 'k', { command: 'no-such-mcp-server-x', args: [], env: {}, cwd: null }, []));
    expect(err).toMatchObject({ status: 502, code: 'mcp_server_failed', message: expect.stringContaining('no-such-mcp-server-x') });
    expect(sup.status('inst').last_exit).toMatchObject({ reason: 'spawn_failed' });
  });

  it('gives up on one that never answers, and ends it', async () => {
    const { sup, dir } = supervisor();
    const answer = await sup.tryOnce(hostile('silent'), [], 300);
    expect(answer).toEqual({ ok: false, message: `${JSON.stringify(process.execPath)} did not answer initialize within 300 ms.` });
    const record = JSON.parse(readFileSync(path.join(dir, 'command-children.json'), 'utf8'));
    await eventually(() => JSON.parse(readFileSync(path.join(dir, 'command-children.json'), 'utf8')).children.length === 0, 'an empty record');
    expect(existsSync(dir)).toBe(true);
    void record;
  });
});
