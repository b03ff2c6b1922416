/**
 * Crash safety of the real daemon, run as `svc serve` in a child process:
 * - every write acknowledged (2xx) before a SIGKILL is there after a restart, and the lock the
 *   dead daemon left behind is taken over;
 * - a second `svc serve` on a data dir in use fails clearly with exit code 1;
 * - a db.json that does not parse, or is missing beside its db.json.bak, stops `svc serve` with a
 *   message naming it, and neither the file nor its last good copy (db.json.bak) is touched.
 *
 * Needs the build (bin/svc.js runs dist/): `npm test` builds first.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, watch } from 'node:fs';
import { copyFile, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const BIN = path.join(REPO, 'bin', 'svc.js');

/** The caller's environment without anything that points svc elsewhere; the master key in a file. */
function childEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || k.startsWith('SVC_') || k === 'NODE_OPTIONS') continue;
    env[k] = v;
  }
  env.SVC_KEYCHAIN = 'file';
  return env;
}

interface Serve {
  child: ChildProcess;
  pid: number;
  url: string;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const children = new Set<ChildProcess>();

function spawnSvc(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [BIN, ...args], { cwd: REPO, env: { ...childEnv(), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => {
      children.delete(child);
      resolve({ code, signal });
    }),
  );
  return { child, exited, stdout: () => out, stderr: () => err };
}

/** `svc serve --port 0` on `dataDir`; resolves once it prints where it listens. */
async function serve(dataDir: string, env: Record<string, string> = {}): Promise<Serve> {
  // never `--data-dir undefined`: a test run out of order once made a store in the repository
  if (!dataDir) throw new Error('serve() needs a data dir');
  const s = spawnSvc(['serve', '--host', '127.0.0.1', '--port', '0', '--data-dir', dataDir, '--rate-limit-client', '0', '--rate-limit-address', '0', '--max-drafts-per-client', '100000', '--max-drafts', '1000000'], env);
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`svc serve did not start\nstdout: ${s.stdout()}\nstderr: ${s.stderr()}`)), 30_000);
    const check = () => {
      const m = /svc listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(s.stdout());
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    s.child.stdout!.on('data', check);
    void s.exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`svc serve exited (${code ?? signal}) before listening\nstdout: ${s.stdout()}\nstderr: ${s.stderr()}`));
    });
  });
  return { ...s, pid: s.child.pid!, url };
}

/** `svc serve` expected to refuse: its exit code and output, once it exits. */
async function serveExpectingFailure(dataDir: string) {
  const s = spawnSvc(['serve', '--host', '127.0.0.1', '--port', '0', '--data-dir', dataDir]);
  const timer = setTimeout(() => s.child.kill('SIGKILL'), 30_000);
  const { code, signal } = await s.exited;
  clearTimeout(timer);
  return { code, signal, stdout: s.stdout(), stderr: s.stderr() };
}

async function stopGracefully(s: Serve) {
  s.child.kill('SIGTERM');
  return s.exited;
}

async function login(url: string, password: string): Promise<string> {
  const res = await fetch(`${url}/svc/v1/auth/login`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username: 'admin', password }),
  });
  expect(res.status).toBe(200);
  return res.headers
    .getSetCookie()
    .map((c) => c.split(';')[0])
    .join('; ');
}

const createBody = (clientId: string) => ({
  app_client_id: clientId,
  flow_type: 'popup',
  requested_role: 'scope_user_power_user',
  requested: { version: '1', mcp_servers: [{ url: 'http://127.0.0.1:9/mcp' }] },
});

let root: string;

beforeAll(async () => {
  expect(existsSync(path.join(REPO, 'dist', 'cli', 'main.js')), 'run `npm run build` first: bin/svc.js runs dist/').toBe(true);
  root = await mkdtemp(path.join(os.tmpdir(), 'svc-crash-'));
});

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await rm(root, { recursive: true, force: true });
});

