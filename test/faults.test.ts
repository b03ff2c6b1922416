import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { storedOnDisk } from './helpers/store.js';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccessRequestsService } from '../src/access-requests/service.js';
import { createLogger } from '../src/log.js';
import type { StoreBackend } from '../src/store/journal.js';
import type { UserRecord } from '../src/store/schema.js';
import type { Op } from '../src/store/tables.js';
import { Store } from '../src/store/store.js';
import { storeRepositories } from '../src/store/store-repositories.js';
import { startTestDaemon, tempDir, type TestDaemon } from './helpers/daemon.js';
import { BIN, cleanEnv, REPO, startServe } from './helpers/cli.js';
import { Api, createBody } from './helpers/http.js';
import { approvedScope, authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { needs } from './helpers/requirements.js';

/** A disk whose writes wait until the test lets them finish or fail: the moment between a decision and its durability, held open. */
function heldDisk(initial: { users: UserRecord[] }) {
  type Disk = { access_requests: { id: string; status: string }[] };
  let onDisk: Disk = { access_requests: [] };
  /** the access requests as they would be once `ops` are written */
  const after = (disk: Disk, ops: Op[]): Disk => {
    const rows = new Map(disk.access_requests.map((r) => [r.id, r]));
    for (const op of ops) {
      if (op[0] === 'p' && op[1] === 'access_requests') rows.set(op[2], op[3] as Disk['access_requests'][number]);
      if (op[0] === 'd' && op[1] === 'access_requests') rows.delete(op[2]);
    }
    return { access_requests: [...rows.values()] };
  };
  const held: { resolve: () => void; reject: (err: Error) => void; data: Disk }[] = [];
  let arrived: () => void = () => undefined;
  const adapter: StoreBackend = {
    file: '(held)',
    load: async () => ({ seq: 0, collections: new Map([['users', new Map(initial.users.map((u) => [u.id, u]))]]), docs: new Map() }),
    append: (_seq: number, ops: Op[]) =>
      new Promise<void>((resolve, reject) => {
        held.push({ data: after(held.at(-1)?.data ?? onDisk, ops), resolve, reject });
        arrived();
      }),
    afterAppend: async () => undefined,
    close: async () => undefined,
  };
  return {
    adapter,
    onDisk: () => onDisk,
    /** what the write waiting now would put on disk */
    writing: () => held[0]?.data,
    /** resolves once a write is waiting */
    nextWrite: () => new Promise<void>((r) => (held.length > 0 ? r() : (arrived = r))),
    succeed() {
      const w = held.shift()!;
      onDisk = w.data;
      w.resolve();
    },
    fail(code = 'ENOSPC') {
      held.shift()!.reject(Object.assign(new Error(`${code}: no space left on device, write`), { code }));
    },
  };
}

describe('what apps read is what is on disk', () => {
  const reviewer: UserRecord = { id: 'u1', username: 'admin', role: 'admin', password_hash: 'x', created_at: new Date().toISOString() };
  const setup = async () => {
    const disk = heldDisk({ users: [reviewer] });
    const store = await Store.open(await tempDir(), disk.adapter);
    const requests = new AccessRequestsService(storeRepositories(store), Date.now, createLogger('silent'));
    const created = requests.create({ app_client_id: 'app', flow_type: 'popup', requested_role: 'scope_user_user', requested: { version: '1', mcp_servers: [] } } as never);
    await disk.nextWrite();
    // not acknowledged, not on disk: the app cannot see it yet
    await expect(requests.poll(disk.writing()!.access_requests[0].id, 'app')).rejects.toThrow(/No such access request/);
    disk.succeed();
    const { id } = await created;
    return { disk, store, requests, id };
  };

  it('a decision whose write fails is never seen as approved, while it is written nor after', async () => {
    const { disk, requests, id } = await setup();
    const approving = requests.approve(reviewer, id, { approved_role: 'scope_user_user' } as never);
    await disk.nextWrite();
    // the approval is in flight: a poll (and a Bearer check, which reads the same records) sees what is on disk
    expect((await requests.poll(id, 'app')).status).toBe('draft');
    expect(await requests.approvedScopesFor('app')).toEqual([]);
    disk.fail();
    // the store's own error; the HTTP layer answers it 503 (the full-disk tests below)
    await expect(approving).rejects.toMatchObject({ name: 'StoreUnavailableError', code: 'store_unavailable' });
    expect((await requests.poll(id, 'app')).status).toBe('draft');
    expect(disk.onDisk().access_requests[0].status).toBe('draft');
  });

  it('a decision becomes visible once it is durable, and two concurrent decisions still have one winner', async () => {
    const { disk, requests, id } = await setup();
    const approving = requests.approve(reviewer, id, { approved_role: 'scope_user_user' } as never);
    const denying = requests.deny(reviewer, id);
    await expect(denying).rejects.toMatchObject({ code: 'already_processed' });
    await disk.nextWrite();
    expect((await requests.poll(id, 'app')).status).toBe('draft');
    disk.succeed();
    expect((await approving).status).toBe('approved');
    expect(disk.onDisk().access_requests[0].status).toBe('approved');
    expect((await requests.poll(id, 'app')).status).toBe('approved');
  });
});

/** A small tmpfs of our own: real ENOSPC and EROFS, as root can have them. */
function mountTmpfs(dir: string, size: string): boolean {
  try {
    mkdirSync(dir, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tmpfs', dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const mountDir = path.join(os.tmpdir(), `svc-faults-${process.pid}`);
const canMount = process.getuid?.() === 0 && mountTmpfs(mountDir, '4m');

describe.skipIf(!needs(Boolean(canMount), 'faults (full and read-only disk)', 'root, to mount a tmpfs', 'sudo npm test'))('a full or read-only disk during writes', () => {
  let d: TestDaemon;
  let admin: Api;
  const dataDir = path.join(mountDir, 'data');

  beforeAll(async () => {
    d = await startTestDaemon({ dataDir, config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
  });
  afterAll(async () => {
    await d?.close().catch(() => undefined);
    try {
      execFileSync('umount', [mountDir], { stdio: 'ignore' });
    } catch {
      /* already gone */
    }
    rmSync(mountDir, { recursive: true, force: true });
  });

  const rows = async () => (await storedOnDisk(dataDir)).access_requests.length as number;
  /** The log lines that say a store write failed, parsed, from `from` on. */
  const writeFailures = (from = 0) =>
    d.logs
      .slice(from)
      .map((l) => JSON.parse(l) as { level: number; msg: string; file?: string; err?: string })
      .filter((l) => l.msg.startsWith('store write failed'));
  /**
   * Fills the disk to the last byte. The journal's last block may still have room for a few
   * small changes (they are durable, so they are acknowledged): writes until the first refusal.
   * Answers the refused response and the ids acknowledged on the way.
   */
  const fillDisk = async (filler: string) => {
    try {
      writeFileSync(filler, Buffer.alloc(8 * 1024 * 1024));
    } catch {
      /* ENOSPC: the disk is now full, as intended */
    }
    const acknowledged: string[] = [];
    for (let i = 0; i < 200; i++) {
      const res = await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ app_client_id: `filler-${i % 10}` }));
      if (res.status !== 201) return { refused: res, acknowledged };
      acknowledged.push(res.body.id);
    }
    throw new Error('the full disk never refused a write');
  };

  it('refuses writes with a clear 503 when the disk is full, acknowledges nothing, and recovers', async () => {
    const app = new Api(d.url);
    const ok = await app.post('/svc/v1/apps/request-access', createBody());
    expect(ok.status).toBe(201);
    const filler = path.join(mountDir, 'filler');
    const logged = d.logs.length;
    const { refused, acknowledged } = await fillDisk(filler);
    // the log names the file and the cause, once for the episode (the 503 says only "could not be saved")
    const [failure, ...more] = writeFailures(logged);
    expect(failure, 'no log line for the failed write').toBeDefined();
    expect(failure.level).toBe(50);
    expect(failure.file).toMatch(new RegExp(`^${dataDir}/db\\.journal\\.\\d+$`));
    expect(failure.err).toBe(`Cannot write ${failure.file}: the disk is full (ENOSPC)`);
    expect(more).toEqual([]);
    const before = await rows();
    expect(acknowledged.length).toBeLessThan(200);
    expect(refused.status).toBe(503);
    expect(refused.body.error).toMatchObject({ type: 'server_error', code: 'store_unavailable' });
    expect(refused.body.error.message).toMatch(/could not be saved/);
    // not in memory either: the poll of a refused id cannot exist, and the list is unchanged
    const listed = await admin.get('/svc/v1/access-requests');
    expect(listed.body.data.length).toBe(before);
    const approve = await admin.put(`/svc/v1/access-requests/${ok.body.id}/approve`, { approved_role: 'scope_user_user' });
    expect(approve.status).toBe(503);
    expect((await new Api(d.url).get(`/svc/v1/apps/access-requests/${ok.body.id}?app_client_id=demo-app`)).body.status).toBe('draft');
    expect((await app.get('/svc/v1/health')).status).toBe(200);

    rmSync(filler);
    const again = await app.post('/svc/v1/apps/request-access', createBody());
    expect(again.status).toBe(201);
    expect(await rows()).toBe(before + 1);
    expect((await storedOnDisk(dataDir)).access_requests.some((r: { id: string }) => r.id === again.body.id)).toBe(true);
  });

  it('an approval the full disk refuses is never seen as approved by polls running alongside it', async () => {
    const app = new Api(d.url);
    const drafts: string[] = [];
    for (let i = 0; i < 5; i++) drafts.push((await app.post('/svc/v1/apps/request-access', createBody())).body.id);
    const filler = path.join(mountDir, 'filler');
    await fillDisk(filler);
    try {
      const seen: string[] = [];
      await Promise.all(
        drafts.map(async (id) => {
          const poll = async () => {
            for (let i = 0; i < 15; i++) seen.push((await new Api(d.url).get(`/svc/v1/apps/access-requests/${id}?app_client_id=demo-app`)).body.status);
          };
          const [approve] = await Promise.all([admin.put(`/svc/v1/access-requests/${id}/approve`, { approved_role: 'scope_user_user' }), poll(), poll(), poll()]);
          expect(approve.status).toBe(503);
        }),
      );
      expect(seen.length).toBe(drafts.length * 45);
      expect(seen.filter((s) => s !== 'draft')).toEqual([]);
    } finally {
      rmSync(filler);
    }
  });

  it('refuses writes on a read-only data dir and serves reads', async () => {
    execFileSync('mount', ['-o', 'remount,ro', mountDir]);
    try {
      const app = new Api(d.url);
      const logged = d.logs.length;
      const refused = await app.post('/svc/v1/apps/request-access', createBody());
      expect(refused.status).toBe(503);
      expect(refused.body.error.code).toBe('store_unavailable');
      expect(writeFailures(logged).map((l) => l.err)).toEqual([expect.stringMatching(new RegExp(`^Cannot write ${dataDir}/db\\.journal\\.\\d+: the file system is read-only \\(EROFS\\)$`))]);
      const list = await admin.get('/svc/v1/access-requests');
      expect(list.status).toBe(200);
    } finally {
      execFileSync('mount', ['-o', 'remount,rw', mountDir]);
    }
    const ok = await new Api(d.url).post('/svc/v1/apps/request-access', createBody());
    expect(ok.status).toBe(201);
  });

  it('after a restart holds exactly the acknowledged writes', async () => {
    const acknowledged = (await admin.get('/svc/v1/access-requests')).body.data.map((r: { id: string }) => r.id).sort();
    const password = d.adminPassword;
    await d.close();
    d = await startTestDaemon({ dataDir });
    admin = await new Api(d.url).login('admin', password);
    const after = (await admin.get('/svc/v1/access-requests')).body.data.map((r: { id: string }) => r.id).sort();
    expect(after).toEqual(acknowledged);
  });
});

/** One `svc serve`: its exit code and stderr, or `listening` (then stopped) when it came up. */
async function serveOnce(dataDir: string, env: Record<string, string>): Promise<{ listening: boolean; exitCode: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, 'serve', '--host', '127.0.0.1', '--port', '0', '--data-dir', dataDir], { cwd: REPO, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let listening = false;
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  child.stdout!.setEncoding('utf8').on('data', (c: string) => {
    out += c;
    if (!listening && out.includes('svc listening')) {
      listening = true;
      child.kill('SIGTERM');
    }
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const exitCode = await new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  clearTimeout(timer);
  return { listening, exitCode, stdout: out, stderr: err };
}

const firstStartMount = path.join(os.tmpdir(), `svc-faults-first-${process.pid}`);
const canMountFirst = process.getuid?.() === 0 && mountTmpfs(firstStartMount, '1m');

describe.skipIf(!needs(Boolean(canMountFirst), 'faults (full disk at the first start)', 'root, to mount a tmpfs', 'sudo npm test'))('a full disk at the first start', () => {
  afterAll(() => {
    try {
      execFileSync('umount', [firstStartMount], { stdio: 'ignore' });
    } catch {
      /* already gone */
    }
    rmSync(firstStartMount, { recursive: true, force: true });
  });

  it('names the file it could not write, leaves no lock, and starts once there is room', { timeout: 120_000 }, async () => {
    const dataDir = path.join(firstStartMount, 'data');
    mkdirSync(dataDir, { mode: 0o700 });
    // Pages to give back one at a time, so that each start gets a little further before the disk is full.
    const spare = Array.from({ length: 12 }, (_, i) => path.join(firstStartMount, `spare-${i}`));
    for (const f of spare) writeFileSync(f, Buffer.alloc(4096));
    try {
      writeFileSync(path.join(firstStartMount, 'filler'), Buffer.alloc(2 * 1024 * 1024));
    } catch {
      /* ENOSPC: full */
    }
    const env = cleanEnv({ SVC_KEYCHAIN: 'file', SVC_HOME: dataDir });
    const named = new Set<string>();
    const banner = /shown only once\):\s*\n\s*\n\s+(\S+)/;
    let password: string | undefined;
    let started = false;
    for (let freed = 0; freed <= spare.length && !started; freed++) {
      if (freed > 0) rmSync(spare[freed - 1]);
      const r = await serveOnce(dataDir, env);
      if (r.listening) {
        started = true;
        password = banner.exec(r.stdout)?.[1];
        break;
      }
      expect(r.exitCode, r.stderr).toBe(1);
      const m = /^svc: Cannot write (\S+): the disk is full \(ENOSPC\)$/m.exec(r.stderr);
      expect(m, r.stderr).not.toBeNull();
      expect(m![1].startsWith(`${dataDir}/`), r.stderr).toBe(true);
      expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
      named.add(path.basename(m![1]));
      expect(existsSync(path.join(dataDir, 'daemon.lock')), 'a failed start left its lock').toBe(false);
      expect(existsSync(path.join(dataDir, 'daemon.json'))).toBe(false);
    }
    console.info(`first start on a full disk named: ${[...named].join(', ')}`);
    expect(named.size).toBeGreaterThan(1);
    rmSync(path.join(firstStartMount, 'filler'));
    // The start that came up showed the admin password (the first one to get that far did), and it works.
    const s = await startServe(dataDir, env);
    try {
      password = banner.exec(s.stdout())?.[1] ?? password;
      expect(password, s.stdout()).toBeTruthy();
      expect((await new Api(s.url).post('/svc/v1/auth/login', { username: 'admin', password })).status).toBe(200);
    } finally {
      expect(await s.stop()).toBe(0);
    }
  });
});

describe('an app that hangs up while sending its body', () => {
  it('is routine: no error logged, no 500, on the data plane (with a valid token) and the control plane', async () => {
    const d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    try {
      const admin = await new Api(d.url).login('admin', d.adminPassword);
      const { clientId, secret } = await registerClient(admin);
      const { scope } = await approvedScope(d, admin, clientId);
      const token = (await authorize(await oidcConfig(d, clientId, secret), admin, scope)).tokens!.access_token;
      const paths = ['/v1/chat/completions', '/v1/embeddings', '/svc/v1/apps/request-access'];
      for (const p of paths) {
        const socket = net.connect(d.port, '127.0.0.1');
        socket.on('error', () => undefined);
        await new Promise((r) => socket.once('connect', r));
        // The headers first, asking to go on: the daemon's "100 Continue" says it took the request
        // and is about to read its body. Then part of the body, and the app is gone.
        const received: Buffer[] = [];
        socket.on('data', (c: Buffer) => received.push(c));
        socket.write(
          `POST ${p} HTTP/1.1\r\nHost: 127.0.0.1:${d.port}\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 4096\r\nExpect: 100-continue\r\n\r\n`,
        );
        await until(() => Buffer.concat(received).toString('latin1').startsWith('HTTP/1.1 100 Continue\r\n'), `the daemon's 100 Continue on ${p}`);
        const before = d.logs.length;
        await new Promise<void>((r) => socket.write('{"model":"m","messages":[', () => r()));
        socket.destroy();
        await until(() => d.logs.slice(before).some((l) => l.includes(`"path":"${p}"`) && l.includes('"msg":"request"')));
      }
      const lines = d.logs.map((l) => JSON.parse(l) as { level: number; msg: string; status?: number; path?: string });
      expect(lines.filter((l) => l.level >= 40), 'warnings or errors logged').toEqual([]);
      for (const p of paths) expect(lines.filter((l) => l.msg === 'request' && l.path === p).pop()?.status, p).toBe(400);
    } finally {
      await d.stop();
    }
  });
});

/** Waits for `test` to hold; a wait that runs out (10 s) fails, saying what it waited for. */
async function until(test: () => boolean, what = String(test)): Promise<void> {
  for (let i = 0; i < 2000 && !test(); i++) await new Promise((r) => setTimeout(r, 5));
  if (!test()) throw new Error(`timed out waiting for ${what}`);
}
