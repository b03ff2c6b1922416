/**
 * A data dir that is not the person's own is not used: one another user made (with a master.key
 * they planted, so the store would be sealed under their key), a link to a folder, one that others
 * may write in; nor a master.key that is another user's or that others may read. A refused start
 * writes nothing. The CLI does not trust a daemon.json in a data dir that is not the user's own
 * (its URL is where the walkthrough's scripts send API keys).
 * Another user is played by `nobody` (files chowned to it), so these run as root, on Linux.
 * Runs the build (bin/svc.js runs dist/): `npm run build` first.
 */
import { createHash, randomBytes } from 'node:crypto';
import { chmod, chown, lstat, mkdir, readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { cleanEnv, runSvc, serveExpectingFailure, startServe } from './helpers/cli.js';
import { tempDir } from './helpers/daemon.js';

vi.setConfig({ testTimeout: 90_000 });

const NOBODY = 65534;
const envFor = (dataDir: string, extra: Record<string, string> = {}) => cleanEnv({ SVC_KEYCHAIN: 'file', SVC_HOME: dataDir, NO_COLOR: '1', ...extra });

/** Each entry of `dir` with its owner, mode and a hash of its bytes: what a refused start must leave as it was. */
async function stateOf(dir: string): Promise<Record<string, string>> {
  const top = await lstat(dir);
  const out: Record<string, string> = { '.': `${top.uid} ${(top.mode & 0o7777).toString(8)}` };
  for (const name of (await readdir(dir)).sort()) {
    const st = await lstat(path.join(dir, name));
    out[name] = `${st.uid} ${(st.mode & 0o7777).toString(8)} ${st.isFile() ? createHash('sha256').update(await readFile(path.join(dir, name))).digest('hex') : ''}`;
  }
  return out;
}

/** A data dir that `nobody` made, holding the master.key they chose. */
async function nobodysDataDir(): Promise<string> {
  const dataDir = path.join(await tempDir(), 'data');
  await mkdir(dataDir, { mode: 0o700 });
  await writeFile(path.join(dataDir, 'master.key'), randomBytes(32).toString('base64'), { mode: 0o600 });
  await chown(path.join(dataDir, 'master.key'), NOBODY, NOBODY);
  await chown(dataDir, NOBODY, NOBODY);
  return dataDir;
}

describe.skipIf(process.platform !== 'linux' || process.getuid?.() !== 0)('a data dir that is not the user’s own', () => {
  it('one another user made, with their master.key: refused, naming the dir, and nothing is written', async () => {
    const dataDir = await nobodysDataDir();
    const before = await stateOf(dataDir);
    const r = await serveExpectingFailure(dataDir, envFor(dataDir));
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toContain(dataDir);
    expect(r.stderr).toMatch(/belongs to another user/);
    expect(await stateOf(dataDir)).toEqual(before);
  });

  it('a link to a folder: refused, and nothing is written there', async () => {
    const target = await tempDir();
    await chmod(target, 0o700);
    const dataDir = path.join(await tempDir(), 'data');
    await symlink(target, dataDir);
    const before = await stateOf(target);
    const r = await serveExpectingFailure(dataDir, envFor(dataDir));
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toContain(dataDir);
    expect(r.stderr).toMatch(/is a link/);
    expect(await stateOf(target)).toEqual(before);
  });

  it('one that group or others may write in: refused, with how to fix it', async () => {
    for (const mode of [0o777, 0o770, 0o702]) {
      const dataDir = path.join(await tempDir(), 'data');
      await mkdir(dataDir);
      await chmod(dataDir, mode);
      const before = await stateOf(dataDir);
      const r = await serveExpectingFailure(dataDir, envFor(dataDir));
      expect(r.exitCode, mode.toString(8)).not.toBe(0);
      expect(r.stderr).toContain(dataDir);
      expect(r.stderr).toContain('chmod 700');
      expect(await stateOf(dataDir), mode.toString(8)).toEqual(before);
    }
  });

  it('a master.key of another user, or one others may read: refused, and nothing is written', async () => {
    for (const [owner, mode] of [
      [NOBODY, 0o600],
      [0, 0o644],
      [0, 0o640],
    ]) {
      const dataDir = path.join(await tempDir(), 'data');
      await mkdir(dataDir, { mode: 0o700 });
      const key = path.join(dataDir, 'master.key');
      await writeFile(key, randomBytes(32).toString('base64'));
      await chmod(key, mode);
      await chown(key, owner, owner);
      const before = await stateOf(dataDir);
      const r = await serveExpectingFailure(dataDir, envFor(dataDir));
      const what = `${owner} ${mode.toString(8)}`;
      expect(r.exitCode, what).not.toBe(0);
      expect(r.stderr, what).toContain(key);
      expect(await stateOf(dataDir), what).toEqual(before);
    }
  });

  // The socket of a data dir too deep for a socket path is in the runtime folder, which is
  // checked; the data dir, where daemon.json is, was not.
  it('the offline commands (svc users passwd --offline, svc store copy) refuse one another user made, writing nothing', async () => {
    const dataDir = await nobodysDataDir();
    const before = await stateOf(dataDir);
    const passwd = await runSvc(['users', 'passwd', 'admin', '--offline', '--password-stdin'], { env: envFor(dataDir), input: 'a-new-password-long-enough\n' });
    expect(passwd.exitCode).not.toBe(0);
    expect(passwd.stderr).toContain(dataDir);
    expect(passwd.stderr).toMatch(/belongs to another user/);
    const copy = await runSvc(['store', 'copy', '--to', 'postgres://svc@127.0.0.1:1/none'], { env: envFor(dataDir, { SVC_MASTER_KEY: randomBytes(32).toString('base64url') }) });
    expect(copy.exitCode).not.toBe(0);
    expect(copy.stderr).toMatch(/belongs to another user/);
    expect(await stateOf(dataDir)).toEqual(before);
  });

  it('svc status does not print the URL of a daemon.json planted in a data dir another user owns', async () => {
    const runtime = await tempDir();
    await chmod(runtime, 0o700);
    const dataDir = path.join(await tempDir(), 'a-data-dir-deep-enough-that-its-socket-path-is-too-long-for-a-unix-socket', 'data');
    const env = envFor(dataDir, { XDG_RUNTIME_DIR: runtime });
    const s = await startServe(dataDir, env);
    try {
      const own = await runSvc(['status', '--url'], { env });
      expect(own.stdout.trim()).toBe(s.url);
      // the dir is another user's, who rewrote its daemon.json
      const file = path.join(dataDir, 'daemon.json');
      const info = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
      await writeFile(file, JSON.stringify({ ...info, base_url: 'http://evil.example:8080' }));
      await chown(file, NOBODY, NOBODY);
      await chown(dataDir, NOBODY, NOBODY);
      const r = await runSvc(['status', '--url'], { env });
      expect(r.stdout).not.toContain('evil.example');
      expect(r.exitCode).not.toBe(0);
      expect(r.stderr).toContain(dataDir);
    } finally {
      await chown(dataDir, 0, 0);
      await s.stop();
    }
  });
});
