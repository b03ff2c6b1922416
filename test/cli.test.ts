/**
 * The `svc` CLI end to end: the real binary against a real `svc serve` child process on
 * 127.0.0.1, with the file-kept master key (SVC_KEYCHAIN=file) and a temp data dir (SVC_HOME).
 * Tests in this file run in order and share the daemon and the CLI's login.
 */
import { readFile, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { BIN, CONTROL_BYTES, cleanEnv, closedPort, runSvc, runSvcInProcess, type ServeProcess, startServe } from './helpers/cli.js';
import { tempDir } from './helpers/daemon.js';
import { Api, createBody } from './helpers/http.js';
import { needs } from './helpers/requirements.js';

// Each test runs a handful of CLI processes; bound them generously (never asserted as timings).
vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const MCP_URL = 'http://127.0.0.1:9/mcp';
const HOSTILE_CLIENT_ID = '\u001b]0;pwned\u0007evil\u001b[31m';

let root: string;
let dataDir: string;
let env: Record<string, string>;
let daemon: ServeProcess | undefined;
let adminPassword: string;

// Commands run in-process (the same functions, IO injected); the tests of the binary itself spawn it (runSvc).
const svc = (args: string[], input?: string) => runSvcInProcess(args, { env, input });
const api = () => new Api(daemon!.url);
const lines = (s: string) => s.split('\n').filter((l) => l.length > 0);

async function createRequest(overrides: Record<string, unknown> = {}): Promise<string> {
  const res = await api().post(
    '/svc/v1/apps/request-access',
    createBody({ requested: { version: '1', mcp_servers: [{ url: MCP_URL }] }, ...overrides }),
  );
  expect(res.status, res.text).toBe(201);
  return res.body.id as string;
}

async function inBatches<T, R>(items: T[], size: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += size) out.push(...(await Promise.all(items.slice(i, i + size).map(fn))));
  return out;
}

const poll = (id: string, clientId: string) => api().get(`/svc/v1/apps/access-requests/${id}?app_client_id=${encodeURIComponent(clientId)}`);

let firstStartOutput = '';

beforeAll(async () => {
  root = await tempDir('svc-cli-');
  dataDir = path.join(root, 'data');
  env = cleanEnv({ SVC_KEYCHAIN: 'file', SVC_HOME: dataDir, NO_COLOR: '1' });
  daemon = await startServe(dataDir, env);
  firstStartOutput = daemon.stdout();
  const m = daemon.stdout().match(/shown only once\):\s*\n\s*\n\s+(\S+)\s*\n/);
  if (!m) throw new Error(`no admin password in:\n${daemon.stdout()}`);
  adminPassword = m[1];
});

afterAll(async () => {
  await daemon?.stop();
  if (root) await rm(root, { recursive: true, force: true });
});

