/**
 * The daemon's life from start to stop, driven as a person or a script drives it: `svc serve`
 * spawned from the real binary (bin/svc.js runs dist/: build first), signals, pipes that close,
 * first starts that are cut short, and the offline way back to an admin password.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { cp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { resolveConfig } from '../src/config.js';
import { startDaemon } from '../src/daemon.js';
import { createLogger } from '../src/log.js';
import { BIN, cleanEnv, closedPort, REPO, runSvc, startServe } from './helpers/cli.js';
import { noKeychain, tempDir as makeTempDir } from './helpers/daemon.js';

vi.setConfig({ testTimeout: 90_000, hookTimeout: 60_000 });

const children = new Set<ChildProcess>();
const dirs: string[] = [];
const tempDir = async () => {
  const dir = await makeTempDir();
  dirs.push(dir);
  return dir;
};
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

const envFor = (dataDir: string) => cleanEnv({ SVC_KEYCHAIN: 'file', SVC_HOME: dataDir, NO_COLOR: '1' });
const leftovers = (dataDir: string) => ['daemon.json', 'daemon.lock'].filter((f) => existsSync(path.join(dataDir, f)));
const BANNER = /shown only once\):\s*\n\s*\n\s+(\S+)/;

/** `svc serve` as a child with pipes we control; `exited` settles with its code or signal. */
function spawnServe(dataDir: string, extra: string[] = []) {
  const child = spawn(process.execPath, [BIN, 'serve', '--host', '127.0.0.1', '--port', '0', '--data-dir', dataDir, ...extra], {
    cwd: REPO,
    env: envFor(dataDir),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  child.stdout!.on('error', () => undefined);
  child.stderr!.on('error', () => undefined);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => {
      children.delete(child);
      resolve({ code, signal });
    }),
  );
  return { child, exited, stdout: () => out, stderr: () => err };
}

/** Resolves once `test()` holds, checking every few milliseconds (bounded, never asserted as a timing). */
async function until(test: () => boolean, what: string, limitMs = 30_000): Promise<void> {
  const giveUp = Date.now() + limitMs;
  while (!test()) {
    if (Date.now() > giveUp) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function login(url: string, password: string): Promise<number> {
  const res = await fetch(`${url}/svc/v1/auth/login`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ username: 'admin', password }) });
  await res.arrayBuffer();
  return res.status;
}

/**
 * After a start that was stopped, the data dir still works: the next start comes up, and the
 * last password one of the two starts printed logs the admin in (a first start stopped before
 * its password was shown is finished by the next one, never an admin whose password nobody saw).
 */
async function expectRecoverable(dataDir: string, firstStdout: string): Promise<void> {
  const next = await startServe(dataDir, envFor(dataDir));
  try {
    const password = BANNER.exec(next.stdout())?.[1] ?? BANNER.exec(firstStdout)?.[1];
    expect(password, `no start ever showed the admin password\n${firstStdout}\n${next.stdout()}`).toBeTruthy();
    expect(await login(next.url, password!)).toBe(200);
  } finally {
    expect(await next.stop()).toBe(0);
  }
  expect(leftovers(dataDir)).toEqual([]);
}

