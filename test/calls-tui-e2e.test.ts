/**
 * A held tool call decided in `svc review`, end to end: the real binary in a tmux pane (80x24)
 * against a `svc serve` child, an MCP SDK server that counts its runs, and an app calling a
 * destructive tool over REST with an API key. Skipped only where tmux is missing.
 */
import { spawnSync } from 'node:child_process';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { BIN, cleanEnv, REPO, runSvc, type ServeProcess, startServe } from './helpers/cli.js';
import { tempDir } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { needs } from './helpers/requirements.js';
import { startRiskyServer } from './helpers/risky-mcp.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const HAS_TMUX = spawnSync('tmux', ['-V'], { stdio: 'ignore' }).status === 0;

let root: string;
let env: Record<string, string>;
let daemon: ServeProcess | undefined;
let risky: Awaited<ReturnType<typeof startRiskyServer>> | undefined;
let tmuxStarted = false;
const socket = () => path.join(root, 'tmux.sock');
const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
const svc = (args: string[]) => runSvc(args, { env });

async function tmux(...args: string[]): Promise<string> {
  const r = await execa('tmux', ['-S', socket(), ...args], { env: { ...env, TERM: 'xterm-256color' }, extendEnv: false, reject: false, timeout: 10_000 });
  if (r.exitCode !== 0) throw new Error(`tmux ${args.join(' ')}: ${r.stderr}`);
  return String(r.stdout);
}

beforeAll(async () => {
  if (!HAS_TMUX) return;
  root = await tempDir('svc-calls-tui-');
  const dataDir = path.join(root, 'data');
  env = cleanEnv({ SVC_KEYCHAIN: 'file', SVC_HOME: dataDir, NO_COLOR: '1', TMUX: undefined, SVC_NOTIFY: '0' });
  [daemon, risky] = await Promise.all([startServe(dataDir, env), startRiskyServer()]);
});

afterAll(async () => {
  if (tmuxStarted) await execa('tmux', ['-S', socket(), 'kill-server'], { reject: false, timeout: 10_000 });
  await daemon?.stop();
  await risky?.close();
  if (root) await rm(root, { recursive: true, force: true });
});

/** `svc review` in a new 80x24 tmux session named `name`. */
async function openTerminal(name: string) {
  const vars = Object.entries(env)
    .filter(([k]) => k.startsWith('SVC_') || k === 'NO_COLOR' || k === 'PATH' || k === 'HOME')
    .map(([k, v]) => `${k}=${q(v)}`)
    .join(' ');
  await tmux('new-session', '-d', '-s', name, '-x', '80', '-y', '24', `cd ${q(REPO)} && env ${vars} node ${q(BIN)} review; echo EXIT=$?; sleep 600`);
  tmuxStarted = true;
  const screen = () => tmux('capture-pane', '-p', '-t', name);
  const keys = (...k: string[]) => tmux('send-keys', '-t', name, ...k);
  const waitFor = async (pattern: RegExp, timeoutMs = 10_000) => {
    const deadline = Date.now() + timeoutMs;
    let last = '';
    while (Date.now() < deadline) {
      last = await screen();
      if (pattern.test(last)) return last;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`no ${pattern} on the screen within ${timeoutMs} ms:\n${last}`);
  };
  return { screen, keys, waitFor };
}

let instance: string | undefined;
/** The one instance of the risky server, added once whichever test runs first. */
async function notesInstance(): Promise<string> {
  if (instance) return instance;
  const added = await svc(['mcp', 'add', '--name', 'notes', '--url', risky!.url]);
  expect(added.exitCode, added.stderr).toBe(0);
  instance = added.stdout.trim();
  return instance;
}