describe('svc serve survives a SIGKILL mid-burst', () => {
  let dataDir: string;
  let adminPassword: string;
  let current: Serve | undefined;

  const others: Serve[] = [];
  afterAll(async () => {
    for (const s of [current, ...others]) if (s && s.child.exitCode === null && s.child.signalCode === null) await stopGracefully(s);
  });

  it('keeps every acknowledged write of every kind across a SIGKILL and a restart', { timeout: 90_000 }, async () => {
    dataDir = path.join(root, 'burst');
    const first = await serve(dataDir);
    current = first;
    // The first start prints the admin password once and logs the local CLI in.
    const pw = /shown only once\):\s*\n\s*\n\s+(\S+)/.exec(first.stdout());
    expect(pw, first.stdout()).not.toBeNull();
    adminPassword = pw![1];
    expect(existsSync(path.join(dataDir, 'cli-session.json'))).toBe(true);
    expect(Number((await readFile(path.join(dataDir, 'daemon.lock'), 'utf8')).trim())).toBe(first.pid);

    const cookie = await login(first.url, adminPassword);
    const post = (p: string, body?: unknown, method = 'POST') =>
      fetch(`${first.url}${p}`, {
        method,
        headers: { 'Content-Type': 'application/json', Cookie: cookie },
        body: body === undefined ? undefined : JSON.stringify(body),
      });

    // Drafts to decide during the burst, acknowledged before it starts.
    const drafts: string[] = [];
    for (let i = 0; i < 60; i++) {
      const res = await post('/svc/v1/apps/request-access', createBody('crash-app-pre'));
      expect(res.status).toBe(201);
      drafts.push(((await res.json()) as { id: string }).id);
    }

    // Grants to revoke during the burst, approved before it starts.
    const grants: string[] = [];
    for (let i = 0; i < 15; i++) {
      const id = drafts.pop()!;
      expect((await post(`/svc/v1/access-requests/${id}/approve`, { approved_role: 'scope_user_user' }, 'PUT')).status).toBe(200);
      grants.push(id);
    }

    const acked = {
      creates: new Map<string, string>(),
      approved: new Set<string>(),
      denied: new Set<string>(),
      revoked: new Set<string>(),
      instances: new Set<string>(),
      clients: new Set<string>(),
      users: new Set<string>(),
    };
    let ackCount = 0;
    let killed = false;
    let inFlightAtKill = 0;
    let inFlight = 0;
    const KILL_AFTER = 150;
    const kill = () => {
      if (killed) return;
      killed = true;
      inFlightAtKill = inFlight;
      first.child.kill('SIGKILL');
    };

    const jobs: (() => Promise<void>)[] = [];
    const create = (i: number) => async () => {
      const clientId = `crash-app-${i % 7}`;
      const res = await post('/svc/v1/apps/request-access', createBody(clientId));
      if (res.status === 201) {
        acked.creates.set(((await res.json()) as { id: string }).id, clientId);
        ackCount++;
      } else expect(res.status, await res.text()).toBeLessThan(500);
    };
    const decide = (id: string, approve: boolean) => async () => {
      const res = approve ? await post(`/svc/v1/access-requests/${id}/approve`, { approved_role: 'scope_user_user' }, 'PUT') : await post(`/svc/v1/access-requests/${id}/deny`);
      if (res.status === 200) {
        (approve ? acked.approved : acked.denied).add(id);
        ackCount++;
      } else expect(res.status, await res.text()).toBe(409); // the other half of a race
    };
    // The other kinds of write: MCP instances, OAuth clients, users, revocations.
    const write = (path: string, body: unknown, method: string, record: (json: any) => void) => async () => {
      const res = await post(path, body, method);
      if (res.status === 200 || res.status === 201) {
        record(await res.json());
        ackCount++;
      } else expect(res.status, await res.text()).toBeLessThan(500);
    };
    for (let i = 0; i < 500; i++) {
      jobs.push(create(i));
      if (i % 5 === 1) jobs.push(write('/svc/v1/mcps', { name: `tool-${i}`, url: `http://127.0.0.1:9/mcp/${i}`, headers: [{ name: 'X-Key', value: `k${i}` }] }, 'POST', (j) => acked.instances.add(j.instance.id)));
      if (i % 10 === 2) jobs.push(write('/admin/v1/clients', { name: `app ${i}`, redirect_uris: [`http://127.0.0.1:9/cb/${i}`] }, 'POST', (j) => acked.clients.add(j.client.client_id)));
      if (i % 40 === 3) jobs.push(write('/svc/v1/users', { username: `user${i}`, role: 'user', password: `password-${i}` }, 'POST', (j) => acked.users.add(j.user.username)));
      if (i % 8 === 4 && grants.length > 0) {
        const id = grants.pop()!;
        jobs.push(write(`/svc/v1/access-requests/${id}/revoke`, undefined, 'POST', () => acked.revoked.add(id)));
      }
      if (i % 6 === 0 && drafts.length > 0) {
        const id = drafts.pop()!;
        // Every fifth decided draft gets both an approval and a denial at once: one must win.
        if (drafts.length % 5 === 0) jobs.push(decide(id, true), decide(id, false));
        else jobs.push(decide(id, drafts.length % 2 === 0));
      }
    }

    let next = 0;
    const worker = async () => {
      while (!killed && next < jobs.length) {
        const job = jobs[next++];
        inFlight++;
        try {
          await job();
        } catch (err) {
          // Only a request cut off by the kill may fail; it was never acknowledged.
          if (!killed) throw err;
        } finally {
          inFlight--;
        }
        if (ackCount >= KILL_AFTER) kill();
      }
    };
    await Promise.all(Array.from({ length: 12 }, worker));
    const exit = await first.exited;
    console.info(
      `crash-safety: killed with ${inFlightAtKill} in flight after ${next}/${jobs.length} jobs; acknowledged ${acked.creates.size} creates, ${acked.approved.size} approvals, ${acked.denied.size} denials, ${acked.revoked.size} revocations, ${acked.instances.size} MCP instances, ${acked.clients.size} clients, ${acked.users.size} users`,
    );
    expect(exit.signal).toBe('SIGKILL');
    expect(killed).toBe(true);
    expect(next, 'the burst was cut short by the kill').toBeLessThan(jobs.length);
    expect(inFlightAtKill, 'requests were in flight when the daemon died').toBeGreaterThan(0);
    expect(acked.approved.size + acked.denied.size).toBeGreaterThan(0);
    // The dead daemon's lock is still there, naming a pid that no longer runs.
    expect(Number((await readFile(path.join(dataDir, 'daemon.lock'), 'utf8')).trim())).toBe(first.pid);

    const second = await serve(dataDir);
    current = second;
    expect(second.stdout()).not.toContain('shown only once');
    expect(Number((await readFile(path.join(dataDir, 'daemon.lock'), 'utf8')).trim())).toBe(second.pid);

    // The session the daemon acknowledged before the crash is still good.
    const me = await fetch(`${second.url}/svc/v1/auth/me`, { headers: { Cookie: cookie } });
    expect(me.status).toBe(200);

    for (const [id, clientId] of acked.creates) {
      const res = await fetch(`${second.url}/svc/v1/apps/access-requests/${id}?app_client_id=${clientId}`);
      expect(res.status, `acknowledged create ${id} is gone`).toBe(200);
      expect(((await res.json()) as { status: string }).status).toBe('draft');
    }
    for (const [ids, status] of [
      [acked.approved, 'approved'],
      [acked.denied, 'denied'],
    ] as const) {
      for (const id of ids) {
        const res = await fetch(`${second.url}/svc/v1/apps/access-requests/${id}?app_client_id=crash-app-pre`);
        expect(res.status).toBe(200);
        expect(((await res.json()) as { status: string }).status, `acknowledged ${status} of ${id}`).toBe(status);
      }
    }
    for (const id of acked.revoked) {
      const res = await fetch(`${second.url}/svc/v1/apps/access-requests/${id}?app_client_id=crash-app-pre`);
      expect(((await res.json()) as { status: string }).status, `acknowledged revocation of ${id}`).toBe('revoked');
    }
    const list = async (p: string) => (await (await fetch(`${second.url}${p}`, { headers: { Cookie: cookie } })).json()) as { data: Record<string, string>[] };
    const instances = new Set((await list('/svc/v1/mcps')).data.map((m) => m.id));
    for (const id of acked.instances) expect(instances.has(id), `acknowledged MCP instance ${id}`).toBe(true);
    const clients = new Set((await list('/admin/v1/clients')).data.map((c) => c.client_id));
    for (const id of acked.clients) expect(clients.has(id), `acknowledged client ${id}`).toBe(true);
    const users = new Set((await list('/svc/v1/users')).data.map((u) => u.username));
    for (const name of acked.users) expect(users.has(name), `acknowledged user ${name}`).toBe(true);
    expect(acked.instances.size + acked.clients.size).toBeGreaterThan(0);
    // A race never has two acknowledged winners.
    for (const id of acked.approved) expect(acked.denied.has(id)).toBe(false);
  });

  it('refuses a second svc serve on a data dir in use, with a clear message and exit code 1', { timeout: 60_000 }, async () => {
    const dataDir = path.join(root, 'in-use');
    const running = await serve(dataDir);
    others.push(running);
    const r = await serveExpectingFailure(dataDir);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`Another svc serve (pid ${running.pid}) is already using the data dir ${dataDir}`);
    expect(r.stdout).not.toContain('svc listening');
    // The running daemon is untouched: still its lock, still serving.
    expect(Number((await readFile(path.join(dataDir, 'daemon.lock'), 'utf8')).trim())).toBe(running.pid);
    expect((await fetch(`${running.url}/svc/v1/health`)).status).toBe(200);
  });
});

