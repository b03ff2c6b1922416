/**
 * The data dir's lock (src/store/lock.ts): one daemon per data dir, even when two start at the
 * same instant over a lock a crashed daemon left, and no lock that a dead process holds.
 * The contenders are separate processes running the build (dist/): `npm run build` first.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DataDirLockedError, lockDataDir, lockSocketName } from '../src/store/lock.js';
import { BIN, cleanEnv, REPO, requireFreshDist } from './helpers/cli.js';
import { tempDir } from './helpers/daemon.js';

const RACER = path.join(REPO, 'test', 'helpers', 'lock-racer.mjs');
const LOCK_MODULE = path.join(REPO, 'dist', 'store', 'lock.js');
const children = new Set<ChildProcess>();
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

/** A child process's output, line by line, and its exit. */
function spawnTracked(args: string[], env: Record<string, string> = cleanEnv()) {
  const child = spawn(process.execPath, args, { cwd: REPO, env, stdio: ['pipe', 'pipe', 'pipe'] });
  children.add(child);
  let out = '';
  let err = '';
  const waiters: (() => void)[] = [];
  child.stdout!.setEncoding('utf8').on('data', (c: string) => {
    out += c;
    for (const w of waiters.splice(0)) w();
  });
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => {
      children.delete(child);
      for (const w of waiters.splice(0)) w();
      resolve({ code, signal });
    }),
  );
  /** resolves with the first match of `pattern` on stdout; fails, saying what it waited for, if the child exits first */
  const line = (pattern: RegExp, what: string) =>
    new Promise<RegExpMatchArray>((resolve, reject) => {
      const check = () => {
        const m = pattern.exec(out);
        if (m) return resolve(m);
        if (child.exitCode !== null || child.signalCode !== null) return reject(new Error(`${what}: the process exited first\nstdout: ${out}\nstderr: ${err}`));
        waiters.push(check);
      };
      check();
    });
  return { child, exited, line, stdout: () => out, stderr: () => err };
}

/** The pid of a process that has run and exited: what a crashed daemon leaves in daemon.lock. */
async function deadPid(): Promise<number> {
  const p = spawnTracked(['-e', '']);
  await p.exited;
  return p.child.pid!;
}