describe('first start', () => {
  it('prints the admin password once, the file-key notice and where it listens; leaves the CLI logged in as admin', async () => {
    const out = firstStartOutput; // a later test restarts the daemon
    expect(out).toContain('Created the user "admin"');
    expect(out).toContain('master.key');
    expect(out).toMatch(/svc listening on http:\/\/127\.0\.0\.1:\d+ \(data: /);
    expect(adminPassword.length).toBeGreaterThanOrEqual(12);
    // The CLI's session file is private and sealed: the raw cookie is not in it.
    const file = path.join(dataDir, 'cli-session.json');
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(await readFile(file, 'utf8')).not.toContain('svc_session=');
    const me = await svc(['status', '--json']);
    expect(me.exitCode).toBe(0);
    expect(JSON.parse(me.stdout).logged_in_as).toBe('admin');
  });
});

describe('help', () => {
  it('svc --help and svc requests --help give Usage first, then examples (as commander and gh do)', async () => {
    const cases = [['--help'], ['requests', '--help'], ['users', '--help'], ['mcp', '--help']];
    const results = await inBatches(cases, 4, (args) => svc(args));
    cases.forEach((args, i) => {
      expect(results[i].exitCode, args.join(' ')).toBe(0);
      expect(results[i].stdout.startsWith('Usage: svc'), results[i].stdout).toBe(true);
      expect(results[i].stdout).toMatch(/\n\nExamples:\n {2}\$ /);
    });
    expect(results[0].stdout).toMatch(/\$ svc requests list/);
    expect(results[1].stdout).toMatch(/\$ svc requests approve \S+ --role scope_user_user --mcp /);
  });
});

describe('svc status', () => {
  it('running: where, which version, who is logged in (table and --json)', async () => {
    const r = await svc(['status']);
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain('running\tyes\n');
    expect(r.stdout).toContain(`url\t${daemon!.url}\n`);
    expect(r.stdout).toContain('logged in as\tadmin\n');

    const j = await svc(['status', '--json']);
    expect(j.exitCode).toBe(0);
    const s = JSON.parse(j.stdout);
    expect(s).toMatchObject({ running: true, url: daemon!.url, data_dir: dataDir, logged_in_as: 'admin', pid: daemon!.pid });
    expect(typeof s.daemon_version).toBe('string');

    // The same settings the daemon was started with find it, port 0 included (daemon.json knows the port).
    const [viaEnv, viaFlag] = await Promise.all([
      runSvc(['status', '--json'], { env: { ...env, SVC_PORT: '0' } }),
      svc(['--port', '0', 'status', '--json']),
    ]);
    for (const r of [viaEnv, viaFlag]) {
      expect(r.exitCode, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ running: true, url: daemon!.url });
    }
  });

  it('not running: exit 1 and the hint to run `svc serve`, in both forms', async () => {
    const emptyHome = path.join(root, 'nothing-here');
    const e = { ...env, SVC_HOME: emptyHome, SVC_PORT: String(await closedPort()) };
    const r = await runSvc(['status'], { env: e });
    expect(r.exitCode).toBe(1);
    expect(r.stdout).toContain('running\tno');
    expect(r.stdout + r.stderr).toContain('svc serve');

    const j = await runSvc(['status', '--json'], { env: e });
    expect(j.exitCode).toBe(1);
    expect(JSON.parse(j.stdout)).toMatchObject({ running: false, daemon_version: null, logged_in_as: null });
    expect(j.stderr).toContain('svc serve');

    // Any command that needs the daemon says the same.
    const l = await runSvc(['requests', 'list'], { env: e });
    expect(l.exitCode).toBe(1);
    expect(l.stderr).toContain('`svc serve`');
  });
});

