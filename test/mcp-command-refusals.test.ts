/**
 * A command MCP server runs as svc's own OS user, so adding, changing or removing one is an
 * admin's alone: every other role gets 403 and nothing is stored, through the API and the CLI,
 * and an admin who is demoted loses the right over the ones they added. Its env values are
 * secrets: no answer, no line of the log and no file of the data dir holds one. What it shows of
 * its command is made inert on a terminal.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { CONTROL_BYTES, cleanEnv, runSvcInProcess } from './helpers/cli.js';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, expectErrorShape, userApi } from './helpers/http.js';
import { storedOnDisk } from './helpers/store.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const MARKER = `cmd-env-marker-${Math.random().toString(36).slice(2)}`;

let d: TestDaemon;
let admin: Api;
let env: Record<string, string>;
const svc = (args: string[], input?: string) => runSvcInProcess(args, { env, input });

beforeAll(async () => {
  d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
  admin = await new Api(d.url).login('admin', d.adminPassword);
  env = cleanEnv({ SVC_HOME: d.dataDir, NO_COLOR: '1' });
});
afterAll(() => d?.stop());

/** Every byte of every file under the data dir, as text (the store, its journal, logs, anything else). */
async function dataDirText(dir: string): Promise<string> {
  const parts: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    parts.push(await readFile(path.join(entry.parentPath, entry.name), 'latin1').catch(() => ''));
  }
  return parts.join('\n');
}

const stored = async () => (await storedOnDisk(d.dataDir)).mcp_instances as { id: string; name: string; enabled: boolean; command?: { args: string[] } }[];

describe('only an admin adds, changes or removes a command server', () => {
  it('user, power_user and manager get 403 forbidden for the command form, and nothing is stored; their HTTP instances are as before', async () => {
    for (const role of ['user', 'power_user', 'manager'] as const) {
      const who = await userApi(d.url, admin, `cmd-${role}`, role);
      const res = await who.post('/svc/v1/mcps', { name: `sneaky-${role}`, command: { command: '/bin/sh', args: ['-c', 'id'], env: [{ name: 'T', value: MARKER }] }, try: false });
      expect(res.status, role).toBe(403);
      expect(expectErrorShape(res.body)).toBe(true);
      expect(res.body.error).toMatchObject({ code: 'forbidden', type: 'forbidden_error' });
      expect(res.body.error.message).toMatch(/Only an admin/);
      expect(res.text).not.toContain(MARKER);
      expect((await who.get('/svc/v1/mcps')).body.data).toEqual([]);
      expect((await stored()).some((m) => m.name === `sneaky-${role}`)).toBe(false);
      const http = await who.post('/svc/v1/mcps', { name: `web-${role}`, url: 'http://127.0.0.1:9/mcp' });
      expect(http.status, http.text).toBe(201);
      expect((await who.patch(`/svc/v1/mcps/${http.body.instance.id}`, { enabled: false })).status).toBe(200);
      expect((await who.delete(`/svc/v1/mcps/${http.body.instance.id}`)).status).toBe(204);
    }
    expect(await dataDirText(d.dataDir)).not.toContain('sneaky-');
  });

  it('an admin demoted to user can no longer change or remove the command server they added', async () => {
    const ops = await userApi(d.url, admin, 'ops', 'admin');
    const made = await ops.post('/svc/v1/mcps', { name: 'ops-files', command: { command: 'srv', args: ['one'] }, try: false });
    expect(made.status, made.text).toBe(201);
    const id = made.body.instance.id as string;
    expect((await admin.put('/svc/v1/users/ops/role', { role: 'user' })).status).toBe(200);
    const attempts: [string, () => Promise<{ status: number; body: any }>][] = [
      ['disable', () => ops.patch(`/svc/v1/mcps/${id}`, { enabled: false })],
      ['rename', () => ops.patch(`/svc/v1/mcps/${id}`, { name: 'renamed' })],
      ['allow-tools', () => ops.patch(`/svc/v1/mcps/${id}`, { allow_tools: ['x'] })],
      ['command', () => ops.patch(`/svc/v1/mcps/${id}`, { command: { args: ['two'] }, try: false })],
      ['url', () => ops.patch(`/svc/v1/mcps/${id}`, { url: 'stdio://elsewhere' })],
      ['remove', () => ops.delete(`/svc/v1/mcps/${id}`)],
    ];
    for (const [what, attempt] of attempts) {
      const res = await attempt();
      expect(res.status, what).toBe(403);
      expect(res.body.error.code, what).toBe('forbidden');
    }
    const after = (await stored()).find((m) => m.id === id)!;
    expect(after).toMatchObject({ name: 'ops-files', enabled: true, command: { args: ['one'] } });
    expect((await ops.get(`/svc/v1/mcps/${id}`)).body.instance).toMatchObject({ name: 'ops-files', url: 'stdio://ops-files', enabled: true, allow_tools: null });
    // another user's command instance is not theirs to see at all
    const stranger = await userApi(d.url, admin, 'stranger', 'user');
    expect((await stranger.patch(`/svc/v1/mcps/${id}`, { enabled: false })).status).toBe(404);
  });

  it('svc mcp add -- COMMAND as a non-admin exits non-zero with the reason, storing nothing', async () => {
    await userApi(d.url, admin, 'cli-user', 'user');
    try {
      const login = await svc(['login', '--username', 'cli-user', '--password-stdin'], 'pw-cli-user-12345\n');
      expect(login.exitCode, login.stderr).toBe(0);
      const add = await svc(['mcp', 'add', '--name', 'cli-sneaky', '--env', `T=${MARKER}`, '--no-try', '--', '/bin/sh', '-c', 'id']);
      expect(add.exitCode).not.toBe(0);
      expect(add.stderr).toMatch(/Only an admin/);
      expect(add.stderr + add.stdout).not.toContain(MARKER);
      expect((await stored()).some((m) => m.name === 'cli-sneaky')).toBe(false);
    } finally {
      const back = await svc(['login', '--username', 'admin', '--password-stdin'], `${d.adminPassword}\n`);
      expect(back.exitCode, back.stderr).toBe(0);
    }
  });
});