describe('the data dir lock', () => {
  it('is one lock for one directory, however it is named: a symlink, a relative path, a bind mount', async () => {
    const parent = await tempDir();
    const dataDir = path.join(parent, 'data');
    await mkdir(dataDir);
    const lock = await lockDataDir(dataDir);
    try {
      await symlink(dataDir, path.join(parent, 'link'));
      const names = [path.join(parent, 'link'), path.relative(process.cwd(), dataDir), `${parent}/./link/../data`];
      // a bind mount where this process may make one (root, or a mount namespace)
      const mounted = path.join(parent, 'mounted');
      await mkdir(mounted);
      const bound = spawnSync('mount', ['--bind', dataDir, mounted]).status === 0;
      if (bound) names.push(mounted);
      try {
        for (const name of names) await expect(lockDataDir(name, { recordPid: false }), name).rejects.toBeInstanceOf(DataDirLockedError);
      } finally {
        if (bound) spawnSync('umount', [mounted]);
      }
    } finally {
      await lock.release();
    }
  });

  it('two processes that reach a stale lock at the same instant: exactly one takes it, in every one of 40 rounds', { timeout: 180_000 }, async () => {
    requireFreshDist();
    const dataDir = await tempDir();
    // A crashed daemon's leftover; from the second round on, the winner of the last round (killed holding it) leaves its own.
    await writeFile(path.join(dataDir, 'daemon.lock'), String(await deadPid()));
    for (let round = 0; round < 40; round++) {
      const racers = [0, 1].map(() => spawnTracked([RACER, dataDir, LOCK_MODULE]));
      await Promise.all(racers.map((r) => r.line(/^ready$/m, 'the contender to load the lock')));
      const at = Date.now() + 40;
      for (const r of racers) r.child.stdin!.write(`${at}\n`);
      const results = await Promise.all(racers.map(async (r) => JSON.parse((await r.line(/^\{.*\}$/m, 'the contender to report'))[0])));
      const winners = results.filter((r) => r.won);
      expect(winners, `round ${round}: ${JSON.stringify(results)}`).toHaveLength(1);
      const loser = results.find((r) => !r.won);
      expect(loser.name, JSON.stringify(loser)).toBe('DataDirLockedError');
      expect(loser.holder, `round ${round}: the refusal names the holder`).toBe(winners[0].pid);
      expect(Number(await readFile(path.join(dataDir, 'daemon.lock'), 'utf8'))).toBe(winners[0].pid);
      // Both go away without releasing anything, as crashed daemons would.
      for (const r of racers) r.child.kill('SIGKILL');
      await Promise.all(racers.map((r) => r.exited));
    }
  });

  it('is free the moment its holder is killed, with no stale lock to take over', async () => {
    requireFreshDist();
    const dataDir = await tempDir();
    const holder = spawnTracked([RACER, dataDir, LOCK_MODULE]);
    await holder.line(/^ready$/m, 'the holder to load the lock');
    holder.child.stdin!.write(`${Date.now()}\n`);
    expect(JSON.parse((await holder.line(/^\{.*\}$/m, 'the holder to report'))[0]).won).toBe(true);
    await expect(lockDataDir(dataDir)).rejects.toMatchObject({ name: 'DataDirLockedError', pid: holder.child.pid });
    holder.child.kill('SIGKILL');
    await holder.exited;
    const lock = await lockDataDir(dataDir);
    expect(Number(await readFile(path.join(dataDir, 'daemon.lock'), 'utf8'))).toBe(process.pid);
    await lock.release();
  });

  it('a holder that has not written its pid yet: the refusal says so, and never names the dead pid a crash left', async () => {
    const dataDir = await tempDir();
    const dead = await deadPid();
    await writeFile(path.join(dataDir, 'daemon.lock'), String(dead));
    const lock = await lockDataDir(dataDir, { recordPid: false });
    try {
      const err = await lockDataDir(dataDir).catch((e: Error) => e);
      expect(err).toMatchObject({ name: 'DataDirLockedError', pid: 0 });
      expect((err as Error).message).toContain('(its pid not yet in daemon.lock) is already using the data dir');
      expect((err as Error).message).not.toContain(String(dead));
      // left as it was until the holder records itself
      expect(Number(await readFile(path.join(dataDir, 'daemon.lock'), 'utf8'))).toBe(dead);
      await lock.recordPid();
      await expect(lockDataDir(dataDir)).rejects.toMatchObject({ pid: process.pid });
    } finally {
      await lock.release();
    }
  });

  it('keeps no process alive, and closes any connection to it at once', { timeout: 60_000 }, async () => {
    requireFreshDist();
    const dataDir = await tempDir();
    // a process that takes the lock and does nothing else ends by itself
    const holder = spawnTracked(['--input-type=module', '-e', `const { lockDataDir } = await import(${JSON.stringify(LOCK_MODULE)}); await lockDataDir(${JSON.stringify(dataDir)}); console.log('locked');`]);
    await holder.line(/^locked$/m, 'the lock to be taken');
    expect(await holder.exited).toEqual({ code: 0, signal: null });

    const lock = await lockDataDir(dataDir);
    try {
      const socket = net.connect({ path: await lockSocketName(dataDir) });
      let received = 0;
      socket.on('data', (c: Buffer) => (received += c.length));
      socket.on('error', () => undefined);
      await new Promise((resolve) => socket.once('close', resolve));
      expect(received).toBe(0);
    } finally {
      await lock.release();
    }
  });

  it.skipIf(process.platform !== 'linux')('two `svc serve` started at once on one data dir: one serves, the other is refused naming it', { timeout: 120_000 }, async () => {
    requireFreshDist();
    for (let round = 0; round < 3; round++) {
      const dataDir = await tempDir();
      await writeFile(path.join(dataDir, 'daemon.lock'), String(await deadPid()));
      const env = cleanEnv({ SVC_KEYCHAIN: 'file', SVC_HOME: dataDir, NO_COLOR: '1' });
      const serves = [0, 1].map(() => spawnTracked([BIN, 'serve', '--host', '127.0.0.1', '--port', '0', '--data-dir', dataDir], env));
      const outcomes = await Promise.all(
        serves.map((s) =>
          Promise.race([s.line(/svc listening on (\S+)/, 'svc listening').then(() => 'serving' as const), s.exited.then(() => 'exited' as const)]).catch(() => 'exited' as const),
        ),
      );
      const winner = serves[outcomes.indexOf('serving')];
      const loser = serves[outcomes.indexOf('exited')];
      expect(outcomes.sort(), `round ${round}: ${serves.map((s) => s.stderr()).join('\n---\n')}`).toEqual(['exited', 'serving']);
      expect((await loser.exited).code, loser.stderr()).toBe(1);
      expect(loser.stderr()).toContain(`Another svc serve (pid ${winner.child.pid}) is already using the data dir ${dataDir}`);
      expect(Number(await readFile(path.join(dataDir, 'daemon.lock'), 'utf8'))).toBe(winner.child.pid);
      winner.child.kill('SIGTERM');
      expect((await winner.exited).code, winner.stderr()).toBe(0);
    }
  });
});
