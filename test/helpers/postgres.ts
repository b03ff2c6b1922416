/**
 * A real PostgreSQL server for the team-server tests: Debian's server binaries, a cluster made
 * afresh in a temp dir, run as the `postgres` user (the server refuses to run as root), listening
 * on 127.0.0.1 and a free port only, with its Unix socket in the temp dir and password
 * (scram-sha-256) authentication. Each test file starts its own server (a fault test stops it),
 * and each test takes a database of its own. Every start and stop has a hard deadline, and
 * `close()` removes the cluster whatever state it is in.
 */
import { execFile, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';

const START_DEADLINE_MS = 30_000;
const STOP_DEADLINE_MS = 15_000;

/** Where the newest installed server's binaries are (Debian keeps them off the PATH), or null. */
export function postgresBinDir(): string | null {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const majors = readdirSync(root)
    .filter((d) => existsSync(path.join(root, d, 'bin', 'initdb')) && existsSync(path.join(root, d, 'bin', 'pg_ctl')))
    .sort((a, b) => Number(b) - Number(a));
  return majors.length ? path.join(root, majors[0], 'bin') : null;
}

export interface TestPostgres {
  host: string;
  port: number;
  user: string;
  password: string;
  /** a connection URL for `database` (with the password) */
  url(database: string): string;
  /** a new, empty database; answers its URL */
  createDatabase(): Promise<string>;
  /** stops the server, keeping its data (the database is "down") */
  stopServer(): Promise<void>;
  /** starts it again on the same port */
  startServer(): Promise<void>;
  /** stops the server and removes the cluster */
  close(): Promise<void>;
}

const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;

/** Runs a server binary as the postgres user (when we are root), failing after `deadlineMs`. */
function runAsPostgres(bin: string, args: string[], deadlineMs: number): Promise<string> {
  const [file, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
  return new Promise((resolve, reject) => {
    execFile(file, argv, { timeout: deadlineMs, killSignal: 'SIGKILL' }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${path.basename(bin)} ${args[0] ?? ''} failed (${err.killed ? `no answer within ${deadlineMs} ms` : err.message}): ${stderr || stdout}`));
      else resolve(stdout);
    });
  });
}

/** A port nobody listens on right now (the server may still lose a race for it: the start then fails loudly). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

function postgresIds(): { uid: number; gid: number } {
  return { uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })), gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })) };
}

/** Makes a cluster in a temp dir and starts it; throws (having removed it) when it does not come up in time. */
export async function startPostgres(): Promise<TestPostgres> {
  const bin = postgresBinDir();
  if (!bin) throw new Error('PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-pg-'));
  const data = path.join(dir, 'data');
  const sockets = path.join(dir, 'sock');
  const password = randomBytes(18).toString('base64url');
  await mkdir(sockets);
  await writeFile(path.join(dir, 'pw'), password, { mode: 0o600 });
  if (asRoot) {
    const { uid, gid } = postgresIds();
    for (const p of [dir, sockets, path.join(dir, 'pw')]) await chown(p, uid, gid);
  }
  const port = await freePort();
  const pgCtl = path.join(bin, 'pg_ctl');
  const options = `-c listen_addresses=127.0.0.1 -p ${port} -c unix_socket_directories=${sockets} -c fsync=off -c max_connections=200`;
  let running = false;
  const startServer = async () => {
    await runAsPostgres(pgCtl, ['start', '-D', data, '-w', '-t', String(START_DEADLINE_MS / 1000 - 5), '-l', path.join(dir, 'server.log'), '-o', options], START_DEADLINE_MS);
    running = true;
  };
  const stopServer = async () => {
    if (!running) return;
    await runAsPostgres(pgCtl, ['stop', '-D', data, '-m', 'fast', '-w', '-t', String(STOP_DEADLINE_MS / 1000 - 5)], STOP_DEADLINE_MS);
    running = false;
  };
  // A worker that ends without running its hooks (a test that timed out, a killed worker) must
  // not leave the server running: a watchdog outside this process stops it and removes the
  // cluster once this process is gone. A normal close() ends the watchdog first.
  const watchdog = startWatchdog(process.pid, pgCtl, data, dir);
  const close = async () => {
    watchdog.kill('SIGKILL');
    try {
      await stopServer();
    } catch {
      // a server that does not stop in time is killed: nothing may outlive the test run
      await runAsPostgres(pgCtl, ['kill', 'KILL', String(await serverPid(data))], 5_000).catch(() => undefined);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  };
  try {
    await runAsPostgres(path.join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=scram-sha-256', `--pwfile=${path.join(dir, 'pw')}`, '--no-sync', '-E', 'UTF8', '--locale=C'], START_DEADLINE_MS);
    // loopback only, with a password: no trust, no other address
    await writeFile(path.join(data, 'pg_hba.conf'), 'host all all 127.0.0.1/32 scram-sha-256\n');
    await startServer();
  } catch (err) {
    await close();
    throw err;
  }
  const url = (database: string) => `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`;
  let n = 0;
  return {
    host: '127.0.0.1',
    port,
    user: 'postgres',
    password,
    url,
    async createDatabase() {
      const name = `svc_test_${process.pid}_${++n}`;
      const admin = new pg.Client({ connectionString: url('postgres'), connectionTimeoutMillis: 5_000 });
      await admin.connect();
      try {
        await admin.query(`CREATE DATABASE ${name}`);
      } finally {
        await admin.end();
      }
      return url(name);
    },
    stopServer,
    startServer,
    close,
  };
}

/** A detached shell that waits for `pid` to end, then stops the cluster and removes its dir. */
function startWatchdog(pid: number, pgCtl: string, data: string, dir: string) {
  const quote = (x: string) => `'${x.replace(/'/g, `'\\''`)}'`;
  const stopCmd = `${asRoot ? 'runuser -u postgres -- ' : ''}${quote(pgCtl)} stop -D ${quote(data)} -m immediate -w -t 10`;
  const script = `while kill -0 ${pid} 2>/dev/null; do sleep 1; done; ${stopCmd} >/dev/null 2>&1; rm -rf ${quote(dir)}`;
  const child = spawn('sh', ['-c', script], { detached: true, stdio: 'ignore' });
  child.unref();
  return child;
}

async function serverPid(data: string): Promise<number> {
  return Number((await readFile(path.join(data, 'postmaster.pid'), 'utf8')).split('\n')[0]);
}

/**
 * A server for the tests of one describe block: started before them, and after them everything
 * handed to `closeLater` is closed (last first) and the server removed, failed or not.
 */
export function usePostgres(): { server: () => TestPostgres; closeLater: (close: () => Promise<unknown>) => void } {
  let server: TestPostgres | undefined;
  const toClose: (() => Promise<unknown>)[] = [];
  beforeAll(async () => {
    server = await startPostgres();
  }, 40_000);
  afterAll(async () => {
    for (const close of toClose.reverse()) await close().catch(() => undefined);
    await server?.close();
  }, 40_000);
  return {
    server: () => {
      if (!server) throw new Error('the PostgreSQL server is not started (usePostgres runs its start in beforeAll)');
      return server;
    },
    closeLater: (close) => void toClose.push(close),
  };
}
