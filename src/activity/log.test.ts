/**
 * The activity log file on its own (a real file in a temp dir): past its bound it cuts itself
 * while it keeps writing, and a list never reads across a cut.
 */
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../log.js';
import { ACTIVITY_FILE, ActivityLog } from './log.js';
import type { ActivityEvent } from './schemas.js';

const event = (n: number): Omit<ActivityEvent, 'id'> => ({
  time: new Date(Date.UTC(2026, 10, 26, 12, 0, 0, n)).toISOString(),
  kind: 'chat',
  endpoint: '/v1/chat/completions',
  duration_ms: n,
  status: 200,
  outcome: 'ok',
  access_request_id: 'grant-1',
  app_client_id: 'app',
  user: 'alice',
});

/** Settles with `promise`, or with 'hung' when it takes longer than `ms`. */
const within = <T>(promise: Promise<T>, ms = 5_000) => Promise.race([promise, new Promise<'hung'>((r) => setTimeout(() => r('hung'), ms).unref())]);

describe('the activity log file', () => {
  it('grown past its bound between sweeps, it cuts itself and goes on writing (it used to wait for itself for good)', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-activity-'));
    const log = await ActivityLog.open(dir, { retentionDays: 0, maxEvents: 10 }, Date.now, createLogger('silent'));
    for (let n = 0; n < 300; n++) log.record(event(n));
    expect(await within(log.flush())).toBeUndefined();
    // the cut was queued after the write: once it ran, only the newest ten are in the file
    await within(log.dropOld());
    const lines = (await readFile(path.join(dir, ACTIVITY_FILE), 'utf8')).trim().split('\n');
    expect(lines).toHaveLength(10);
    for (let n = 300; n < 320; n++) log.record(event(n));
    expect(await within(log.flush())).toBeUndefined();
    const listed = await within(log.list({ limit: 100 }));
    expect(listed !== 'hung' && listed.map((e) => e.duration_ms)).toEqual([319, 318, 317, 316, 315, 314, 313, 312, 311, 310]);
    await log.close();
  });

  it('lists the same events while a cut runs as before it', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-activity-'));
    const log = await ActivityLog.open(dir, { retentionDays: 0, maxEvents: 50 }, Date.now, createLogger('silent'));
    for (let n = 0; n < 200; n++) log.record(event(n));
    await log.flush();
    const [cut, listed] = await Promise.all([log.dropOld(), log.list({ limit: 5 })]);
    expect(cut).toBeGreaterThanOrEqual(0);
    expect(listed.map((e) => e.duration_ms)).toEqual([199, 198, 197, 196, 195]);
    await log.close();
  });
});

describe('a damaged activity log', () => {
  const capture = () => {
    const lines: { level: number; msg: string; file?: string; line?: number }[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
        cb();
      },
    });
    return { logger: createLogger('debug', sink), lines };
  };
  const bounds = { retentionDays: 0, maxEvents: 1000 };
  const lineOf = (id: number) => JSON.stringify({ id: String(id), ...event(id) });
  const listed = async (log: ActivityLog) => (await log.list({ limit: 100 })).map((e) => e.id).reverse();

  it('a last line without its newline is completed before anything is appended: it and every later event survive a restart', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-activity-'));
    const file = path.join(dir, ACTIVITY_FILE);
    await writeFile(file, `${lineOf(1)}\n${lineOf(2)}\n${lineOf(3)}`);
    const { logger, lines } = capture();
    const log = await ActivityLog.open(dir, bounds, Date.now, logger);
    expect(lines.find((l) => l.file === file && l.line === 3), JSON.stringify(lines)).toBeDefined();
    log.record(event(4));
    log.record(event(5));
    await log.flush();
    expect(await listed(log)).toEqual(['1', '2', '3', '4', '5']);
    await log.close();
    const again = await ActivityLog.open(dir, bounds, Date.now, logger);
    expect(await listed(again)).toEqual(['1', '2', '3', '4', '5']);
    await again.close();
    expect((await readFile(file, 'utf8')).split('\n').filter(Boolean).map((l) => JSON.parse(l).id)).toEqual(['1', '2', '3', '4', '5']);
  });

  it('a garbage middle line costs that line alone, and the log names the file and the line', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-activity-'));
    const file = path.join(dir, ACTIVITY_FILE);
    await writeFile(file, `${lineOf(1)}\n${lineOf(2)}\n{"id":"3","ti\u0000garbage\n${lineOf(4)}\n`);
    const { logger, lines } = capture();
    const log = await ActivityLog.open(dir, bounds, Date.now, logger);
    const said = lines.find((l) => l.file === file && l.line === 3);
    expect(said, JSON.stringify(lines)).toBeDefined();
    expect(said!.level).toBeGreaterThanOrEqual(40);
    expect(await listed(log)).toEqual(['1', '2', '4']);
    log.record(event(5));
    await log.flush();
    await log.close();
    const again = await ActivityLog.open(dir, bounds, Date.now, logger);
    expect(await listed(again)).toEqual(['1', '2', '4', '5']);
    await again.close();
  });
});