describe('svc users', () => {
  it('add, list --json, set-role, passwd, remove', async () => {
    const add = await svc(['users', 'add', 'alice', '--role', 'user', '--password-stdin'], 'alice-password-1\n');
    expect(add.exitCode, add.stderr).toBe(0);
    expect(add.stderr).toContain('Created alice (user)');

    const list = await svc(['users', 'list', '--json']);
    expect(list.exitCode).toBe(0);
    const users = JSON.parse(list.stdout) as { username: string; role: string; id: string }[];
    expect(users.map((u) => [u.username, u.role])).toEqual(expect.arrayContaining([['admin', 'admin'], ['alice', 'user']]));
    expect(list.stdout).not.toContain('password');
    expect(list.stdout).not.toContain('scrypt');

    // Piped: tab-separated rows, no header.
    const piped = await svc(['users', 'list']);
    const rows = lines(piped.stdout).map((l) => l.split('\t'));
    expect(rows.every((r) => r.length === 4)).toBe(true);
    expect(rows.some((r) => r[0] === 'USERNAME' || r[0] === 'username')).toBe(false);
    expect(rows.find((r) => r[0] === 'alice')?.[1]).toBe('user');

    const setRole = await svc(['users', 'set-role', 'alice', 'power_user']);
    expect(setRole.exitCode, setRole.stderr).toBe(0);
    expect(JSON.parse((await svc(['users', 'list', '--json'])).stdout).find((u: { username: string }) => u.username === 'alice').role).toBe('power_user');

    // The old password stops working, the new one works (the trailing newline is not part of it).
    expect((await api().post('/svc/v1/auth/login', { username: 'alice', password: 'alice-password-1' })).status).toBe(200);
    const pw = await svc(['users', 'passwd', 'alice', '--password-stdin'], 'alice-password-2\n');
    expect(pw.exitCode, pw.stderr).toBe(0);
    expect((await api().post('/svc/v1/auth/login', { username: 'alice', password: 'alice-password-1' })).status).toBe(401);
    expect((await api().post('/svc/v1/auth/login', { username: 'alice', password: 'alice-password-2' })).status).toBe(200);

    const short = await svc(['users', 'passwd', 'alice', '--password-stdin'], 'short\n');
    expect(short.exitCode).toBe(1);

    const rm1 = await svc(['users', 'remove', 'alice']);
    expect(rm1.exitCode, rm1.stderr).toBe(0);
    expect(JSON.parse((await svc(['users', 'list', '--json'])).stdout).map((u: { username: string }) => u.username)).not.toContain('alice');
    const rm2 = await svc(['users', 'remove', 'alice']);
    expect(rm2.exitCode).toBe(1);
    expect(rm2.stderr).toContain('alice');
  });

  it('a manager cannot create or promote an admin (exit 4), but can create a user', async () => {
    expect((await svc(['users', 'add', 'mgr', '--role', 'manager', '--password-stdin'], 'manager-password')).exitCode).toBe(0);
    const login = await svc(['login', '--username', 'mgr', '--password-stdin'], 'manager-password\n');
    expect(login.exitCode, login.stderr).toBe(0);
    expect(login.stderr).toContain('Logged in as mgr (manager)');
    try {
      const admin = await svc(['users', 'add', 'boss', '--role', 'admin', '--password-stdin'], 'boss-password-1');
      expect(admin.exitCode).toBe(4);
      expect(admin.stderr).toMatch(/admin/i);

      const bob = await svc(['users', 'add', 'bob', '--role', 'user', '--password-stdin'], 'bob-password-1');
      expect(bob.exitCode, bob.stderr).toBe(0);
      const promote = await svc(['users', 'set-role', 'bob', 'admin']);
      expect(promote.exitCode).toBe(4);
      const demoteAdmin = await svc(['users', 'set-role', 'admin', 'user']);
      expect(demoteAdmin.exitCode).toBe(4);
    } finally {
      const back = await svc(['login', '--password-stdin'], `${adminPassword}\n`);
      expect(back.exitCode, back.stderr).toBe(0);
    }
    const users = JSON.parse((await svc(['users', 'list', '--json'])).stdout) as { username: string; role: string }[];
    expect(users.find((u) => u.username === 'boss')).toBeUndefined();
    expect(users.find((u) => u.username === 'bob')?.role).toBe('user');
    expect(users.find((u) => u.username === 'admin')?.role).toBe('admin');
  });
});

describe('svc login / logout', () => {
  it('after logout a command exits 4 with a hint to run `svc login`; login brings it back', async () => {
    const out = await svc(['logout']);
    expect(out.exitCode).toBe(0);
    const list = await svc(['requests', 'list']);
    expect(list.exitCode).toBe(4);
    expect(list.stderr).toContain('svc login');
    expect(list.stdout).toBe('');
    const status = await svc(['status']);
    expect(status.exitCode).toBe(0);
    expect(status.stdout).toContain('svc login');

    const wrong = await svc(['login', '--username', 'admin', '--password-stdin'], 'not-the-password\n');
    expect(wrong.exitCode).toBe(4);
    expect(wrong.stderr).not.toContain('not-the-password');

    const right = await svc(['login', '--username', 'admin', '--password-stdin'], `${adminPassword}\n`);
    expect(right.exitCode, right.stderr).toBe(0);
    expect(right.stdout).toBe('');
    expect(right.stderr).not.toContain(adminPassword);
    expect((await svc(['requests', 'list'])).exitCode).toBe(0);
  });
});

