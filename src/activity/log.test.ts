/**
 * The activity log file on its own (a real file in a temp dir): past its bound it cuts itself
 * while it keeps writing, and a list never reads across a cut.
 */
import { mkdtemp, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
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