describe('SIGINT and SIGTERM stop svc serve cleanly at any point of its start', () => {
  const points = {
    /** as soon as it runs: before it installs anything (and before it creates anything) */
    spawned: () => true,
    /** it holds the data dir */
    locked: (dir: string) => existsSync(path.join(dir, 'daemon.lock')),
    /** its port is open, setup is not complete */
    port: (dir: string) => existsSync(path.join(dir, 'daemon.json')),
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    for (const [point, reached] of Object.entries(points)) {
      it(`${signal} once ${point}: nothing left behind, and the next start works`, async () => {
        const dataDir = path.join(await tempDir(), 'data');
        const s = spawnServe(dataDir);
        let exited = false;
        void s.exited.then(() => (exited = true));
        await until(() => exited || reached(dataDir), point);
        s.child.kill(signal);
        const how = await s.exited;
        if (point !== 'spawned') expect(how, s.stderr()).toEqual({ code: 0, signal: null });
        expect(leftovers(dataDir), s.stderr()).toEqual([]);
        await expectRecoverable(dataDir, s.stdout());
      });
    }
    it(`${signal} in the same tick as "svc listening"`, async () => {
      const dataDir = path.join(await tempDir(), 'data');
      const s = spawnServe(dataDir);
      // the first "svc listening" either stream shows: the daemon's log line or the printed one
      let sent = false;
      const onData = () => {
        if (!sent && (s.stdout().includes('svc listening') || s.stderr().includes('svc listening'))) {
          sent = true;
          s.child.kill(signal);
        }
      };
      s.child.stdout!.on('data', onData);
      s.child.stderr!.on('data', onData);
      expect(await s.exited, s.stderr()).toEqual({ code: 0, signal: null });
      expect(leftovers(dataDir)).toEqual([]);
      await expectRecoverable(dataDir, s.stdout());
    });
  }

  it('Ctrl-C on `npm start 2>&1 | tee log`, during the start and once running (npm forwards the signal, tee dies first)', async () => {
    for (const point of ['locked', 'listening'] as const) {
      const dataDir = path.join(await tempDir(), 'data');
      const log = path.join(path.dirname(dataDir), 'log');
      // its own process group, as a terminal's foreground job is: Ctrl-C signals the whole group
      const job = spawn('sh', ['-c', 'npm start --silent -- --host 127.0.0.1 --port 0 --data-dir "$DIR" 2>&1 | tee "$LOG" >/dev/null'], {
        cwd: REPO,
        env: { ...envFor(dataDir), DIR: dataDir, LOG: log },
        stdio: 'ignore',
        detached: true,
      });
      children.add(job);
      const lockFile = path.join(dataDir, 'daemon.lock');
      const read = (file: string) => {
        try {
          return readFileSync(file, 'utf8');
        } catch {
          return '';
        }
      };
      if (point === 'locked') await until(() => existsSync(lockFile), 'the lock');
      else await until(() => /svc listening/.test(read(log)), 'svc listening');
      // the daemon's pid, from its lock (written just after the lock is made)
      let pid = NaN;
      await until(() => {
        pid = Number.parseInt(read(lockFile), 10);
        return Number.isInteger(pid) || !existsSync(lockFile);
      }, 'the pid');
      process.kill(-job.pid!, 'SIGINT');
      if (Number.isInteger(pid)) await until(() => !alive(pid), 'the daemon to exit');
      await new Promise<void>((r) => (job.exitCode !== null || job.signalCode !== null ? r() : job.on('exit', () => r())));
      children.delete(job);
      expect(leftovers(dataDir), `${point}: ${await readFile(log, 'utf8').catch(() => '')}`).toEqual([]);
      await expectRecoverable(dataDir, await readFile(log, 'utf8').catch(() => ''));
    }
  });
});

describe('a closed stdout or stderr (EPIPE) is a clean stop too', () => {
  it('stdout closed during the first start: it stops, leaves nothing, and the next start is a first start again', async () => {
    const dataDir = path.join(await tempDir(), 'data');
    const s = spawnServe(dataDir);
    s.child.stdout!.destroy(); // the reader is gone: its first notice gets EPIPE
    expect(await s.exited, s.stderr()).toEqual({ code: 0, signal: null });
    expect(leftovers(dataDir)).toEqual([]);
    expect(existsSync(path.join(dataDir, 'cli-session.json'))).toBe(false);
    await expectRecoverable(dataDir, '');
  });

  it('stderr closed while running: the next log line stops it cleanly', async () => {
    const dataDir = path.join(await tempDir(), 'data');
    const s = spawnServe(dataDir, ['--log-level', 'debug']);
    await until(() => /svc listening on (\S+)/.test(s.stdout()), 'svc listening');
    const url = /svc listening on (\S+)/.exec(s.stdout())![1];
    s.child.stderr!.destroy();
    await fetch(`${url}/svc/v1/health`).then((r) => r.arrayBuffer()).catch(() => undefined); // logs a request line
    expect(await s.exited).toEqual({ code: 0, signal: null });
    expect(leftovers(dataDir)).toEqual([]);
    await expectRecoverable(dataDir, s.stdout());
  });
});