describe('svc mcp', () => {
  it('add with a header and an allow-list, list --json without header values, disable, enable, remove', async () => {
    const add = await svc(['mcp', 'add', '--name', 'files', '--url', 'http://127.0.0.1:9/other', '--header', 'Authorization: Bearer x', '--allow-tools', 'a,b']);
    expect(add.exitCode, add.stderr).toBe(0);
    const id = add.stdout.trim();
    expect(id).toMatch(UUID);

    const list = await svc(['mcp', 'list', '--json']);
    expect(list.exitCode).toBe(0);
    const mine = (JSON.parse(list.stdout) as any[]).find((m) => m.id === id);
    expect(mine).toMatchObject({ name: 'files', url: 'http://127.0.0.1:9/other', enabled: true, allow_tools: ['a', 'b'], header_names: ['Authorization'] });
    expect(list.stdout).not.toContain('Bearer x');
    // Nor at rest: the header value is sealed in the store.
    expect(await readFile(path.join(dataDir, 'db.json'), 'utf8')).not.toContain('Bearer x');

    const piped = await svc(['mcp', 'list']);
    expect(piped.stdout).not.toContain('Bearer x');
    expect(lines(piped.stdout).find((l) => l.startsWith(id))?.split('\t')).toEqual([id, 'files', 'http://127.0.0.1:9/other', `${daemon!.url}/svc/v1/apps/mcps/${id}/mcp`, 'yes', 'a,b', 'Authorization', 'http', '', '']);

    const enabledOf = async () => {
      const r = await svc(['mcp', 'list', '--json']);
      expect(r.exitCode, r.stderr).toBe(0);
      return (JSON.parse(r.stdout) as any[]).find((m) => m.id === id)?.enabled;
    };
    expect((await svc(['mcp', 'disable', id])).exitCode).toBe(0);
    expect(await enabledOf()).toBe(false);
    expect((await svc(['mcp', 'enable', id])).exitCode).toBe(0);
    expect(await enabledOf()).toBe(true);

    expect((await svc(['mcp', 'remove', id])).exitCode).toBe(0);
    expect(await enabledOf()).toBeUndefined();
    const again = await svc(['mcp', 'remove', id]);
    expect(again.exitCode).toBe(1);
  });
});