describe('svc serve survives a SIGKILL in the middle of a snapshot', () => {
  it('keeps every acknowledged write when killed while it rewrites db.json', { timeout: 120_000 }, async () => {
    const dataDir = path.join(root, 'compaction');
    // A snapshot after every few KiB of journal: the daemon rewrites db.json all the time.
    const env = { SVC_STORE_COMPACT_BYTES: '4096' };
    let s = await serve(dataDir, env);
    const acked = new Map<string, string>();
    let killedMidSnapshot = 0;
    // Large records (eight long URLs each) make every snapshot take many chunks: a wide window.
    const padded = (clientId: string) => ({
      ...createBody(clientId),
      requested: { version: '1', mcp_servers: Array.from({ length: 8 }, (_, i) => ({ url: `http://127.0.0.1:9/mcp/${i}/${'p'.repeat(1500)}` })) },
    });
    // Rounds until kills have landed mid-snapshot twice (each round is a kill and a restart), at most 12.
    let round = 0;
    for (; round < 12 && killedMidSnapshot < 2; round++) {
      const current = s;
      let killed = false;
      // Killed the moment a snapshot's temporary file appears (and at the latest after 300 writes).
      const watcher = watch(dataDir, (_event, name) => {
        if (name === 'db.json.tmp' && !killed && acked.size > round * 20) {
          killed = true;
          current.child.kill('SIGKILL');
        }
      });
      const worker = async (w: number) => {
        for (let i = 0; !killed && i < 100; i++) {
          const clientId = `snap-${round}-${w}-${i % 50}`;
          try {
            const res = await fetch(`${current.url}/svc/v1/apps/request-access`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(padded(clientId)) });
            if (res.status === 201) acked.set(((await res.json()) as { id: string }).id, clientId);
            else expect(res.status, await res.text()).toBeLessThan(500);
          } catch (err) {
            if (!killed) throw err; // only a request cut off by the kill may fail
          }
        }
      };
      await Promise.all(Array.from({ length: 8 }, (_, w) => worker(w)));
      watcher.close();
      if (!killed) current.child.kill('SIGKILL');
      expect((await current.exited).signal).toBe('SIGKILL');
      if (existsSync(path.join(dataDir, 'db.json.tmp'))) killedMidSnapshot++;
      s = await serve(dataDir, env);
      for (const [id, clientId] of acked) {
        const res = await fetch(`${s.url}/svc/v1/apps/access-requests/${id}?app_client_id=${clientId}`);
        expect(res.status, `round ${round}: acknowledged create ${id} is gone`).toBe(200);
      }
    }
    console.info(`crash-safety: ${killedMidSnapshot} of ${round} kills left a snapshot half written; ${acked.size} acknowledged creates all found`);
    expect(killedMidSnapshot, 'no kill landed in the middle of a snapshot').toBeGreaterThan(0);
    expect((await stopGracefully(s)).code).toBe(0);
  });
});

