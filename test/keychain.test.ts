/**
 * The master key in a real OS keychain: gnome-keyring's Secret Service on a private D-Bus session
 * bus (dbus-run-session), with HOME and the XDG dirs in a temp folder so nothing of the machine's
 * own keyring is touched. And the fallback to <data-dir>/master.key where no keychain answers.
 *
 * The session is one `dbus-run-session` that unlocks a fresh login keyring and then waits; the
 * daemon and the CLI join it through its bus address (DBUS_SESSION_BUS_ADDRESS), as any program
 * of a desktop session does. The whole tree is killed at the end.
 */
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { storedOnDisk } from './helpers/store.js';
import { cleanEnv, runSvc, serveExpectingFailure, type ServeProcess, startServe } from './helpers/cli.js';
import { tempDir } from './helpers/daemon.js';
import { needs } from './helpers/requirements.js';

// Daemon starts and CLI runs are real processes; bound them generously (never asserted as timings).
vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const onPath = async (cmd: string) => (await execa('sh', ['-c', `command -v ${cmd}`], { reject: false })).exitCode === 0;
const haveKeyring = (await onPath('dbus-run-session')) && (await onPath('gnome-keyring-daemon'));

/** HOME, XDG_* in `home`; no D-Bus, no SVC_* settings; the keychain preference left at its default. */
async function isolatedEnv(home: string): Promise<Record<string, string>> {
  const dirs = { XDG_DATA_HOME: path.join(home, 'data'), XDG_CONFIG_HOME: path.join(home, 'config'), XDG_CACHE_HOME: path.join(home, 'cache'), XDG_RUNTIME_DIR: path.join(home, 'run') };
  for (const dir of Object.values(dirs)) await mkdir(dir, { recursive: true, mode: 0o700 });
  return cleanEnv({
    HOME: home,
    ...dirs,
    DBUS_SESSION_BUS_ADDRESS: undefined,
    DBUS_SYSTEM_BUS_ADDRESS: undefined,
    DISPLAY: undefined,
    WAYLAND_DISPLAY: undefined,
    GNOME_KEYRING_CONTROL: undefined,
    SSH_AUTH_SOCK: undefined,
  });
}

interface KeyringSession {
  bus: string;
  stop(): Promise<void>;
}