describe('svc requests', () => {
  let instanceId: string;
  let approveId: string;
  let denyId: string;

  beforeAll(async () => {
    const add = await svc(['mcp', 'add', '--name', 'granted', '--url', MCP_URL, '--header', 'Authorization: Bearer x']);
    expect(add.exitCode, add.stderr).toBe(0);
    instanceId = add.stdout.trim();
    approveId = await createRequest({ app_client_id: 'app-approve' });
    denyId = await createRequest({ app_client_id: 'app-deny', requested_role: 'scope_user_user' });
  });

  it('list: tab-separated rows without a header when piped; --json parses; --status filters', async () => {
    // requests of its own, still drafts whatever the other tests have decided
    const approveId = await createRequest({ app_client_id: 'app-approve' });
    const denyId = await createRequest({ app_client_id: 'app-deny', requested_role: 'scope_user_user' });
    const r = await svc(['requests', 'list']);
    expect(r.exitCode, r.stderr).toBe(0);
    const rows = lines(r.stdout).map((l) => l.split('\t'));
    expect(rows.length).toBeGreaterThanOrEqual(2);
    for (const row of rows) {
      expect(row).toHaveLength(7);
      expect(row[0]).toMatch(UUID);
    }
    expect(rows.find((row) => row[0] === approveId)?.slice(1, 6)).toEqual(['draft', 'app-approve', 'scope_user_power_user', '', '1']);

    const j = await svc(['requests', 'list', '--json']);
    const data = JSON.parse(j.stdout) as any[];
    expect(data.map((d) => d.id)).toEqual(expect.arrayContaining([approveId, denyId]));
    expect(data.find((d) => d.id === denyId)).toMatchObject({ app_client_id: 'app-deny', status: 'draft', requested_role: 'scope_user_user' });

    const none = await svc(['requests', 'list', '--status', 'expired', '--json']);
    expect(none.exitCode).toBe(0);
    expect(JSON.parse(none.stdout)).toEqual([]);
    const nonePiped = await svc(['requests', 'list', '--status', 'expired']);
    expect(nonePiped.exitCode).toBe(0);
    expect(nonePiped.stdout).toBe('');
    const drafts = JSON.parse((await svc(['requests', 'list', '--status', 'draft', '--json'])).stdout) as { id: string; status: string }[];
    expect(drafts.map((x) => x.id)).toEqual(expect.arrayContaining([approveId, denyId]));
    expect(drafts.every((x) => x.status === 'draft')).toBe(true);
  });

  it('show: the request and my instances of each requested URL', async () => {
    const approveId = await createRequest({ app_client_id: 'app-approve' });
    const r = await svc(['requests', 'show', approveId]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain(`id\t${approveId}\n`);
    expect(r.stdout).toContain('app\tapp-approve\n');
    expect(r.stdout).toContain('status\tdraft\n');
    expect(r.stdout).toContain(`mcp server\t${MCP_URL}\n`);
    expect(r.stdout).toContain(instanceId);

    const j = JSON.parse((await svc(['requests', 'show', approveId, '--json'])).stdout);
    expect(j).toMatchObject({ id: approveId, app_client_id: 'app-approve', status: 'draft', max_grantable_role: 'scope_user_power_user' });
    // nothing answers at MCP_URL, so the review could not fetch the instance's tools
    expect(j.mcp_servers).toEqual([{ url: MCP_URL, instances: [{ id: instanceId, name: 'granted', url: MCP_URL, enabled: true, selected: true, tools_known: false, tools: [] }] }]);

    const missing = await svc(['requests', 'show', '00000000-0000-4000-8000-000000000000']);
    expect(missing.exitCode).toBe(1);
  });

  it('approve --role scope_user_user --mcp URL=ID: the poll shows exactly that', async () => {
    const r = await svc(['requests', 'approve', approveId, '--role', 'scope_user_user', '--mcp', `${MCP_URL}=${instanceId}`, '--json']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      id: approveId,
      status: 'approved',
      approved_role: 'scope_user_user',
      access_request_scope: `scope_access_request:${approveId}`,
    });

    const p = await poll(approveId, 'app-approve');
    expect(p.status).toBe(200);
    expect(p.body).toEqual({
      id: approveId,
      status: 'approved',
      requested_role: 'scope_user_power_user',
      approved_role: 'scope_user_user',
      access_request_scope: `scope_access_request:${approveId}`,
    });
    expect((await poll(approveId, 'someone-else')).status).toBe(404);

    const shown = JSON.parse((await svc(['requests', 'show', approveId, '--json'])).stdout);
    expect(shown.status).toBe('approved');
    expect(shown.approved_role).toBe('scope_user_user');
    expect(shown.approved.mcp_servers).toEqual([{ url: MCP_URL, instance_ids: [instanceId] }]);

    const listed = lines((await svc(['requests', 'list', '--status', 'approved'])).stdout).map((l) => l.split('\t'));
    expect(listed.map((row) => [row[0], row[1], row[4]])).toEqual([[approveId, 'approved', 'scope_user_user']]);

    // Decided already: 409, exit 1, and the request is unchanged.
    const twice = await svc(['requests', 'approve', approveId, '--role', 'scope_user_power_user']);
    expect(twice.exitCode).toBe(1);
    expect(twice.stderr).toMatch(/already/i);
    expect((await poll(approveId, 'app-approve')).body.approved_role).toBe('scope_user_user');
  });

  it('approve above the requested role is refused (exit 4)', async () => {
    const id = await createRequest({ app_client_id: 'app-low', requested_role: 'scope_user_user' });
    const r = await svc(['requests', 'approve', id, '--role', 'scope_user_power_user']);
    expect(r.exitCode).toBe(4);
    expect((await poll(id, 'app-low')).body.status).toBe('draft');
    expect((await svc(['requests', 'deny', id])).exitCode).toBe(0);
  });

  it('deny, then revoke the approved one', async () => {
    const d = await svc(['requests', 'deny', denyId]);
    expect(d.exitCode, d.stderr).toBe(0);
    expect(d.stderr).toContain(denyId);
    expect((await poll(denyId, 'app-deny')).body).toEqual({ id: denyId, status: 'denied', requested_role: 'scope_user_user' });
    expect((await svc(['requests', 'approve', denyId, '--role', 'scope_user_user'])).exitCode).toBe(1);

    // a grant of its own to revoke: the approve test's may not have run yet
    const approveId = await createRequest({ app_client_id: 'app-approve' });
    expect((await svc(['requests', 'approve', approveId, '--role', 'scope_user_user', '--no-mcp'])).exitCode).toBe(0);
    const rv = await svc(['requests', 'revoke', approveId, '--json']);
    expect(rv.exitCode, rv.stderr).toBe(0);
    expect(JSON.parse(rv.stdout)).toEqual({ id: approveId, status: 'revoked' });
    expect((await poll(approveId, 'app-approve')).body).toEqual({ id: approveId, status: 'revoked', requested_role: 'scope_user_power_user' });
    expect((await svc(['requests', 'revoke', approveId])).exitCode).toBe(1);
  });

  it('usage errors exit 2 and change nothing', async () => {
    const id = await createRequest({ app_client_id: 'app-usage' });
    const cases: string[][] = [
      ['frobnicate'],
      ['requests', 'frobnicate'],
      ['requests', 'approve', id, '--role', 'admin'],
      ['requests', 'approve', id, '--role', 'scope_user_manager'],
      ['requests', 'approve', id, '--mcp', 'nonsense'],
      ['requests', 'approve', id, '--mcp', `=${instanceId}`],
      ['requests', 'approve', id, '--mcp', `${MCP_URL}=`],
      ['requests', 'approve'],
      ['requests', 'list', '--status', 'bogus'],
      ['requests', 'list', '--no-such-flag'],
      ['users', 'add', 'carol', '--role', 'superuser', '--password-stdin'],
      ['users', 'add', 'carol'], // no terminal to ask the password on, and no --password-stdin
      ['mcp', 'add', '--name', 'x', '--url', MCP_URL, '--header', 'no-colon-here'],
      ['mcp', 'add', '--url', MCP_URL],
    ];
    // Independent of each other, so a few at a time.
    const results = await inBatches(cases, 4, (args) => svc(args));
    cases.forEach((args, i) => {
      expect(results[i].exitCode, `svc ${args.join(' ')}\n${results[i].stderr}`).toBe(2);
      expect(results[i].stderr.length, args.join(' ')).toBeGreaterThan(0);
    });
    expect((await poll(id, 'app-usage')).body.status).toBe('draft');
    const users = JSON.parse((await svc(['users', 'list', '--json'])).stdout) as { username: string }[];
    expect(users.map((u) => u.username)).not.toContain('carol');
    expect((await svc(['requests', 'deny', id])).exitCode).toBe(0);
  });
});

