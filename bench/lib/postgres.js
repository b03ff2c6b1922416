// A throw-away PostgreSQL cluster for the team-server bench, made as the tests make theirs
// (test/helpers/postgres.ts): Debian's server binaries, run as the postgres user when we are root,
// on 127.0.0.1 and a free port with a password, removed at the end. Or SVC_BENCH_DATABASE_URL.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

function binDir() {
  const root = '/usr/lib/postgresql';
  const majors = existsSync(root) ? readdirSync(root).filter((d) => existsSync(path.join(root, d, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a)) : [];
  return majors.length ? path.join(root, majors[0], 'bin') : null;
}

const freePort = () =>
  new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

/** Answers { url(name), createDatabase(), close() }, or null when there is no server to run. */
export async function benchPostgres() {
  if (process.env.SVC_BENCH_DATABASE_URL) {
    const url = process.env.SVC_BENCH_DATABASE_URL;
    return { createDatabase: async () => url, close: async () => undefined };
  }
  const bin = binDir();
  if (!bin) return null;
  const asRoot = process.getuid?.() === 0;
  const run = (file, args) => execFileSync(asRoot ? 'runuser' : file, asRoot ? ['-u', 'postgres', '--', file, ...args] : args, { stdio: 'pipe', timeout: 30_000 });
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-pg-'));
  const password = randomBytes(18).toString('base64url');
  mkdirSync(path.join(dir, 'sock'));
  writeFileSync(path.join(dir, 'pw'), password, { mode: 0o600 });
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }));
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }));
    for (const p of [dir, path.join(dir, 'sock'), path.join(dir, 'pw')]) chownSync(p, uid, gid);
  }
  const data = path.join(dir, 'data');
  const port = await freePort();
  const stopServer = () => {
    try {
      run(path.join(bin, 'pg_ctl'), ['stop', '-D', data, '-m', 'fast', '-w', '-t', '10']);
    } catch {
      /* it was not running */
    }
  };
  try {
    run(path.join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=scram-sha-256', `--pwfile=${path.join(dir, 'pw')}`, '--no-sync', '-E', 'UTF8', '--locale=C']);
    writeFileSync(path.join(data, 'pg_hba.conf'), 'host all all 127.0.0.1/32 scram-sha-256\n');
    // durable as a team's would be: fsync and synchronous commit stay on
    run(path.join(bin, 'pg_ctl'), ['start', '-D', data, '-w', '-t', '25', '-l', path.join(dir, 'server.log'), '-o', `-c listen_addresses=127.0.0.1 -p ${port} -c unix_socket_directories=${path.join(dir, 'sock')}`]);
  } catch (err) {
    stopServer();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const url = (name) => `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${name}`;
  let n = 0;
  return {
    async createDatabase() {
      const name = `svc_bench_${++n}`;
      const admin = new pg.Client({ connectionString: url('postgres') });
      await admin.connect();
      await admin.query(`CREATE DATABASE ${name}`);
      await admin.end();
      return url(name);
    },
    async close() {
      stopServer();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Transactions rolled back on the database at `url` so far (a serializable conflict that svc ran
 * again counts here), as PostgreSQL's statistics hold them (flushed by each backend within a second).
 */
export async function rollbacks(url) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return Number((await client.query('SELECT xact_rollback FROM pg_stat_database WHERE datname = current_database()')).rows[0].xact_rollback);
  } finally {
    await client.end();
  }
}
