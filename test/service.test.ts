import { mkdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../src/cli/main.js';
import type { ProcessRunner } from '../src/cli/output.js';
import { SCRIPT_PATH } from '../src/cli/service.js';
import { cleanEnv, REPO } from './helpers/cli.js';
import { startTestDaemon, tempDir } from './helpers/daemon.js';

/** `svc <args>` in-process with a process runner that records what the service manager was asked. */
async function svc(args: string[], env: Record<string, string>, opts: { platform?: NodeJS.Platform; run?: ProcessRunner } = {}) {
  const calls: string[][] = [];
  let stdout = '';
  let stderr = '';
  const run: ProcessRunner = opts.run ?? (async (file, argv) => (calls.push([file, ...argv]), { code: 0, stdout: '', stderr: '' }));
  const exitCode = await main(['node', 'svc', ...args], {
    out: (t) => void (stdout += t),
    err: (t) => void (stderr += t),
    isTTY: false,
    env,
    platform: opts.platform ?? 'linux',
    run,
  });
  return { exitCode, stdout, stderr, calls };
}

describe('svc service: svc serve as a user service that starts at login', () => {
  let root: string;
  let dataDir: string;
  let env: Record<string, string>;
  let unit: string;
  beforeAll(async () => {
    root = await tempDir('svc-service-');
    dataDir = path.join(root, 'data');
    // a data dir that has had its first start (the password was shown in a terminal)
    await (await startTestDaemon({ dataDir })).stop();
    env = cleanEnv({ SVC_HOME: dataDir, HOME: path.join(root, 'home'), XDG_CONFIG_HOME: path.join(root, 'config') });
    unit = path.join(root, 'config', 'systemd', 'user', 'svc.service');
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it('--dry-run prints the systemd user unit (LimitNOFILE high, the data dir written out) and changes nothing', async () => {
    const r = await svc(['service', 'install', '--dry-run'], env);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain(`# ${unit}\n`);
    expect(r.stdout).toContain(`ExecStart=${process.execPath} ${SCRIPT_PATH} serve --data-dir ${dataDir} --log-format human\n`);
    expect(SCRIPT_PATH).toBe(path.join(REPO, 'bin', 'svc.js'));
    expect(r.stdout).toMatch(/^LimitNOFILE=65536$/m);
    expect(r.stdout).toMatch(/^Restart=on-failure$/m);
    expect(r.stdout).toMatch(/^WantedBy=default\.target$/m);
    expect(r.stdout).toContain('journalctl --user -u svc');
    expect(r.stdout).toContain('systemctl --user enable --now svc.service');
    expect(r.calls).toEqual([]);
    await expect(stat(unit)).rejects.toThrow();
    // the port and host it was given go into the unit too
    const withPort = await svc(['--port', '7999', 'service', 'install', '--dry-run'], env);
    expect(withPort.stdout).toContain(`serve --data-dir ${dataDir} --port 7999 --log-format human`);
  });

  it('--dry-run on macOS prints the launchd agent: runs at load, the open-files limit, a log file', async () => {
    const r = await svc(['service', 'install', '--dry-run'], env, { platform: 'darwin' });
    expect(r.exitCode, r.stderr).toBe(0);
    const plist = path.join(root, 'home', 'Library', 'LaunchAgents', 'local.svc.plist');
    expect(r.stdout).toContain(`# ${plist}\n`);
    expect(r.stdout).toContain(`<string>${SCRIPT_PATH}</string>\n    <string>serve</string>\n    <string>--data-dir</string>\n    <string>${dataDir}</string>`);
    expect(r.stdout).toMatch(/<key>RunAtLoad<\/key>\s*<true\/>/);
    expect(r.stdout).toMatch(/<key>NumberOfFiles<\/key>\s*<integer>65536<\/integer>/);
    expect(r.stdout).toContain(path.join(root, 'home', 'Library', 'Logs', 'svc', 'svc.log'));
    expect(r.stdout).toContain(`launchctl bootstrap gui/`);
  });

  it('install writes the unit, reloads systemd, enables and starts it; uninstall stops, disables and removes it', async () => {
    const installed = await svc(['service', 'install'], env);
    expect(installed.exitCode, installed.stderr).toBe(0);
    expect((await stat(unit)).mode & 0o777).toBe(0o644);
    expect(await readFile(unit, 'utf8')).toMatch(/^LimitNOFILE=65536$/m);
    expect(installed.calls).toEqual([
      ['systemctl', '--user', 'daemon-reload'],
      ['systemctl', '--user', 'enable', '--now', 'svc.service'],
    ]);
    expect(installed.stderr).toContain('journalctl --user -u svc');

    const removed = await svc(['service', 'uninstall'], env);
    expect(removed.exitCode, removed.stderr).toBe(0);
    expect(removed.calls).toEqual([
      ['systemctl', '--user', 'disable', '--now', 'svc.service'],
      ['systemctl', '--user', 'daemon-reload'],
    ]);
    await expect(stat(unit)).rejects.toThrow();
    const again = await svc(['service', 'uninstall'], env);
    expect(again.exitCode).toBe(0);
    expect(again.stderr).toContain('No svc service is installed');
    expect(again.calls).toEqual([]);
  });

  it('with a daemon of the data dir running, install enables it for the next login without starting a second one', async () => {
    const d = await startTestDaemon({ dataDir });
    try {
      const r = await svc(['service', 'install'], env);
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.calls).toEqual([
        ['systemctl', '--user', 'daemon-reload'],
        ['systemctl', '--user', 'enable', 'svc.service'],
      ]);
      expect(r.stderr).toContain(`A daemon (pid ${process.pid}) serves this data dir already`);
      expect(r.stderr).toContain('systemctl --user start svc');
    } finally {
      await d.stop();
      await svc(['service', 'uninstall'], env);
    }
  });

  it('without systemctl: the unit is written, the command says so and exits 1', async () => {
    const missing: ProcessRunner = async () => {
      throw Object.assign(new Error('spawn systemctl ENOENT'), { code: 'ENOENT' });
    };
    const r = await svc(['service', 'install'], env, { run: missing });
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain(`Wrote ${unit}, but systemctl was not found`);
    const failing: ProcessRunner = async () => ({ code: 1, stdout: '', stderr: 'Failed to connect to bus: No medium found\n' });
    const u = await svc(['service', 'uninstall'], env, { run: failing });
    expect(u.exitCode).toBe(1);
    expect(u.stderr).toContain('Failed to connect to bus');
    await expect(stat(unit)).rejects.toThrow();
  });

  it('refuses a data dir that never started (its first password would go to the log), and a system it does not know', async () => {
    const fresh = path.join(root, 'fresh');
    await mkdir(fresh, { recursive: true });
    const r = await svc(['service', 'install'], { ...env, SVC_HOME: fresh });
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain('Run `svc serve` once in a terminal');
    expect(r.calls).toEqual([]);
    const win = await svc(['service', 'install', '--dry-run'], env, { platform: 'win32' });
    expect(win.exitCode).toBe(1);
    expect(win.stderr).toContain('no user service manager on win32');
  });
});