describe('env values never leave svc', () => {
  it('no answer, log line or data dir file holds an env value, through the API and the CLI, on success and refusal', async () => {
    const answers: string[] = [];
    const made = await admin.post('/svc/v1/mcps', { name: 'secretive', command: { command: 'srv', env: [{ name: 'API_TOKEN', value: MARKER }] }, try: false });
    expect(made.status, made.text).toBe(201);
    const id = made.body.instance.id as string;
    answers.push(made.text);
    answers.push((await admin.get('/svc/v1/mcps')).text, (await admin.get(`/svc/v1/mcps/${id}`)).text);
    answers.push((await admin.patch(`/svc/v1/mcps/${id}`, { command: { env: [{ name: 'API_TOKEN', value: `${MARKER}-2` }, { name: 'OTHER', value: `${MARKER}-3` }] }, try: false })).text);
    answers.push((await admin.patch(`/svc/v1/mcps/${id}`, { enabled: false })).text);
    // refusals that carry the value in the body say what is wrong without it
    answers.push((await admin.post('/svc/v1/mcps', { name: 'bad', command: { command: 'srv', env: [{ name: '9BAD', value: MARKER }] }, try: false })).text);
    answers.push((await admin.post('/svc/v1/mcps', { name: 'bad', command: { command: 'srv', env: [{ name: 'A', value: MARKER.repeat(2000) }] }, try: false })).text);
    answers.push((await admin.post('/svc/v1/mcps', { name: 'bad', command: { command: 'srv', env: [{ name: 'A', value: MARKER }] }, headers: [], try: false })).text);
    answers.push((await admin.patch(`/svc/v1/mcps/${id}`, { command: { env: [{ name: 'A', value: MARKER }, { name: 'A', value: MARKER }] }, try: false })).text);
    const cliAdd = await svc(['mcp', 'add', '--name', 'secretive-cli', '--env', `CLI_TOKEN=${MARKER}-cli`, '--no-try', '--', 'srv']);
    expect(cliAdd.exitCode, cliAdd.stderr).toBe(0);
    for (const args of [['mcp', 'list'], ['mcp', 'list', '--json'], ['mcp', 'show', id], ['mcp', 'show', id, '--json'], ['mcp', 'show', cliAdd.stdout.trim()]]) {
      const r = await svc(args);
      expect(r.exitCode, r.stderr).toBe(0);
      answers.push(r.stdout, r.stderr);
    }
    answers.push(cliAdd.stdout, cliAdd.stderr, (await admin.get('/svc/v1/openapi.json')).text);
    for (const a of answers) expect(a).not.toContain(MARKER);
    expect(answers.join('\n')).toContain('API_TOKEN');
    expect(d.logs.join('')).not.toContain(MARKER);
    expect(await dataDirText(d.dataDir)).not.toContain(MARKER);
  });
});

describe('what a command instance shows is inert on a terminal', () => {
  it('arguments with terminal escapes are shown with them made harmless, in list and show', async () => {
    const made = await admin.post('/svc/v1/mcps', { name: 'escapes', command: { command: 'srv', args: ['\u001b]0;pwned\u0007', 'a\u001b[2Jb', 'tab\there'] }, try: false });
    expect(made.status, made.text).toBe(201);
    const id = made.body.instance.id as string;
    for (const tty of [undefined, { columns: 200 }]) {
      for (const args of [['mcp', 'show', id], ['mcp', 'list']]) {
        const r = await runSvcInProcess(args, { env, tty });
        expect(r.exitCode, r.stderr).toBe(0);
        expect(r.stdout, args.join(' ')).not.toMatch(CONTROL_BYTES);
      }
    }
  });
});