/** The CLI on a pseudo-terminal (util-linux `script`), to see what a person at a terminal sees. */
const haveScript = (await execa('sh', ['-c', 'command -v script'], { reject: false })).exitCode === 0;
const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
async function svcOnTty(args: string[]) {
  const command = ['node', BIN, ...args].map(shellQuote).join(' ');
  const r = await execa('script', ['-qec', command, '/dev/null'], { env, extendEnv: false, reject: false, stdin: 'ignore', timeout: 20_000 });
  return { exitCode: r.exitCode, output: String(r.stdout).replace(/\r\n/g, '\n') };
}

describe.skipIf(!needs(haveScript, 'cli (on a terminal)', 'script (bsdutils)'))('on a terminal', () => {
  it('lists are aligned tables with a header', async () => {
    const r = await svcOnTty(['users', 'list']);
    expect(r.exitCode).toBe(0);
    const [header, ...rows] = lines(r.output);
    expect(header).toMatch(/^USERNAME +ROLE +ID +CREATED$/);
    expect(rows.length).toBeGreaterThan(0);
    expect(r.output).not.toContain('\t');
    const roleAt = header.indexOf('ROLE');
    for (const row of rows) expect(row[roleAt - 1]).toBe(' ');
  });
});

describe('svc clients, svc providers, svc models', () => {
  it('clients add (secret shown once), list --json, remove', async () => {
    const added = await svc(['clients', 'add', 'Notes App', '--redirect-uri', 'http://127.0.0.1:5173/callback', '--description', 'Takes notes', '--json']);
    expect(added.exitCode, added.stderr).toBe(0);
    const fields = JSON.parse(added.stdout) as { client_id: string; client_secret: string };
    expect(fields.client_id).toMatch(/^svc-/);
    expect(fields.client_secret.length).toBeGreaterThan(20);
    const listed = JSON.parse((await svc(['clients', 'list', '--json'])).stdout);
    const mine = listed.find((c: { client_id: string }) => c.client_id === fields.client_id);
    expect(mine).toMatchObject({ name: 'Notes App', description: 'Takes notes', public: false, redirect_uris: ['http://127.0.0.1:5173/callback'] });
    expect(JSON.stringify(listed)).not.toContain(fields.client_secret);
    const publicOne = await svc(['clients', 'add', 'CLI tool', '--redirect-uri', 'http://127.0.0.1:8976/cb', '--public', '--json']);
    expect(JSON.parse(publicOne.stdout).client_secret).toBeUndefined();
    expect((await svc(['clients', 'remove', fields.client_id])).exitCode).toBe(0);
    expect(JSON.parse((await svc(['clients', 'list', '--json'])).stdout).some((c: { client_id: string }) => c.client_id === fields.client_id)).toBe(false);
    expect((await svc(['clients', 'add', 'No URI'])).exitCode).toBe(2);
  });

  it('providers add --api-key-stdin (never shown), list, refresh; models alias, list, remove', async () => {
    const { startUpstream } = await import('./helpers/upstream.js');
    const key = `sk-cli-${Date.now()}`;
    const upstream = await startUpstream({ apiKey: key });
    try {
      const added = await svc(['providers', 'add', 'local', '--base-url', upstream.url, '--api-key-stdin'], key);
      expect(added.exitCode, added.stderr).toBe(0);
      expect(added.stderr).toMatch(/models discovered/);
      const listed = await svc(['providers', 'list', '--json']);
      expect(JSON.parse(listed.stdout)[0]).toMatchObject({ name: 'local', has_api_key: true });
      expect(listed.stdout).not.toContain(key);
      expect(JSON.parse(listed.stdout)[0].discovered_models).toContain('fake-model');
      expect(upstream.seen.some((r) => r.headers.authorization === `Bearer ${key}`)).toBe(true);
      expect((await svc(['providers', 'refresh', 'local'])).exitCode).toBe(0);

      const alias = await svc(['models', 'alias', 'quick', '--provider', 'local', '--model', 'fake-model', '--default', 'temperature=0.2']);
      expect(alias.exitCode, alias.stderr).toBe(0);
      expect(JSON.parse((await svc(['models', 'list', '--aliases', '--json'])).stdout)).toEqual([
        expect.objectContaining({ id: 'quick', provider: 'local', model: 'fake-model', defaults: { temperature: 0.2 } }),
      ]);
      // every model the user can call, as /v1/models lists them: the alias and the provider's models
      const all = JSON.parse((await svc(['models', 'list', '--json'])).stdout) as { id: string; kind: string }[];
      expect(all).toEqual(expect.arrayContaining([{ id: 'quick', kind: 'alias', owned_by: expect.any(String) }, { id: 'fake-model', kind: 'provider', owned_by: 'local' }]));
      const table = await svc(['models', 'list']);
      expect(table.stdout.split('\n')).toContain('fake-model\tprovider\tlocal');
      expect((await svc(['models', 'remove', 'quick'])).exitCode).toBe(0);
      expect(JSON.parse((await svc(['models', 'list', '--aliases', '--json'])).stdout)).toEqual([]);
      expect(JSON.parse((await svc(['models', 'list', '--json'])).stdout).map((m: { id: string }) => m.id)).toContain('fake-model');
      expect((await svc(['providers', 'remove', 'local'])).exitCode).toBe(0);
    } finally {
      await upstream.close();
    }
  });
});

