/**
 * The activity log on a nearly full disk (a small tmpfs of our own, as root can mount one): a
 * short write is never taken for a whole one, in an append or in the retention cut's copy.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import OpenAI from 'openai';
import { afterAll, describe, expect, it } from 'vitest';
import { ACTIVITY_FILE, ActivityLog } from '../src/activity/log.js';
import type { ActivityEvent } from '../src/activity/schemas.js';
import { createLogger } from '../src/log.js';
import { startTestDaemon, tempDir } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { needs } from './helpers/requirements.js';
import { startUpstream } from './helpers/upstream.js';
import { eventually } from './helpers/wait.js';

const mountDir = path.join(os.tmpdir(), `svc-activity-faults-${process.pid}`);
const canMount = (() => {
  if (process.getuid?.() !== 0) return false;
  try {
    mkdirSync(mountDir, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m,mode=0700', 'tmpfs', mountDir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

// at the file's level, so the mount goes even when a filter skips the suite that uses it
afterAll(() => {
  if (!canMount) return;
  try {
    execFileSync('umount', ['-l', mountDir], { stdio: 'ignore' });
  } catch {
    /* already gone */
  }
  rmSync(mountDir, { recursive: true, force: true });
});

const event = (n: number): Omit<ActivityEvent, 'id'> => ({
  time: new Date().toISOString(),
  kind: 'chat',
  endpoint: '/v1/chat/completions',
  duration_ms: n,
  status: 200,
  outcome: 'ok',
  access_request_id: 'grant-1',
  app_client_id: 'app',
  user: 'alice',
});

const filler = path.join(mountDir, 'filler');
/** Fills the disk, then gives `room` bytes back. */
function leaveRoom(room: number): void {
  const spare = path.join(mountDir, 'spare');
  writeFileSync(spare, Buffer.alloc(room));
  try {
    writeFileSync(filler, Buffer.alloc(8 * 1024 * 1024));
  } catch {
    /* ENOSPC: the disk is full, as intended */
  }
  rmSync(spare);
}

function capturedLogger() {
  const lines: { level: number; msg: string; file?: string; err?: string }[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      cb();
    },
  });
  return { logger: createLogger('debug', sink), lines };
}