describe('nothing but 503 until first-start setup is complete', () => {
  it('a script that starts svc serve, waits for the port and adds a user succeeds', async () => {
    const dataDir = path.join(await tempDir(), 'data');
    const port = await closedPort();
    const s = spawnServe(dataDir, ['--port', String(port)]);
    // the script: wait until the port accepts, then go
    for (;;) {
      const open = await new Promise<boolean>((resolve) => {
        const sock = net.connect(port, '127.0.0.1', () => {
          sock.destroy();
          resolve(true);
        });
        sock.on('error', () => resolve(false));
      });
      if (open) break;
      if (s.child.exitCode !== null) throw new Error(s.stderr());
      await new Promise((r) => setTimeout(r, 5));
    }
    const env = envFor(dataDir);
    const added = await runSvc(['users', 'add', 'bob', '--role', 'user', '--password-stdin', '--port', String(port)], { env, input: 'password-of-bob' });
    expect(added.stderr).toContain('Created bob');
    expect(added.exitCode).toBe(0);
    const listed = await runSvc(['users', 'list', '--port', String(port)], { env });
    expect(listed.stdout).toMatch(/^bob\tuser\t/m);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  });

  it('answers 503 in the error shape with Retry-After, to everyone, while the first admin is being set up', async () => {
    const dataDir = await tempDir();
    const config = resolveConfig({ host: '127.0.0.1', port: 0, dataDir, keychain: 'file', logLevel: 'error' }, {});
    const during: { status: number; retryAfter: string | null; body: any }[] = [];
    const daemon = await startDaemon({
      config,
      keychain: noKeychain,
      logger: createLogger('error'),
      notify: async (line) => {
        const password = BANNER.exec(line)?.[1];
        if (!password) return;
        // setup is under way (the banner is being shown): the port is open, nothing is served yet
        const { url } = JSON.parse(await readFile(path.join(dataDir, 'daemon.json'), 'utf8'));
        const asks = [
          fetch(`${url}/svc/v1/health`),
          fetch(`${url}/svc/v1/auth/login`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ username: 'admin', password }) }),
          fetch(`${url}/svc/v1/auth/login`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Svc-Setup': 'guess' }, body: JSON.stringify({ username: 'admin', password }) }),
          fetch(`${url}/v1/models`, { headers: { Authorization: 'Bearer x' } }),
        ];
        for (const res of await Promise.all(asks)) during.push({ status: res.status, retryAfter: res.headers.get('Retry-After'), body: await res.json() });
      },
    });
    try {
      expect(during).toHaveLength(4);
      for (const d of during) {
        expect(d.status).toBe(503);
        expect(d.retryAfter).toBe('1');
        expect(d.body).toEqual({ error: { message: expect.any(String), type: 'server_error', code: 'starting' } });
      }
      expect((await fetch(`${daemon.url}/svc/v1/health`)).status).toBe(200);
      expect(await login(daemon.url, daemon.initialAdminPassword!)).toBe(200);
    } finally {
      await daemon.close();
    }
  });
});

/** A data dir as a SIGKILL leaves it between saving the first admin and showing its password. */
async function killedBeforeThePasswordWasShown(): Promise<string> {
  const dataDir = await tempDir();
  const killed = path.join(await tempDir(), 'killed');
  const config = resolveConfig({ host: '127.0.0.1', port: 0, dataDir, keychain: 'file', logLevel: 'error' }, {});
  const daemon = await startDaemon({
    config,
    keychain: noKeychain,
    logger: createLogger('error'),
    notify: async (line) => {
      // a socket file cannot be copied, and a killed daemon's socket answers nothing anyway
      if (BANNER.test(line)) await cp(dataDir, killed, { recursive: true, filter: (from) => path.basename(from) !== 'svc.sock' });
    },
  });
  await daemon.close();
  // a dead process's lock is taken over; this one names the live test process, so it goes
  await rm(path.join(killed, 'daemon.lock'));
  await rm(path.join(killed, 'daemon.json'));
  return killed;
}

