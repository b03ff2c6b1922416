/**
 * `svc review` end to end: the real binary in a real terminal (a tmux pane, 80x24) against a real
 * `svc serve` child process on 127.0.0.1. Keys go in with `tmux send-keys`, the screen comes back
 * with `tmux capture-pane`, and the outcome is checked over HTTP. Tests here run in order and
 * share the daemon. Skipped only where tmux is missing (CI installs it).
 *
 * UPDATE_SCREENSHOTS=1 also saves the detail screen as docs/screenshots/tui.txt for the README
 * (and, with its colours, as $TMPDIR/svc-tui-screenshot.ansi, from which tui.png is drawn).
 */
import { spawnSync } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { BIN, cleanEnv, REPO, runSvc, type ServeProcess, startServe } from './helpers/cli.js';
import { tempDir } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { needs } from './helpers/requirements.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const HAS_TMUX = spawnSync('tmux', ['-V'], { stdio: 'ignore' }).status === 0;
const MCP_URL = 'http://127.0.0.1:9/mcp';
const SGR_COLOUR = /\u001b\[[0-9;]*(3[0-7]|9[0-7]|38;)[0-9;]*m/;

let root: string;
let dataDir: string;
let env: Record<string, string>;
let daemon: ServeProcess | undefined;
let tmuxStarted = false;
// A private tmux server on a socket in the temp dir: no user session is touched, kill-server is ours.
const socket = () => path.join(root, 'tmux.sock');

const svc = (args: string[], input?: string) => runSvc(args, { env, input });
const api = () => new Api(daemon!.url);
const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

async function tmux(...args: string[]): Promise<string> {
  const r = await execa('tmux', ['-S', socket(), ...args], { env: { ...env, TERM: 'xterm-256color' }, extendEnv: false, reject: false, timeout: 10_000 });
  if (r.exitCode !== 0) throw new Error(`tmux ${args.join(' ')}: ${r.stderr}`);
  return String(r.stdout);
}

/** Runs `svc review` in a new 80x24 tmux session; after it exits the pane shows its exit code and the tty modes. */
async function openTerminal(name: string, extraEnv: Record<string, string> = {}) {
  const vars = Object.entries({ ...env, ...extraEnv })
    .filter(([k]) => k.startsWith('SVC_') || k === 'NO_COLOR' || k === 'PATH' || k === 'HOME')
    .map(([k, v]) => `${k}=${q(v)}`)
    .join(' ');
  const command = `cd ${q(REPO)} && env ${vars} node ${q(BIN)} review; echo EXIT=$?; stty -a | tr ' ;' '\\n\\n' | grep -x -e '-\\?icanon' -e '-\\?echo'; sleep 600`;
  await tmux('new-session', '-d', '-s', name, '-x', '80', '-y', '24', command);
  tmuxStarted = true;
  const screen = (colour = false) => tmux('capture-pane', '-p', ...(colour ? ['-e'] : []), '-t', name);
  const keys = (...k: string[]) => tmux('send-keys', '-t', name, ...k);
  const waitFor = async (pattern: string | RegExp, timeoutMs = 10_000): Promise<string> => {
    const deadline = Date.now() + timeoutMs;
    let last = '';
    while (Date.now() < deadline) {
      last = await screen();
      if (typeof pattern === 'string' ? last.includes(pattern) : pattern.test(last)) return last;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`no ${pattern} on the screen within ${timeoutMs} ms:\n${last}`);
  };
  return { screen, keys, waitFor };
}

beforeAll(async () => {
  if (!HAS_TMUX) return;
  root = await tempDir('svc-tui-');
  dataDir = path.join(root, 'data');
  env = cleanEnv({ SVC_KEYCHAIN: 'file', SVC_HOME: dataDir, NO_COLOR: undefined, FORCE_COLOR: undefined, TMUX: undefined });
  daemon = await startServe(dataDir, env);
});

afterAll(async () => {
  if (tmuxStarted) await execa('tmux', ['-S', socket(), 'kill-server'], { reject: false, timeout: 10_000 });
  await daemon?.stop();
  if (root) await rm(root, { recursive: true, force: true });
});

describe.skipIf(!needs(HAS_TMUX, 'tui-e2e', 'tmux'))('svc review in a real terminal', () => {
  it('a request appears live; open it, tick an instance, lower the role, approve: the daemon holds exactly that grant', async () => {
    // A registered client, so the review shows its name and description.
    const client = await svc(['clients', 'add', 'Notes App', '--redirect-uri', 'http://127.0.0.1:5173/callback', '--description', 'Takes notes and searches your files']);
    expect(client.exitCode, client.stderr).toBe(0);
    const clientId = client.stdout.trim();
    const ids: Record<string, string> = {};
    for (const name of ['files-home', 'files-work', 'files-old']) {
      const r = await svc(['mcp', 'add', '--name', name, '--url', MCP_URL]);
      expect(r.exitCode, r.stderr).toBe(0);
      ids[name] = r.stdout.trim();
    }
    expect((await svc(['mcp', 'disable', ids['files-old']])).exitCode).toBe(0);

    const term = await openTerminal('review');
    await term.waitFor('No pending requests.');
    expect(await term.screen()).toMatch(/^svc review: pending \(draft\) access requests\s+0 pending · admin\s*$/m);

    const created = await api().post('/svc/v1/apps/request-access', {
      app_client_id: clientId,
      flow_type: 'popup',
      requested_role: 'scope_user_power_user',
      requested: { version: '1', mcp_servers: [{ url: MCP_URL }] },
    });
    expect(created.status, created.text).toBe(201);
    const id = created.body.id as string;
    const t0 = Date.now();
    const list = await term.waitFor(/^› Notes App\s+scope_user_power_user\s+1\s+\d+:\d\d\s*$/m);
    // No key was pressed: the list polls every second (a new request shows within 2 s; slack for capture).
    expect(Date.now() - t0).toBeLessThan(3000);
    expect(list).toMatch(/\s(9:5\d|10:00)\s*$/m);
    // On a TTY without NO_COLOR there is colour.
    expect(await term.screen(true)).toMatch(SGR_COLOUR);

    await term.keys('Enter');
    const detail = await term.waitFor(/^Client ID\s+svc-/m);
    expect(detail).toMatch(/^App\s+Notes App\s*$/m);
    expect(detail).toMatch(new RegExp(`^Client ID\\s+${clientId}\\s*$`, 'm'));
    expect(detail).toMatch(/^About\s+Takes notes and searches your files\s*$/m);
    expect(detail).toMatch(/^Requested\s+scope_user_power_user \(Power User\)\s*$/m);
    expect(detail).toMatch(/^Grant role\s+scope_user_power_user \(Power User\)\s+r: change\s*$/m);
    expect(detail).toMatch(/^Time left\s+\d+:\d\d\s*$/m);
    expect(detail).toContain(MCP_URL);
    expect(detail).toMatch(/^ {2}› \[x\] files-home/m);
    expect(detail).toMatch(/^ {4}\[ \] files-work/m);
    expect(detail).toMatch(/^ {4}\[-\] files-old \(disabled\)/m);

    // Untick files-home (ticked to start with, as on the browser page), tick files-work.
    await term.keys('Space');
    await term.waitFor(/^ {2}› \[ \] files-home/m);
    await term.keys('j');
    await term.waitFor(/^ {2}› \[ \] files-work/m);
    await term.keys('Space');
    await term.waitFor(/^ {2}› \[x\] files-work/m);
    await term.keys('r');
    const ready = await term.waitFor(/^Grant role\s+scope_user_user \(User\)/m);
    expect(ready).toContain('1 instance selected');
    for (const line of ready.split('\n')) expect(line.length).toBeLessThanOrEqual(80);
    if (process.env.UPDATE_SCREENSHOTS) {
      await mkdir(path.join(REPO, 'docs', 'screenshots'), { recursive: true });
      await writeFile(path.join(REPO, 'docs', 'screenshots', 'tui.txt'), `${ready.replace(/[ \t]+$/gm, '').trimEnd()}\n`);
      // With its colours too (tmux capture-pane -e), for rendering docs/screenshots/tui.png.
      await writeFile(path.join(os.tmpdir(), 'svc-tui-screenshot.ansi'), await term.screen(true));
    }

    await term.keys('a');
    const after = await term.waitFor('Approved Notes App as scope_user_user with 1 MCP instance.');
    expect(after).toContain('No pending requests.');

    // The app sees the approval; the daemon holds exactly the selected instance and role.
    const poll = await api().get(`/svc/v1/apps/access-requests/${id}?app_client_id=${encodeURIComponent(clientId)}`);
    expect(poll.body).toEqual({
      id,
      status: 'approved',
      requested_role: 'scope_user_power_user',
      approved_role: 'scope_user_user',
      access_request_scope: `scope_access_request:${id}`,
    });
    const shown = await svc(['requests', 'show', id, '--json']);
    expect(JSON.parse(shown.stdout)).toMatchObject({
      status: 'approved',
      approved_role: 'scope_user_user',
      approved: { version: '1', mcp_servers: [{ url: MCP_URL, instance_ids: [ids['files-work']] }] },
    });

    // q quits cleanly: exit 0, and the terminal is back in cooked mode with echo.
    await term.keys('q');
    const end = await term.waitFor(/^-?echo\s*$/m);
    expect(end).toMatch(/^EXIT=0$/m);
    expect(end).toMatch(/^icanon$/m);
    expect(end).toMatch(/^echo$/m);
    expect(end).not.toMatch(/^-icanon$|^-echo$/m);
  });

  it('NO_COLOR: the same screen without a single colour', async () => {
    const term = await openTerminal('plain', { NO_COLOR: '1' });
    await term.waitFor('pending (draft) access requests');
    expect(await term.screen(true)).not.toMatch(SGR_COLOUR);
    await term.keys('q');
    await term.waitFor('EXIT=0');
  });

  it('without a terminal it points to `svc requests list` (exit 1); with no daemon it says to run `svc serve`', async () => {
    const piped = await svc(['review']);
    expect(piped.exitCode).toBe(1);
    expect(piped.stderr).toContain('svc requests list');
    expect(piped.stdout).toBe('');

    const term = await openTerminal('nodaemon', { SVC_HOME: path.join(root, 'no-daemon-here') });
    const screen = await term.waitFor(/EXIT=\d+/);
    expect(screen).toContain('`svc serve`');
    expect(screen).toMatch(/EXIT=1\b/);
  });

  it('not logged in: the usual hint, exit 4', async () => {
    expect((await svc(['logout'])).exitCode).toBe(0);
    try {
      const term = await openTerminal('loggedout');
      const screen = await term.waitFor(/EXIT=\d+/);
      expect(screen).toContain('svc login');
      expect(screen).toMatch(/EXIT=4\b/);
    } finally {
      // logged in again, for the tests that run after this one (in any order)
      const password = /shown only once\):\s*\n\s*\n\s+(\S+)/.exec(daemon!.stdout())![1];
      expect((await svc(['login', '--username', 'admin', '--password-stdin'], `${password}\n`)).exitCode).toBe(0);
    }
  });

  it('Tab shows the apps let in, with their activity; r then y revokes one, and its key stops at once', async () => {
    const created = await svc(['keys', 'create', 'Terminal key', '--json']);
    expect(created.exitCode, created.stderr).toBe(0);
    const key = JSON.parse(created.stdout) as { key: string; access_request_id: string };
    const bearer = { Authorization: `Bearer ${key.key}` };
    expect((await api().get('/v1/models', bearer)).status).toBe(200);
    const term = await openTerminal('apps');
    await term.waitFor('svc review: pending (draft) access requests');
    await term.keys('Tab');
    await term.waitFor('svc review: apps you let in');
    await term.waitFor('API key "Terminal key"');
    const screen = await term.waitFor(/models\s+200 ok/);
    for (const line of screen.split('\n')) expect(line.length).toBeLessThanOrEqual(80);
    // highlight the key's grant (the newest is first), then revoke it
    await term.keys('r');
    await term.waitFor('y revokes it now');
    await term.keys('y');
    await term.waitFor('its tokens stop on their next call');
    expect((await api().get('/v1/models', bearer)).status).toBe(401);
    const shown = JSON.parse((await svc(['requests', 'show', key.access_request_id, '--json'])).stdout);
    expect(shown.status).toBe('revoked');
    await term.keys('q');
    await term.waitFor(/EXIT=0\b/);
  });
});
