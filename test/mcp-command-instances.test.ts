/**
 * Command MCP instances registered against the real daemon: the command form of the API body and
 * answer, the stdio:// URL an app names one by (default and --url), its grant through an access
 * request, the review page, `svc requests show` and an API key, and `svc mcp add -- COMMAND`,
 * `list` and `show` in the CLI. svc here runs no process of them: what is tested is the registry.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { cleanEnv, runSvcInProcess } from './helpers/cli.js';
import { startTestDaemon, tempDir, type TestDaemon } from './helpers/daemon.js';
import { Api, createBody, expectErrorShape } from './helpers/http.js';
import { authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { storedOnDisk } from './helpers/store.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const MARKER = `env-marker-${Math.random().toString(36).slice(2)}`;
const FILES = { command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', '/srv/notes'], env: [{ name: 'NOTES_TOKEN', value: MARKER }], cwd: '/srv' };

let d: TestDaemon;
let admin: Api;
let env: Record<string, string>;
const svc = (args: string[], extraEnv: Record<string, string> = {}) => runSvcInProcess(args, { env: { ...env, ...extraEnv } });
const onTerminal = (args: string[]) => runSvcInProcess(args, { env, tty: { columns: 250 } });
const lines = (s: string) => s.split('\n').filter((l) => l.length > 0);

beforeAll(async () => {
  d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
  admin = await new Api(d.url).login('admin', d.adminPassword);
  env = cleanEnv({ SVC_HOME: d.dataDir, NO_COLOR: '1' });
});
afterAll(() => d?.stop());

describe('the command form of the API', () => {
  it('registers a command server: transport, the default stdio:// URL, the command with env names only, a proxy URL', async () => {
    const res = await admin.post('/svc/v1/mcps', { name: 'File System', command: FILES, allow_tools: ['read_file'], try: false });
    expect(res.status, res.text).toBe(201);
    const m = res.body.instance;
    expect(m).toMatchObject({
      name: 'File System',
      url: 'stdio://file-system',
      transport: 'command',
      enabled: true,
      allow_tools: ['read_file'],
      header_names: [],
      command: { command: 'npx', args: FILES.args, env_names: ['NOTES_TOKEN'], cwd: '/srv' },
      proxy_url: `${d.url}/svc/v1/apps/mcps/${m.id}/mcp`,
    });
    // added without a try: nothing has run yet
    expect(m.processes).toEqual({ live: 0, last_exit: null, status: 'not running' });
    expect(res.text).not.toContain(MARKER);
    const stored = (await storedOnDisk(d.dataDir)).mcp_instances.find((r: { id: string }) => r.id === m.id);
    expect(stored.command).toMatchObject({ command: 'npx', args: FILES.args, cwd: '/srv' });
    expect(stored.command.env[0].name).toBe('NOTES_TOKEN');
    expect(stored.command.env[0].value).not.toContain(MARKER);
    expect(stored.headers).toEqual([]);
    const one = await admin.get(`/svc/v1/mcps/${m.id}`);
    expect(one.body.instance).toEqual(m);
    const http = await admin.post('/svc/v1/mcps', { name: 'web', url: 'http://127.0.0.1:9/mcp' });
    expect(http.body.instance).toMatchObject({ transport: 'http', header_names: [] });
    expect(http.body.instance.command).toBeUndefined();
  });

  it('takes --url as given (normalised), http(s) or stdio://, and refuses anything else', async () => {
    const named = await admin.post('/svc/v1/mcps', { name: 'git', command: { command: '/usr/bin/git-mcp' }, url: 'STDIO://Git.Local/repo', try: false });
    expect(named.status, named.text).toBe(201);
    expect(named.body.instance).toMatchObject({ url: 'stdio://git.local/repo', command: { command: '/usr/bin/git-mcp', args: [], env_names: [], cwd: null } });
    const https = await admin.post('/svc/v1/mcps', { name: 'as-https', command: { command: 'srv' }, url: 'https://tools.example.test/mcp', try: false });
    expect(https.body.instance.url).toBe('https://tools.example.test/mcp');
    for (const url of ['ftp://x/y', 'stdio://', 'stdio://a b', 'stdio://user@host', 'stdio://host:80', 'stdio://x?q=1', 'stdio://%41', 'file:///etc/passwd', 'http://u:p@h/']) {
      const bad = await admin.post('/svc/v1/mcps', { name: 'bad', command: { command: 'srv' }, url, try: false });
      expect(bad.status, url).toBe(400);
      expect(bad.body.error.code).toBe('invalid_body');
    }
    // an HTTP instance's URL stays http(s) only
    const stdioHttp = await admin.post('/svc/v1/mcps', { name: 'bad', url: 'stdio://files' });
    expect(stdioHttp.status).toBe(400);
    expect(stdioHttp.body.error.message).toMatch(/http or https/);
  });

  it('refuses a body that mixes the forms or carries what a process cannot take, naming the field', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ name: 'x', command: { command: 'srv' }, headers: [{ name: 'A', value: 'b' }] }, /headers/],
      [{ name: 'x', command: { command: '' } }, /command\.command/],
      [{ name: 'x', command: { command: 'srv', cwd: 'relative/dir' } }, /absolute path/],
      [{ name: 'x', command: { command: 'srv', env: [{ name: '1BAD', value: 'v' }] } }, /environment variable name/],
      [{ name: 'x', command: { command: 'srv', env: [{ name: 'A', value: 'v' }, { name: 'A', value: 'w' }] } }, /each variable once/],
      [{ name: 'x', command: { command: 'srv', args: ['a\u0000b'] } }, /NUL/],
      [{ name: 'x', command: { command: 'srv', env: [{ name: 'A', value: `${MARKER}\u0000` }] } }, /NUL/],
      [{ name: 'x', command: { command: 'srv', shell: true } }, /shell/],
      [{ name: 'x', command: 'srv --flag' }, /command/],
    ];
    const before = (await admin.get('/svc/v1/mcps')).body.data.length;
    for (const [body, message] of cases) {
      const res = await admin.post('/svc/v1/mcps', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(expectErrorShape(res.body)).toBe(true);
      expect(res.body.error.message, JSON.stringify(body)).toMatch(message);
      expect(res.text).not.toContain(MARKER);
    }
    expect((await admin.get('/svc/v1/mcps')).body.data.length).toBe(before);
  });

  it('changes a command instance: command, args, cwd, env (replaced whole), URL; keeps what is not named', async () => {
    const made = (await admin.post('/svc/v1/mcps', { name: 'memory', command: { command: 'mem', args: ['--a'], env: [{ name: 'K1', value: 'v1' }] }, try: false })).body.instance;
    const changed = await admin.patch(`/svc/v1/mcps/${made.id}`, { command: { args: ['--b', 'two words'], cwd: '/tmp', env: [{ name: 'K2', value: MARKER }] }, url: 'stdio://mem', try: false });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.body.instance).toMatchObject({ url: 'stdio://mem', command: { command: 'mem', args: ['--b', 'two words'], env_names: ['K2'], cwd: '/tmp' } });
    expect(changed.text).not.toContain(MARKER);
    const cleared = await admin.patch(`/svc/v1/mcps/${made.id}`, { command: { cwd: null }, try: false });
    expect(cleared.body.instance.command).toMatchObject({ cwd: null, env_names: ['K2'] });
    const headers = await admin.patch(`/svc/v1/mcps/${made.id}`, { headers: [{ name: 'A', value: 'b' }] });
    expect(headers.status).toBe(400);
    expect(headers.body.error.param).toBe('headers');
    const http = (await admin.post('/svc/v1/mcps', { name: 'web2', url: 'http://127.0.0.1:9/two' })).body.instance;
    for (const body of [{ command: { command: 'x' } }, { url: 'http://127.0.0.1:9/other' }]) {
      const res = await admin.patch(`/svc/v1/mcps/${http.id}`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
    expect((await admin.patch(`/svc/v1/mcps/${made.id}`, { try: false })).status).toBe(400);
    expect((await admin.delete(`/svc/v1/mcps/${made.id}`)).status).toBe(204);
  });
});

describe('a command instance is granted by its URL like any other', () => {
  let instanceId: string;
  beforeAll(async () => {
    instanceId = (await admin.post('/svc/v1/mcps', { name: 'filesystem', command: FILES, try: false })).body.instance.id;
  });

  it('an access request for stdio://filesystem (any case) shows it on the review page, in svc requests show, and is granted', async () => {
    const req = await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ requested: { version: '1', mcp_servers: [{ url: 'STDIO://FileSystem' }] } }));
    expect(req.status, req.text).toBe(201);
    const review = await admin.get(`/svc/v1/access-requests/${req.body.id}/review`);
    expect(review.body.mcp_servers).toEqual([{ url: 'stdio://filesystem', instances: [expect.objectContaining({ id: instanceId, name: 'filesystem' })] }]);
    const page = await admin.get(`/ui/apps/access-requests/review?id=${req.body.id}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('<code class="url" id="server-0">stdio://filesystem</code>');
    expect(page.text).toContain(`value="${instanceId}"`);
    const shown = await svc(['requests', 'show', req.body.id]);
    expect(shown.exitCode, shown.stderr).toBe(0);
    expect(shown.stdout).toContain('stdio://filesystem');
    expect(shown.stdout).toContain(instanceId.slice(0, 8));
    const approved = await svc(['requests', 'approve', req.body.id, '--mcp', `stdio://filesystem=${instanceId.slice(0, 8)}`]);
    expect(approved.exitCode, approved.stderr).toBe(0);
    expect((await admin.get(`/svc/v1/access-requests/${req.body.id}/review`)).body.approved.mcp_servers).toEqual([{ url: 'stdio://filesystem', instance_ids: [instanceId] }]);
  });

  it("an MCP host's sign-in for its proxy URL asks for stdio://filesystem, shows it for review, and its token is for that proxy URL on a grant of the instance", async () => {
    const { clientId, secret } = await registerClient(admin, { name: 'Host App' });
    const config = await oidcConfig(d, clientId, secret);
    const resource = `${d.url}/svc/v1/apps/mcps/${instanceId}/mcp`;
    let reviewed = false;
    const { tokens, error } = await authorize(config, admin, 'scope_user_user', { resource }, undefined, async (id) => {
      const review = await admin.get(`/svc/v1/access-requests/${id}/review`);
      expect(review.body.requested.mcp_servers).toEqual([{ url: 'stdio://filesystem' }]);
      expect(review.body.mcp_servers[0].instances).toEqual([expect.objectContaining({ id: instanceId })]);
      const page = await admin.get(`/ui/apps/access-requests/review?id=${id}`);
      expect(page.text).toContain('stdio://filesystem');
      const approved = await admin.put(`/svc/v1/access-requests/${id}/approve`, {
        approved_role: 'scope_user_user',
        approved: { version: '1', mcp_servers: [{ url: 'stdio://filesystem', instance_ids: [instanceId] }] },
      });
      expect(approved.status, approved.text).toBe(200);
      reviewed = true;
    });
    expect(error).toBeUndefined();
    expect(reviewed).toBe(true);
    // the token is the proxy URL's, on a grant of that instance by its stdio:// URL
    const claims = JSON.parse(Buffer.from(tokens!.access_token.split('.')[1], 'base64url').toString('utf8')) as { aud: string | string[] };
    expect([claims.aud].flat()).toContain(resource);
    const grants = (await admin.get('/svc/v1/access-requests?status=approved')).body.data as { app_client_id: string; approved: { mcp_servers: unknown[] } | null }[];
    expect(grants.find((g) => g.app_client_id === clientId)?.approved?.mcp_servers).toEqual([{ url: 'stdio://filesystem', instance_ids: [instanceId] }]);
  });

  it('an unknown stdio URL gets the admin-only add hint on the review page, escaped', async () => {
    const req = await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ requested: { version: '1', mcp_servers: [{ url: 'stdio://nothing-here' }] } }));
    const page = await admin.get(`/ui/apps/access-requests/review?id=${req.body.id}`);
    expect(page.text).toContain('svc mcp add --name NAME --url stdio://nothing-here -- COMMAND [ARG]...');
  });

  it('an API key names it by its URL, and the app sees it with that URL', async () => {
    const key = await admin.post('/svc/v1/keys', { name: 'stdio key', mcp_servers: [{ url: 'stdio://filesystem', instance_ids: [instanceId] }] });
    expect(key.status, key.text).toBe(201);
    const listed = await new Api(d.url).get('/svc/v1/apps/mcps', { Authorization: `Bearer ${key.body.key}` });
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body.data).toEqual([expect.objectContaining({ id: instanceId, url: 'stdio://filesystem' })]);
    expect(listed.text).not.toContain(MARKER);
    const cli = await svc(['keys', 'create', 'stdio cli key', '--mcp', `stdio://filesystem=${instanceId.slice(0, 8)}`, '--json']);
    expect(cli.exitCode, cli.stderr).toBe(0);
    const wrong = await admin.post('/svc/v1/keys', { name: 'wrong', mcp_servers: [{ url: 'stdio://other', instance_ids: [instanceId] }] });
    expect(wrong.status).toBeGreaterThanOrEqual(400);
    expect(wrong.status).toBeLessThan(500);
  });
});

describe('svc mcp add -- COMMAND, list and show', () => {
  /** `svc mcp add` of a command server with two variables, one from the shell; its id, and its cwd. */
  const addNotes = async () => {
    const dir = await tempDir('svc-cmd-cwd-');
    const add = await svc(['mcp', 'add', '--name', 'notes', '--env', `NOTES_TOKEN=${MARKER}`, '--env', 'FROM_SHELL', '--cwd', dir, '--allow-tools', 'read,write', '--no-try', '--', 'node', 'server.js', '--name', 'x', '-y', 'a b'], {
      FROM_SHELL: `${MARKER}-shell`,
    });
    expect(add.exitCode, add.stderr).toBe(0);
    return { id: add.stdout.trim(), add, dir };
  };

  it('add takes everything after -- as the command line, --env values sealed, --cwd made absolute', async () => {
    const { id, add, dir } = await addNotes();
    expect(add.stderr).toContain('a command server svc runs: node server.js --name x -y');
    expect(add.stderr).toContain("'a b'");
    expect(add.stderr).toContain('stdio://notes');
    expect(add.stderr).toContain('NOTES_TOKEN, FROM_SHELL');
    expect(add.stderr + add.stdout).not.toContain(MARKER);
    const m = (await admin.get(`/svc/v1/mcps/${id}`)).body.instance;
    expect(m.command).toEqual({ command: 'node', args: ['server.js', '--name', 'x', '-y', 'a b'], env_names: ['NOTES_TOKEN', 'FROM_SHELL'], cwd: dir });
    expect(m.allow_tools).toEqual(['read', 'write']);
    const relative = await svc(['mcp', 'add', '--name', 'rel', '--cwd', 'sub/dir', '--no-try', '--', 'srv']);
    expect(relative.exitCode, relative.stderr).toBe(0);
    expect((await admin.get(`/svc/v1/mcps/${relative.stdout.trim()}`)).body.instance.command.cwd).toBe(path.resolve(process.cwd(), 'sub/dir'));
  }, 60_000);

  it('list shows the transport, the URL and env names, never a value; show gives the command line', async () => {
    const { id } = await addNotes();
    const piped = await svc(['mcp', 'list']);
    expect(piped.exitCode, piped.stderr).toBe(0);
    expect(piped.stdout).not.toContain(MARKER);
    const row = lines(piped.stdout).find((l) => l.startsWith(id))!.split('\t');
    expect(row).toEqual([id, 'notes', 'stdio://notes', `${d.url}/svc/v1/apps/mcps/${id}/mcp`, 'yes', 'read,write', '', 'command', 'NOTES_TOKEN,FROM_SHELL', 'not running, 0 live', 'none']);
    const table = await onTerminal(['mcp', 'list']);
    expect(table.stdout).toMatch(/TRANSPORT\s+ENV/);
    const json = JSON.parse((await svc(['mcp', 'list', '--json'])).stdout) as { id: string; transport: string }[];
    expect(json.find((x) => x.id === id)).toMatchObject({ transport: 'command', url: 'stdio://notes' });
    const show = await onTerminal(['mcp', 'show', id.slice(0, 8)]);
    expect(show.exitCode, show.stderr).toBe(0);
    expect(show.stdout).toMatch(/^transport\s+command$/m);
    expect(show.stdout).toMatch(/^url\s+stdio:\/\/notes$/m);
    expect(show.stdout).toMatch(/^command\s+node server\.js --name x -y 'a b'$/m);
    expect(show.stdout).toMatch(/^env\s+NOTES_TOKEN,FROM_SHELL$/m);
    expect(show.stdout).not.toContain(MARKER);
    const showJson = JSON.parse((await svc(['mcp', 'show', id, '--json'])).stdout);
    expect(showJson).toMatchObject({ id, command: { env_names: ['NOTES_TOKEN', 'FROM_SHELL'] } });
  });

  it('--url sets the URL; --no-try is taken; --env KEY takes the value from the shell, and refuses one that is not set', async () => {
    const add = await svc(['mcp', 'add', '--name', 'x', '--url', 'stdio://my-tools', '--no-try', '--env', 'SHELL_SECRET', '--', 'srv'], { SHELL_SECRET: MARKER });
    expect(add.exitCode, add.stderr).toBe(0);
    expect((await admin.get(`/svc/v1/mcps/${add.stdout.trim()}`)).body.instance).toMatchObject({ url: 'stdio://my-tools', command: { env_names: ['SHELL_SECRET'] } });
    const unset = await svc(['mcp', 'add', '--name', 'y', '--env', 'NOT_SET_ANYWHERE', '--no-try', '--', 'srv']);
    expect(unset.exitCode).toBe(2);
    expect(unset.stderr).toContain('NOT_SET_ANYWHERE');
  });

  it('refuses a mixed or empty add before sending anything', async () => {
    const before = (await admin.get('/svc/v1/mcps')).body.data.length;
    for (const [args, message] of [
      [['mcp', 'add', '--name', 'z'], /--url URL .* -- COMMAND/],
      [['mcp', 'add', '--name', 'z', '--header', 'A: b', '--no-try', '--', 'srv'], /--header is for an HTTP server/],
      [['mcp', 'add', '--name', 'z', '--url', 'http://127.0.0.1:9/mcp', '--env', 'A=b'], /--env and --cwd are for a command server/],
      [['mcp', 'add', '--name', 'z', '--env', '=b', '--no-try', '--', 'srv'], /--env takes KEY=VALUE.*name before "=" is missing/],
    ] as [string[], RegExp][]) {
      const r = await svc(args);
      expect(r.exitCode, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(message);
    }
    expect((await admin.get('/svc/v1/mcps')).body.data.length).toBe(before);
  });

  it('an HTTP add, list and show are as they were, with their transport', async () => {
    const add = await svc(['mcp', 'add', '--name', 'plain', '--url', 'http://127.0.0.1:9/plain', '--header', 'X-Key: k']);
    expect(add.exitCode, add.stderr).toBe(0);
    const hid = add.stdout.trim();
    const row = lines((await svc(['mcp', 'list'])).stdout).find((l) => l.startsWith(hid))!.split('\t');
    expect(row).toEqual([hid, 'plain', 'http://127.0.0.1:9/plain', `${d.url}/svc/v1/apps/mcps/${hid}/mcp`, 'yes', 'all', 'X-Key', 'http', '', '', 'headers']);
    const show = await onTerminal(['mcp', 'show', hid]);
    expect(show.stdout).toMatch(/^headers\s+X-Key$/m);
    expect(show.stdout).not.toMatch(/^command/m);
  });
});