describe('first start is a recoverable sequence', () => {
  it('an admin whose password was never shown (killed mid-start): the next start gives it a new one and shows it', async () => {
    // What a SIGKILL leaves while the first password is on its way to the screen: every write
    // before it is durable, so a copy of the data dir at that moment is exactly that.
    const killed = await killedBeforeThePasswordWasShown();
    const env = envFor(killed);
    const s = await startServe(killed, env);
    try {
      expect(s.stdout()).toContain('the first start was interrupted before the password of "admin" was shown. It has a new one (shown only once)');
      expect(s.stdout()).toContain('svc users passwd admin --offline');
      const password = BANNER.exec(s.stdout())![1];
      expect(await login(s.url, password)).toBe(200);
      // and the CLI is logged in, as after any first start
      const listed = await runSvc(['users', 'list'], { env });
      expect(listed.stdout, listed.stderr).toMatch(/^admin\tadmin\t/m);
    } finally {
      expect(await s.stop()).toBe(0);
    }
    // done: the start after that is an ordinary one
    const again = await startServe(killed, env);
    expect(again.stdout()).not.toContain('shown only once');
    expect(await again.stop()).toBe(0);
  });

  it('`svc users passwd NAME --offline` sets a password with no daemon: needs the master key, refuses while a daemon runs', async () => {
    const dataDir = await killedBeforeThePasswordWasShown();
    const env = envFor(dataDir);
    const passwd = (input: string, e = env) => runSvc(['users', 'passwd', 'admin', '--offline', '--password-stdin'], { env: e, input });

    const s = await startServe(dataDir, env);
    const refused = await passwd('a-new-password-1');
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toContain(`A daemon (pid ${s.pid}) is using ${dataDir}`);
    expect(await s.stop()).toBe(0);

    // without the right master key nothing changes
    const wrongKey = path.join(await tempDir(), 'wrong-key');
    await cp(dataDir, wrongKey, { recursive: true });
    await writeFile(path.join(wrongKey, 'master.key'), randomBytes(32).toString('base64'));
    const dbBefore = await readFile(path.join(wrongKey, 'db.json'));
    const noKey = await passwd('a-new-password-1', envFor(wrongKey));
    expect(noKey.exitCode).toBe(1);
    expect(noKey.stderr).toContain('The master key does not open this store');
    expect((await readFile(path.join(wrongKey, 'db.json'))).equals(dbBefore)).toBe(true);
    expect(leftovers(wrongKey)).toEqual([]);

    expect((await passwd('short')).exitCode).toBe(2);
    const reset = await passwd('a-new-password-1');
    expect(reset.stderr).toContain('Password of admin set');
    expect(reset.exitCode).toBe(0);
    expect(leftovers(dataDir)).toEqual([]);

    const after = await startServe(dataDir, env);
    try {
      expect(after.stdout()).not.toContain('shown only once');
      expect(await login(after.url, 'a-new-password-1')).toBe(200);
    } finally {
      expect(await after.stop()).toBe(0);
    }
  });

  it('an empty master.key with no store that uses it (a kill or full disk while creating it) is replaced', async () => {
    const dataDir = path.join(await tempDir(), 'data');
    for (const content of ['', randomBytes(32).toString('base64').slice(0, 17)]) {
      await rm(dataDir, { recursive: true, force: true });
      await cp(await tempDir(), dataDir, { recursive: true });
      await writeFile(path.join(dataDir, 'master.key'), content, { mode: 0o600 });
      const s = await startServe(dataDir, envFor(dataDir));
      try {
        expect(s.stdout()).toContain('master.key was empty or incomplete');
        expect(BANNER.test(s.stdout())).toBe(true);
        expect(Buffer.from(await readFile(path.join(dataDir, 'master.key'), 'utf8'), 'base64').length).toBe(32);
      } finally {
        expect(await s.stop()).toBe(0);
      }
      // and the next start opens the store with it
      const again = await startServe(dataDir, envFor(dataDir));
      expect(await again.stop()).toBe(0);
    }
  });
});
