/**
 * A start that is refused changes no file: `svc serve` reads the store, binds its port and checks
 * the master key before it writes anything. The data dir here is what a killed daemon leaves
 * (changes in the journal that no snapshot holds yet, its daemon.lock and daemon.json), the case
 * in which a start that gave up used to write a snapshot on its way out.
 * Runs the build (bin/svc.js runs dist/): `npm run build` first.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdir, readFile, stat, truncate, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { cleanEnv, serveExpectingFailure, startServe } from './helpers/cli.js';
import { tempDir } from './helpers/daemon.js';
import { Api } from './helpers/http.js';

vi.setConfig({ testTimeout: 90_000 });

const envFor = (dataDir: string) => cleanEnv({ SVC_KEYCHAIN: 'file', SVC_HOME: dataDir, NO_COLOR: '1' });
const BANNER = /shown only once\):\s*\n\s*\n\s+(\S+)/;

/** Every file under `dir` and a hash of its bytes (a socket: its inode). */
async function filesOf(dir: string, prefix = ''): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(dir)).sort()) {
    const file = path.join(dir, name);
    const st = await stat(file);
    if (st.isDirectory()) Object.assign(out, await filesOf(file, `${prefix}${name}/`));
    // a killed daemon's CLI socket has no bytes: its inode says whether it was replaced
    else if (st.isSocket()) out[`${prefix}${name}`] = `socket ${st.ino}`;
    else out[`${prefix}${name}`] = createHash('sha256').update(await readFile(file)).digest('hex');
  }
  return out;
}

/** A data dir whose daemon was killed after a few acknowledged writes; answers it and the admin's password. */
async function killedDaemonDir(): Promise<{ dataDir: string; password: string }> {
  const dataDir = path.join(await tempDir(), 'data');
  const s = await startServe(dataDir, envFor(dataDir));
  const password = BANNER.exec(s.stdout())![1];
  const admin = await new Api(s.url).login('admin', password);
  for (let i = 0; i < 3; i++) expect((await admin.post('/svc/v1/mcps', { name: `m${i}`, url: `http://127.0.0.1:9/mcp${i}` })).status).toBe(201);
  process.kill(s.pid, 'SIGKILL');
  await s.exited;
  return { dataDir, password };
}

async function heldPort(): Promise<{ port: number; close: () => Promise<void> }> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as net.AddressInfo).port, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

/** After the refusals, the store still starts, with every acknowledged write. */
async function startsWithEverything(dataDir: string, password: string): Promise<void> {
  const s = await startServe(dataDir, envFor(dataDir));
  try {
    const admin = await new Api(s.url).login('admin', password);
    expect((await admin.get('/svc/v1/mcps')).body.data.map((m: { name: string }) => m.name).sort()).toEqual(['m0', 'm1', 'm2']);
  } finally {
    expect(await s.stop()).toBe(0);
  }
}

describe('a refused start leaves every file of the data dir as it was', () => {
  it('a master.key cut short', async () => {
    const { dataDir, password } = await killedDaemonDir();
    const keyFile = path.join(dataDir, 'master.key');
    const key = await readFile(keyFile);
    await truncate(keyFile, 10);
    const before = await filesOf(dataDir);
    expect(Object.keys(before)).toEqual(expect.arrayContaining(['db.json', 'db.journal.1', 'daemon.lock', 'daemon.json']));
    const r = await serveExpectingFailure(dataDir, envFor(dataDir));
    expect(r.exitCode, r.stderr).toBe(1);
    expect(r.stderr).toContain(`The master key in ${keyFile} is not a 256-bit key`);
    expect(await filesOf(dataDir), 'the refused start changed the data dir').toEqual(before);
    await writeFile(keyFile, key);
    await startsWithEverything(dataDir, password);
  });

  it('a port in use', async () => {
    const { dataDir, password } = await killedDaemonDir();
    const held = await heldPort();
    try {
      const before = await filesOf(dataDir);
      const r = await serveExpectingFailure(dataDir, envFor(dataDir), ['--port', String(held.port)]);
      expect(r.exitCode, r.stderr).toBe(1);
      expect(r.stderr).toContain(`Port ${held.port} on 127.0.0.1 is in use`);
      expect(await filesOf(dataDir), 'the refused start changed the data dir').toEqual(before);
    } finally {
      await held.close();
    }
    await startsWithEverything(dataDir, password);
  });

  it('a first start on a port in use creates nothing', async () => {
    const dataDir = await tempDir();
    const held = await heldPort();
    try {
      const r = await serveExpectingFailure(dataDir, envFor(dataDir), ['--port', String(held.port)]);
      expect(r.exitCode, r.stderr).toBe(1);
      expect(await readdir(dataDir)).toEqual([]);
    } finally {
      await held.close();
    }
  });
});

describe('a refusal `svc serve` prints, followed as printed', () => {
  it('a damaged journal line: the command it prints starts the store with what it said it keeps', async () => {
    const { dataDir, password } = await killedDaemonDir();
    const journal = path.join(dataDir, 'db.journal.1');
    const lines = (await readFile(journal, 'utf8')).split('\n');
    const n = lines.findIndex((l) => l.includes('"name":"m2"'));
    expect(n, 'the change that made m2').toBeGreaterThan(0);
    lines[n] = lines[n].replace('"name":"m2"', '"name":"m3"');
    await writeFile(journal, lines.join('\n'));
    const before = await filesOf(dataDir);
    const r = await serveExpectingFailure(dataDir, envFor(dataDir));
    expect(r.exitCode, r.stderr).toBe(1);
    expect(r.stderr).toContain(`The store's journal ${journal} is damaged: line ${n + 1} does not check out`);
    expect(await filesOf(dataDir)).toEqual(before);
    const run = /^svc: .* Run: (.*)$/m.exec(r.stderr);
    expect(run, r.stderr).not.toBeNull();
    execFileSync('sh', ['-c', run![1]], { stdio: 'pipe' });
    const s = await startServe(dataDir, envFor(dataDir));
    try {
      const admin = await new Api(s.url).login('admin', password);
      expect((await admin.get('/svc/v1/mcps')).body.data.map((m: { name: string }) => m.name).sort()).toEqual(['m0', 'm1']);
    } finally {
      expect(await s.stop()).toBe(0);
    }
  });
});