describe('svc serve refuses a store that does not parse', () => {
  let dataDir: string;

  beforeAll(async () => {
    dataDir = path.join(root, 'corrupt');
    const s = await serve(dataDir);
    const pw = /shown only once\):\s*\n\s*\n\s+(\S+)/.exec(s.stdout())![1];
    const cookie = await login(s.url, pw);
    // A few writes, so that db.json.bak (the previous version) exists.
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${s.url}/svc/v1/mcps`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Cookie: cookie },
        body: JSON.stringify({ name: `m${i}`, url: `http://127.0.0.1:9/mcp${i}` }),
      });
      expect(res.status).toBe(201);
    }
    expect((await stopGracefully(s)).code).toBe(0);
    expect(existsSync(path.join(dataDir, 'daemon.lock'))).toBe(false);
  }, 60_000);

  const corruptions: [string, (good: Buffer) => Buffer, RegExp][] = [
    ['truncated', (good) => good.subarray(0, Math.floor(good.length / 2)), /not valid JSON/],
    ['empty', () => Buffer.alloc(0), /not valid JSON/],
    ['garbage bytes', () => Buffer.concat([Buffer.from('\u0000\u00ff garbage '), randomBytes(512)]), /not valid JSON/],
    ['JSON of the wrong shape', () => Buffer.from('{"meta":null,"users":"nobody","sessions":[],"mcp_instances":[],"access_requests":[]}'), /unexpected content/],
  ];

  for (const [name, corrupt, reason] of corruptions) {
    it(`${name}: exits non-zero naming db.json, and leaves db.json and db.json.bak as they were`, { timeout: 60_000 }, async () => {
      const file = path.join(dataDir, 'db.json');
      const bak = path.join(dataDir, 'db.json.bak');
      const good = await readFile(file);
      const bakBefore = await readFile(bak);
      const bad = corrupt(good);
      await writeFile(file, bad);
      try {
        const r = await serveExpectingFailure(dataDir);
        expect(r.code, r.stderr).not.toBe(0);
        expect(r.code).not.toBeNull();
        expect(r.stderr).toContain(file);
        expect(r.stderr).toMatch(reason);
        expect(r.stderr).toContain(bak);
        expect(r.stdout).not.toContain('svc listening');
        expect((await readFile(file)).equals(bad), 'db.json was changed').toBe(true);
        expect((await readFile(bak)).equals(bakBefore), 'db.json.bak was changed').toBe(true);
        expect(existsSync(path.join(dataDir, 'daemon.lock')), 'the refused start left its lock behind').toBe(false);
      } finally {
        await writeFile(file, good);
      }
    });
  }

  it('a missing db.json beside its .bak: refuses to start, names the .bak and how to restore it, and touches neither', { timeout: 60_000 }, async () => {
    const file = path.join(dataDir, 'db.json');
    const bak = path.join(dataDir, 'db.json.bak');
    const moved = path.join(dataDir, 'db.json.moved');
    const bakBefore = await readFile(bak);
    await rename(file, moved);
    try {
      const r = await serveExpectingFailure(dataDir);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(`The store ${file} is missing`);
      expect(r.stderr).toContain(`cp '${bak}' '${file}'`);
      expect(r.stdout).not.toContain('svc listening');
      expect(r.stdout).not.toContain('shown only once');
      expect(existsSync(file), 'an empty store was started').toBe(false);
      expect((await readFile(bak)).equals(bakBefore), 'db.json.bak was changed').toBe(true);
      expect(existsSync(path.join(dataDir, 'daemon.lock'))).toBe(false);
    } finally {
      await rename(moved, file);
    }
  });

  it('starts again from the last good copy once it is restored by hand', { timeout: 60_000 }, async () => {
    await copyFile(path.join(dataDir, 'db.json.bak'), path.join(dataDir, 'db.json'));
    const s = await serve(dataDir);
    try {
      expect((await fetch(`${s.url}/svc/v1/health`)).status).toBe(200);
    } finally {
      expect((await stopGracefully(s)).code).toBe(0);
    }
  });
});