describe('hostile app_client_id', () => {
  it('the daemon refuses control characters in app_client_id at creation', async () => {
    const res = await api().post('/svc/v1/apps/request-access', createBody({ app_client_id: HOSTILE_CLIENT_ID }));
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_body');
  });

  it('one that reached the store anyway is shown with no raw ESC/BEL bytes (and the restart keeps the CLI logged in)', async () => {
    // The API refuses such ids, so plant one in the store while the daemon is stopped: the CLI's
    // own neutralisation is the line of defence under test.
    const id = await createRequest({ app_client_id: 'app-to-poison' });
    expect(await daemon!.stop()).toBe(0);
    daemon = undefined;
    expect(await readFile(path.join(dataDir, 'daemon.json'), 'utf8').catch(() => null)).toBeNull();
    const dbFile = path.join(dataDir, 'db.json');
    const db = JSON.parse(await readFile(dbFile, 'utf8'));
    const record = db.access_requests.find((r: { id: string }) => r.id === id);
    record.app_client_id = HOSTILE_CLIENT_ID;
    await writeFile(dbFile, JSON.stringify(db));

    daemon = await startServe(dataDir, env);
    // Second start: no admin password, no key notice.
    expect(daemon.stdout()).not.toContain('admin');
    expect(daemon.stdout()).not.toContain('master.key');

    const list = await svc(['requests', 'list']);
    expect(list.exitCode, list.stderr).toBe(0);
    const row = lines(list.stdout).find((l) => l.startsWith(id));
    expect(row).toBeDefined();
    expect(row).toContain('evil');
    expect(row!.split('\t')).toHaveLength(7);
    expect(list.stdout).not.toMatch(CONTROL_BYTES);
    expect(list.stderr).not.toMatch(CONTROL_BYTES);

    const show = await svc(['requests', 'show', id]);
    expect(show.exitCode, show.stderr).toBe(0);
    expect(show.stdout).toContain('evil');
    expect(show.stdout).not.toMatch(CONTROL_BYTES);

    // JSON carries the value exactly, escaped by JSON itself.
    const json = await svc(['requests', 'list', '--json']);
    expect(json.stdout).not.toMatch(CONTROL_BYTES);
    expect((JSON.parse(json.stdout) as any[]).find((r) => r.id === id).app_client_id).toBe(HOSTILE_CLIENT_ID);

    if (haveScript) {
      const tty = await svcOnTty(['requests', 'list']);
      expect(tty.exitCode).toBe(0);
      expect(tty.output).toContain('evil');
      expect(tty.output).not.toMatch(CONTROL_BYTES);
    }

    const deny = await svc(['requests', 'deny', id]);
    expect(deny.exitCode).toBe(0);
    expect(deny.stderr).not.toMatch(CONTROL_BYTES);
  });
});