describe.skipIf(!needs(HAS_TMUX, 'calls-tui-e2e', 'tmux'))('a held call in svc review', () => {
  // A test that fails half-way leaves its held call waiting, and the next test would find it
  // selected in place of its own: each test starts with none waiting.
  afterEach(async () => {
    const pending = await svc(['calls', 'list', '--status', 'pending', '--json']);
    for (const call of JSON.parse(pending.stdout || '[]') as { id: string }[]) await svc(['calls', 'deny', call.id]);
  });

  // "By itself": no key is pressed between the call and the screen showing it; the review polls
  // every second (held to that in AppContainer's tests). How long it takes here depends on the
  // machine's load, so the wait is the one bound, as everywhere in this file.
  it('appears by itself above the requests, with its arguments; `a` lets exactly it run, once', async () => {
    const instance = await notesInstance();
    const key = await svc(['keys', 'create', 'tui app', '--mcp', `${risky!.url}=${instance}`]);
    expect(key.exitCode, key.stderr).toBe(0);
    const { waitFor, keys } = await openTerminal('calls');
    await waitFor(/pending · admin/);

    const before = risky!.runs('delete_note');
    const answer = new Api(daemon!.url).post(`/svc/v1/apps/mcps/${instance}/tools/delete_note/execute`, { params: { id: 'tui-1', note: 'gone\u202efor good' } }, { Authorization: `Bearer ${key.stdout.trim()}` });
    const shown = await waitFor(/HELD TOOL CALLS: 1 waiting for you/);
    expect(shown).toMatch(/^› API key "tui app" wants delete_note on notes\s+0:5\d\s*$/m);
    expect(shown).toContain('{"id":"tui-1","note":"gone\\u202efor good"}');
    expect(shown).toMatch(/0 pending · admin|1 held/);
    for (const line of shown.split('\n')) expect(line.length).toBeLessThanOrEqual(80);
    expect(risky!.runs('delete_note')).toBe(before);

    await keys('a');
    await waitFor(/Approved delete_note for API key "tui app": it runs now, once\./);
    const done = await answer;
    expect(done.status).toBe(200);
    expect(done.body.result.content).toEqual([{ type: 'text', text: 'deleted tui-1' }]);
    expect(risky!.runs('delete_note')).toBe(before + 1);
    expect(risky!.ran.at(-1)).toEqual({ tool: 'delete_note', args: { id: 'tui-1', note: 'gone\u202efor good' } });

    await keys('q');
    expect(await waitFor(/^EXIT=\d+$/m)).toMatch(/^EXIT=0$/m);
  });

  it('a call held while a request is selected takes the selection: the footer names the call, and `a` approves the call, not the request', async () => {
    const instance = await notesInstance();
    const key = await svc(['keys', 'create', 'bell app', '--mcp', `${risky!.url}=${instance}`]);
    expect(key.exitCode, key.stderr).toBe(0);
    const { waitFor, keys } = await openTerminal('bell');
    await waitFor(/pending · admin/);
    const created = await new Api(daemon!.url).post('/svc/v1/apps/request-access', {
      app_client_id: 'tui-bell-app',
      flow_type: 'popup',
      requested_role: 'scope_user_user',
      requested: { version: '1', mcp_servers: [{ url: risky!.url }] },
    });
    expect(created.status).toBe(201);
    await waitFor(/› tui-bell-app/);

    const before = risky!.runs('delete_note');
    const answer = new Api(daemon!.url).post(`/svc/v1/apps/mcps/${instance}/tools/delete_note/execute`, { params: { id: 'bell-1' } }, { Authorization: `Bearer ${key.stdout.trim()}` });
    const shown = await waitFor(/› API key "bell app" wants delete_note/);
    expect(shown).not.toMatch(/› tui-bell-app/);
    expect(shown).toMatch(/^a approve {2}d deny: delete_note of API key "bell app"/m);
    await keys('a');
    await waitFor(/Approved delete_note for API key "bell app": it runs now, once\./);
    expect((await answer).body.result.content).toEqual([{ type: 'text', text: 'deleted bell-1' }]);
    expect(risky!.runs('delete_note')).toBe(before + 1);
    // the request was not decided
    expect(JSON.parse((await svc(['requests', 'show', created.body.id, '--json'])).stdout).status).toBe('draft');
    // the next test finds only its own request
    expect((await svc(['requests', 'deny', created.body.id])).exitCode).toBe(0);
    await keys('q');
    expect(await waitFor(/^EXIT=\d+$/m)).toMatch(/^EXIT=0$/m);
  });

  it('tool choices from the terminal: changed at approval in the detail, and later under g', async () => {
    const instance = await notesInstance();
    const { waitFor, keys } = await openTerminal('choices');
    await waitFor(/pending · admin/);
    const created = await new Api(daemon!.url).post('/svc/v1/apps/request-access', {
      app_client_id: 'tui-choices-app',
      flow_type: 'popup',
      requested_role: 'scope_user_user',
      requested: { version: '1', mcp_servers: [{ url: risky!.url }] },
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    await waitFor(/› tui-choices-app/);
    await keys('Enter');
    // the tools, fetched for the review, with their defaults and hints
    const detail = await waitFor(/delete_note/);
    expect(detail).toMatch(/^ {8}allow read_notes {2}read-only\s*$/m);
    expect(detail).toMatch(/^ {8}ask {3}delete_note {2}destructive\s*$/m);
    expect(detail).toMatch(/^ {8}allow touch\s*$/m);
    // down past read_notes and delete_note to touch; allow -> ask -> deny
    await keys('j', 'j', 'j');
    await waitFor(/› allow touch/);
    await keys('Space', 'Space');
    await waitFor(/› deny {2}touch \(default allow\)/);
    await keys('a');
    await waitFor(/Approved tui-choices-app/);
    const review = (await svc(['requests', 'show', id, '--json'])).stdout;
    expect(JSON.parse(review).tool_policies).toEqual({ [instance]: { tools: { touch: 'deny' } } });

    // later: g, the newest grant first, its tools; read_notes allow -> ask, saved
    await keys('g');
    await waitFor(/› tui-choices-app/);
    await keys('Enter');
    await waitFor(/Tool choices of tui-choices-app/);
    await keys('Space');
    await waitFor(/› ask {3}read_notes \(was allow: s saves\)/);
    await keys('s');
    await waitFor(/Saved: the next call of each tool follows these choices\./);
    const later = JSON.parse((await svc(['requests', 'show', id, '--json'])).stdout);
    expect(later.tool_policies).toEqual({ [instance]: { tools: { touch: 'deny', read_notes: 'ask' } } });
    await keys('q');
    expect(await waitFor(/^EXIT=\d+$/m)).toMatch(/^EXIT=0$/m);
  });
});