/** A private session bus with gnome-keyring's Secret Service, its login keyring unlocked. */
async function startKeyringSession(env: Record<string, string>): Promise<KeyringSession> {
  const script = [
    // an empty password does not give a usable login keyring
    'printf %s test | gnome-keyring-daemon --unlock --components=secrets >/dev/null 2>&1',
    'echo "bus=$DBUS_SESSION_BUS_ADDRESS"',
    'exec sleep 300',
  ].join('\n');
  const child: ResultPromise = execa('dbus-run-session', ['--', 'sh', '-c', script], {
    env,
    extendEnv: false,
    detached: true, // its own process group: dbus-daemon and gnome-keyring-daemon die with it
    reject: false,
    buffer: false,
    stdin: 'ignore',
  });
  (child as unknown as Promise<unknown>).catch(() => undefined);
  const killTree = (signal: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, signal);
    } catch {
      /* gone */
    }
  };
  let exited = false;
  const done = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  void done.then(() => {
    exited = true;
  });
  child.stdout!.setEncoding('utf8');
  let out = '';
  const bus = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no D-Bus session within 15 s: ${out}`)), 15_000);
    child.stdout!.on('data', (c: string) => {
      out += c;
      const m = out.match(/bus=(\S+)\n/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    void done.then(() => reject(new Error(`dbus-run-session exited: ${out}`)));
  }).catch((err) => {
    killTree('SIGKILL');
    throw err;
  });
  return {
    bus,
    async stop() {
      killTree('SIGTERM');
      const timer = setTimeout(() => killTree('SIGKILL'), 5_000);
      if (!exited) await done;
      clearTimeout(timer);
      killTree('SIGKILL'); // whatever of the group outlived the leader
    },
  };
}

const sha = async (file: string) => createHash('sha256').update(await readFile(file)).digest('hex');
const exists = (file: string) => stat(file).then(() => true, () => false);

// One story in one keyring session: the first start puts the key there, the CLI and a restart find
// it, and a start without the keyring is refused. Its steps stay in order when the suite is shuffled.
describe.skipIf(!needs(Boolean(haveKeyring), 'keychain', 'gnome-keyring and dbus'))('master key in a real Secret Service (gnome-keyring)', { shuffle: false }, () => {
  let root: string;
  let dataDir: string;
  let baseEnv: Record<string, string>;
  let sessionEnv: Record<string, string>;
  let session: KeyringSession | undefined;
  let daemon: ServeProcess | undefined;

  beforeAll(async () => {
    root = await tempDir('svc-keychain-');
    baseEnv = await isolatedEnv(root);
    dataDir = path.join(root, 'store');
    session = await startKeyringSession(baseEnv);
    sessionEnv = { ...baseEnv, DBUS_SESSION_BUS_ADDRESS: session.bus, SVC_HOME: dataDir };
  });

  afterAll(async () => {
    await daemon?.stop();
    await session?.stop();
    if (root) await rm(root, { recursive: true, force: true });
  });

  it('svc serve with the default preference keeps the key in the keychain, not in a file', async () => {
    expect(sessionEnv.SVC_KEYCHAIN).toBeUndefined();
    daemon = await startServe(dataDir, sessionEnv);
    expect(daemon.stdout()).toContain('Created the user "admin"');
    expect(daemon.stdout()).not.toContain('master.key');
    expect(await exists(path.join(dataDir, 'master.key'))).toBe(false);
    const info = JSON.parse(await readFile(path.join(dataDir, 'daemon.json'), 'utf8'));
    expect(info.key_backend).toBe('keychain');
    expect((await storedOnDisk(dataDir)).meta.key_backend).toBe('keychain');
    // gnome-keyring wrote it to the temp HOME's keyring, not anywhere else.
    expect((await readdir(path.join(root, 'data', 'keyrings'))).length).toBeGreaterThan(0);
  });

  it('the CLI in the same session opens its sealed login with the keychain key', async () => {
    const list = await runSvc(['requests', 'list', '--json'], { env: sessionEnv });
    expect(list.exitCode, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toEqual([]);
    const status = await runSvc(['status', '--json'], { env: sessionEnv });
    expect(JSON.parse(status.stdout)).toMatchObject({ running: true, logged_in_as: 'admin' });
  });

  it('a restart in the same session opens the store', async () => {
    expect(await daemon!.stop()).toBe(0);
    daemon = await startServe(dataDir, sessionEnv);
    expect(daemon.stdout()).not.toContain('Created the user');
    expect(JSON.parse(await readFile(path.join(dataDir, 'daemon.json'), 'utf8')).key_backend).toBe('keychain');
    expect(await exists(path.join(dataDir, 'master.key'))).toBe(false);
    const list = await runSvc(['requests', 'list'], { env: sessionEnv });
    expect(list.exitCode, list.stderr).toBe(0);
  });

  it('started where no keychain answers, the keychain store refuses to start (exit 1), clearly, and is left untouched', async () => {
    expect(await daemon!.stop()).toBe(0);
    daemon = undefined;
    const files = ['db.json', 'cli-session.json'];
    const before = Object.fromEntries(await Promise.all(files.map(async (f) => [f, await sha(path.join(dataDir, f))])));
    const listing = (await readdir(dataDir)).sort();

    const noBus = { ...baseEnv, SVC_HOME: dataDir }; // no DBUS_SESSION_BUS_ADDRESS
    const r = await serveExpectingFailure(dataDir, noBus);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toMatch(/keychain/i);
    expect(r.stderr).toContain('master key');
    expect(r.stdout).not.toContain('svc listening');

    expect((await readdir(dataDir)).sort()).toEqual(listing);
    for (const f of files) expect(await sha(path.join(dataDir, f)), f).toBe(before[f]);
    expect(await exists(path.join(dataDir, 'master.key'))).toBe(false);

    // Back in the session it starts again, as if nothing happened.
    daemon = await startServe(dataDir, sessionEnv);
    expect((await runSvc(['requests', 'list'], { env: sessionEnv })).exitCode).toBe(0);
  });
});

describe('no keychain: the master key falls back to a file', () => {
  let root: string;
  let daemon: ServeProcess | undefined;

  beforeAll(async () => {
    root = await tempDir('svc-filekey-');
  });

  afterAll(async () => {
    await daemon?.stop();
    if (root) await rm(root, { recursive: true, force: true });
  });

  it('writes master.key (0600), says so once, and not on the second start', async () => {
    const env = await isolatedEnv(root); // no D-Bus; XDG_RUNTIME_DIR empty, so no bus socket to find
    const dataDir = path.join(root, 'store');
    const e: Record<string, string> = { ...env, SVC_HOME: dataDir };
    expect(e.SVC_KEYCHAIN).toBeUndefined();
    expect(e.DBUS_SESSION_BUS_ADDRESS).toBeUndefined();

    daemon = await startServe(dataDir, e);
    const first = daemon.stdout();
    expect(first).toMatch(/No OS keychain answered/);
    expect(first).toContain(path.join(dataDir, 'master.key'));
    expect((await stat(path.join(dataDir, 'master.key'))).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(path.join(dataDir, 'daemon.json'), 'utf8')).key_backend).toBe('file');
    // The notice is on stdout, once, and the key itself is printed nowhere.
    const key = (await readFile(path.join(dataDir, 'master.key'), 'utf8')).trim();
    expect(first.split('master.key').length - 1).toBe(1);
    expect(first + daemon.stderr()).not.toContain(key);

    const list = await runSvc(['requests', 'list'], { env: e });
    expect(list.exitCode, list.stderr).toBe(0);

    expect(await daemon.stop()).toBe(0);
    daemon = await startServe(dataDir, e);
    expect(daemon.stdout()).not.toMatch(/No OS keychain|master\.key/);
    expect(daemon.stdout()).not.toContain('Created the user');
    expect((await runSvc(['requests', 'list'], { env: e })).exitCode).toBe(0);
  });
});