/** The file's lines, each parsed (a torn or glued line throws). */
const linesOf = async (dir: string) =>
  (await readFile(path.join(dir, ACTIVITY_FILE), 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as ActivityEvent);

describe.skipIf(!needs(Boolean(canMount), 'activity faults (nearly full disk)', 'root, to mount a tmpfs', 'sudo npm test'))('the activity log on a nearly full disk', () => {
  it('a short append keeps its batch and writes it whole once there is room: no event lost, no torn line', async () => {
    const dir = path.join(mountDir, 'direct');
    mkdirSync(dir);
    const { logger, lines } = capturedLogger();
    const log = await ActivityLog.open(dir, { retentionDays: 0, maxEvents: 100_000 }, Date.now, logger);
    leaveRoom(8 * 1024);
    try {
      for (let n = 0; n < 200; n++) log.record(event(n));
      await log.flush();
      // what is on disk is whole lines only, each of an event written whole
      const onDisk = await linesOf(dir);
      expect(onDisk.length).toBeLessThan(200);
      expect(lines.some((l) => l.msg.startsWith('activity log: could not write events') && /ENOSPC/.test(l.err ?? ''))).toBe(true);
      expect((await log.list({ limit: 1000 })).length).toBe(200);
    } finally {
      rmSync(filler);
    }
    await log.flush();
    expect((await linesOf(dir)).map((e) => e.duration_ms)).toEqual(Array.from({ length: 200 }, (_, n) => n));
    await log.close();
    const again = await ActivityLog.open(dir, { retentionDays: 0, maxEvents: 100_000 }, Date.now, logger);
    expect((await again.list({ limit: 1000 })).length).toBe(200);
    await again.close();
    rmSync(dir, { recursive: true });
  });

  it('a retention cut the disk cannot hold leaves the log as it was, and says why', async () => {
    const dir = path.join(mountDir, 'cut');
    mkdirSync(dir);
    const { logger, lines } = capturedLogger();
    const log = await ActivityLog.open(dir, { retentionDays: 0, maxEvents: 100 }, Date.now, logger);
    // 200 events: past the bound of 100, short of where a write queues a cut of its own (a tenth and 100 more)
    for (let n = 0; n < 200; n++) log.record(event(n));
    await log.flush();
    await log.list({ limit: 1 });
    expect(await linesOf(dir)).toHaveLength(200);
    const before = await readFile(path.join(dir, ACTIVITY_FILE));
    leaveRoom(8 * 1024);
    try {
      const logged = lines.length;
      expect(await log.dropOld()).toBe(0);
      expect(await readFile(path.join(dir, ACTIVITY_FILE))).toEqual(before);
      const why = lines.slice(logged).find((l) => l.msg.startsWith('activity log: could not remove old events'));
      expect(why, JSON.stringify(lines.slice(logged))).toBeDefined();
      expect(why!.err).toMatch(/ENOSPC|disk is full/);
      expect((await log.list({ limit: 1000 })).map((e) => e.duration_ms)).toEqual(Array.from({ length: 100 }, (_, n) => 199 - n));
    } finally {
      rmSync(filler);
    }
    expect(await log.dropOld()).toBeGreaterThan(0);
    expect((await linesOf(dir)).map((e) => e.duration_ms)).toEqual(Array.from({ length: 100 }, (_, n) => 100 + n));
    await log.close();
    rmSync(dir, { recursive: true });
  });

  it('200 chats through the daemon with 8 KiB left: every event is kept, none torn, and all are there after a restart', { timeout: 120_000 }, async () => {
    const dataDir = path.join(mountDir, 'daemon');
    const upstream = await startUpstream();
    const config = { rateLimitClient: 0, rateLimitAddress: 0 };
    let d = await startTestDaemon({ dataDir, config });
    try {
      const password = d.adminPassword;
      const admin = await new Api(d.url).login('admin', password);
      expect((await admin.post('/svc/v1/providers', { name: 'local', base_url: upstream.url })).status).toBe(201);
      const { clientId } = await registerClient(admin, { public: true });
      const created = await new Api(d.url).post('/svc/v1/apps/request-access', { app_client_id: clientId, flow_type: 'popup', requested_role: 'scope_user_user', requested: { version: '1' } });
      const approved = await admin.put(`/svc/v1/access-requests/${created.body.id}/approve`, { approved_role: 'scope_user_user' });
      const token = (await authorize(await oidcConfig(d, clientId), admin, approved.body.access_request_scope)).tokens!.access_token;
      const openai = new OpenAI({ baseURL: `${d.url}/v1`, apiKey: token, maxRetries: 0, timeout: 10_000 });
      await d.activity.flush();
      const already = (await linesOf(dataDir)).length;
      leaveRoom(8 * 1024);
      try {
        for (let i = 0; i < 200; i++) await openai.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: `chat ${i}` }] });
        await d.activity.flush();
        // on disk now: whole lines only
        expect((await linesOf(dataDir)).length).toBeLessThan(already + 200);
      } finally {
        rmSync(filler);
      }
      await eventually(async () => (await linesOf(dataDir)).length >= already + 200, 'the kept events written once there is room');
      await d.close();
      d = await startTestDaemon({ dataDir, config });
      const listed = (await (await new Api(d.url).login('admin', password)).get('/svc/v1/activity?limit=1000')).body.data as ActivityEvent[];
      expect(listed.filter((e) => e.endpoint === '/v1/chat/completions' && e.outcome === 'ok')).toHaveLength(200);
      expect((await linesOf(dataDir)).filter((e) => e.endpoint === '/v1/chat/completions' && e.outcome === 'ok')).toHaveLength(200);
    } finally {
      await d.close().catch(() => undefined);
      await upstream.close();
    }
  });
});

describe('a damaged activity log through the daemon', () => {
  it('a garbage middle line and a last line without its newline: only the garbage line is lost, each is named in the log, and later events survive a restart', async () => {
    const dataDir = await tempDir();
    const file = path.join(dataDir, ACTIVITY_FILE);
    const line = (id: number) => JSON.stringify({ id: String(id), ...event(id) });
    writeFileSync(file, `${line(1)}\n${line(2)}\nnot json at all\n${line(4)}\n${line(5)}`, { mode: 0o600 });
    const config = { rateLimitClient: 0, rateLimitAddress: 0 };
    let d = await startTestDaemon({ dataDir, config });
    try {
      const password = d.adminPassword;
      const logged = d.logs.map((l) => JSON.parse(l) as { msg: string; file?: string; line?: number });
      expect(logged.find((l) => l.file === file && l.line === 3 && /not a whole event/.test(l.msg))).toBeDefined();
      expect(logged.find((l) => l.file === file && l.line === 5 && /newline/.test(l.msg))).toBeDefined();
      const admin = await new Api(d.url).login('admin', password);
      const ids = async () => ((await admin.get('/svc/v1/activity?limit=1000')).body.data as ActivityEvent[]).filter((e) => e.access_request_id === 'grant-1').map((e) => e.duration_ms);
      expect(await ids()).toEqual([5, 4, 2, 1]);
      d.activity.record({ ...event(6) });
      await d.activity.flush();
      await d.close();
      d = await startTestDaemon({ dataDir, config });
      const again = await new Api(d.url).login('admin', password);
      const after = ((await again.get('/svc/v1/activity?limit=1000')).body.data as ActivityEvent[]).filter((e) => e.access_request_id === 'grant-1').map((e) => e.duration_ms);
      expect(after).toEqual([6, 5, 4, 2, 1]);
    } finally {
      await d.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
