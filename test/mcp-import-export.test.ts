/**
 * `svc mcp import` and `svc mcp export` against a real daemon on 127.0.0.1, run as the person runs
 * them: real-shaped Claude Desktop, Cursor, Claude Code and VS Code files (test/fixtures/host-configs)
 * imported whole or not at all, with their secrets sealed and never printed; and the printed export
 * read back by the MCP SDK client (and by mcp-remote, as Claude Desktop runs it), listing tools
 * through svc's proxy with the API key it holds.
 */
import { copyFile, mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { cleanEnv, REPO, runSvcInProcess } from './helpers/cli.js';
import { startTestDaemon, tempDir, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { startMcpServer } from './helpers/mcp-servers.js';
import { storeFilesText } from './helpers/store.js';
import { ensureTools } from './helpers/tools.js';

vi.setConfig({ testTimeout: 120_000, hookTimeout: 300_000 });

const FIXTURES = path.join(REPO, 'test', 'fixtures', 'host-configs');
const DESKTOP_TOKEN = 'fixture-desktop-github-token-7f3a';
// values the environment gives the files' references: each must be sealed and never printed
const SECRETS = {
  CURSOR_FIXTURE_PGPASSWORD: `pg-secret-${Math.random().toString(36).slice(2)}`,
  CURSOR_FIXTURE_DOCS_TOKEN: `docs-secret-${Math.random().toString(36).slice(2)}`,
  SHOP_DATABASE_URL: `postgres://shop:db-secret-${Math.random().toString(36).slice(2)}@127.0.0.1/shop`,
  STRIPE_SECRET_KEY: `sk_test_${Math.random().toString(36).slice(2)}`,
  SVC_INPUT_PERPLEXITY_KEY: `pplx-secret-${Math.random().toString(36).slice(2)}`,
  SVC_INPUT_GITHUB_TOKEN: `gh-input-secret-${Math.random().toString(36).slice(2)}`,
};

let d: TestDaemon;
let admin: Api;
let root: string;
let baseEnv: Record<string, string>;

const svc = (args: string[], extraEnv: Record<string, string> = {}, input?: string) => runSvcInProcess(args, { env: { ...baseEnv, ...extraEnv }, input });
const mine = async () => (await admin.get('/svc/v1/mcps')).body.data as any[];
const byName = (list: any[]) => Object.fromEntries(list.map((m) => [m.name, m]));

/** Nothing of `values` in any of `texts`. */
function expectNoneOf(values: string[], ...texts: string[]) {
  for (const t of texts) for (const v of values) expect(t.includes(v), `a secret (${v.slice(0, 6)}...) was printed`).toBe(false);
}

beforeAll(async () => {
  d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
  root = await tempDir('svc-import-');
  baseEnv = cleanEnv({ SVC_KEYCHAIN: 'file', SVC_HOME: d.dataDir, NO_COLOR: '1', HOME: path.join(root, 'home') });
  await mkdir(path.join(root, 'home'), { recursive: true });
  admin = await new Api(d.url).login('admin', d.adminPassword);
});

afterAll(async () => {
  await d?.stop();
  if (root) await rm(root, { recursive: true, force: true });
});

// Each test starts from no instances of the admin's: the files share names (memory, github...).
afterEach(async () => {
  for (const m of await mine()) await admin.delete(`/svc/v1/mcps/${m.id}`);
});

describe('svc mcp import', () => {
  it('Claude Desktop: --dry-run adds nothing; the import adds every server as a command instance, the env sealed; a second import adds nothing', async () => {
    const file = path.join(FIXTURES, 'claude_desktop_config.json');
    const dry = await svc(['mcp', 'import', file, '--dry-run', '--no-try']);
    expect(dry.exitCode, dry.stderr).toBe(0);
    expect(dry.stdout.trim().split('\n').map((l) => l.split('\t').slice(0, 3))).toEqual(
      ['filesystem', 'memory', 'github', 'sqlite', 'git'].map((n) => [n, 'would add', 'command']),
    );
    expect(dry.stderr).toContain('Nothing added (--dry-run)');
    expect(await mine()).toEqual([]);

    const r = await svc(['mcp', 'import', file, '--no-try']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^Added 5 of .*claude_desktop_config\.json\./);
    const rows = r.stdout.trim().split('\n').map((l) => l.split('\t'));
    expect(rows.map((c) => c[1])).toEqual(Array(5).fill('added'));
    expect(rows.find((c) => c[0] === 'github')).toEqual(['github', 'added', 'command', 'docker run -i --rm -e GITHUB_PERSONAL_ACCESS_TOKEN ghcr.io/github/github-mcp-server', 'GITHUB_PERSONAL_ACCESS_TOKEN', expect.any(String)]);
    expectNoneOf([DESKTOP_TOKEN], r.stdout, r.stderr, dry.stdout, dry.stderr);

    const stored = byName(await mine());
    expect(Object.keys(stored).sort()).toEqual(['filesystem', 'git', 'github', 'memory', 'sqlite']);
    expect(stored.github).toMatchObject({
      transport: 'command',
      url: 'stdio://github',
      enabled: true,
      command: { command: 'docker', args: ['run', '-i', '--rm', '-e', 'GITHUB_PERSONAL_ACCESS_TOKEN', 'ghcr.io/github/github-mcp-server'], env_names: ['GITHUB_PERSONAL_ACCESS_TOKEN'], cwd: null },
    });
    expect(stored.filesystem.command.args).toEqual(['-y', '@modelcontextprotocol/server-filesystem', '/Users/sam/Desktop', '/Users/sam/Downloads']);
    expect(rows.find((c) => c[0] === 'github')![5]).toBe(stored.github.id);
    // sealed at rest: the token is in no answer and no file of the store
    expectNoneOf([DESKTOP_TOKEN], JSON.stringify(await mine()), await storeFilesText(d.dataDir));

    const again = await svc(['mcp', 'import', file, '--json']);
    expect(again.exitCode, again.stderr).toBe(0);
    const report = JSON.parse(again.stdout);
    expect(report).toMatchObject({ file, dry_run: false });
    expect(report.servers.map((s: any) => [s.name, s.result])).toEqual(['filesystem', 'memory', 'github', 'sqlite', 'git'].map((n) => [n, 'exists']));
    expect(await mine()).toHaveLength(5);
  });

  it('Cursor: commands and url entries, ${env:...} from the environment; env values and headers sealed and never printed', async () => {
    const r = await svc(['mcp', 'import', path.join(FIXTURES, 'cursor-mcp.json'), '--no-try'], SECRETS);
    expect(r.exitCode, r.stderr).toBe(0);
    const stored = byName(await mine());
    expect(stored.linear).toMatchObject({ transport: 'http', url: 'https://mcp.linear.app/sse', header_names: [] });
    expect(stored.docs).toMatchObject({ transport: 'http', url: 'https://docs.example.com/mcp', header_names: ['Authorization'] });
    expect(stored.postgres).toMatchObject({ transport: 'command', command: { env_names: ['PGPASSWORD'] } });
    // what is shown is the file's own text: the reference, not what it resolved to
    expect(r.stdout).toContain('npx -y @modelcontextprotocol/server-postgres postgresql://localhost/mydb\tPGPASSWORD');
    expectNoneOf(Object.values(SECRETS), r.stdout, r.stderr, JSON.stringify(await mine()), await storeFilesText(d.dataDir));
  });

  it('Claude Code: --from claude-code reads ~/.claude.json, user and project servers; a name given twice is skipped and said', async () => {
    await copyFile(path.join(FIXTURES, 'claude.json'), path.join(root, 'home', '.claude.json'));
    const r = await svc(['mcp', 'import', '--from', 'claude-code', '--no-try', '--json'], SECRETS);
    expect(r.exitCode, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout);
    expect(report.file).toBe(path.join(root, 'home', '.claude.json'));
    expect(report.servers.map((s: any) => [s.name, s.result, s.where])).toEqual([
      ['sequential-thinking', 'added', 'mcpServers.sequential-thinking'],
      ['sentry', 'added', 'mcpServers.sentry'],
      ['shop-db', 'added', 'projects["/home/sam/src/shop"].mcpServers.shop-db'],
      ['stripe', 'added', 'projects["/home/sam/src/shop"].mcpServers.stripe'],
      ['sentry', 'duplicate', 'projects["/home/sam/src/blog"].mcpServers.sentry'],
    ]);
    expect(report.servers[4].kept).toBe('mcpServers.sentry');
    const stored = byName(await mine());
    expect(stored['shop-db']).toMatchObject({ command: { command: '/home/sam/src/shop/bin/db-mcp', args: ['--readonly'], env_names: ['DATABASE_URL', 'LOG_LEVEL'] } });
    expect(stored.stripe).toMatchObject({ url: 'https://mcp.stripe.com/', header_names: ['Authorization'] });
    expectNoneOf(Object.values(SECRETS), r.stdout, r.stderr, await storeFilesText(d.dataDir));

    const missing = await svc(['mcp', 'import', '--from', 'cursor']);
    expect(missing.exitCode).toBe(1);
    expect(missing.stderr).toContain(`${path.join(root, 'home', '.cursor', 'mcp.json')}: cannot be read: no such file (where cursor keeps its config`);
  });

  it('VS Code with inputs: refused by name until SVC_INPUT_<ID> gives each, then imported, ${workspaceFolder} the project\'s folder', async () => {
    const project = path.join(root, 'shop');
    await mkdir(path.join(project, '.vscode'), { recursive: true });
    const file = path.join(project, '.vscode', 'mcp.json');
    await copyFile(path.join(FIXTURES, 'vscode-project', '.vscode', 'mcp.json'), file);

    const refused = await svc(['mcp', 'import', file, '--no-try']);
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toContain(`${file}: 2 problems:`);
    expect(refused.stderr).toContain('servers.Perplexity.env.PERPLEXITY_API_KEY: ${input:perplexity-key} is an input the host asks for ("Perplexity API Key"): set SVC_INPUT_PERPLEXITY_KEY to its value');
    expect(refused.stderr).toContain('servers.github.headers.Authorization: ${input:github_token} is an input the host asks for ("GitHub Personal Access Token"): set SVC_INPUT_GITHUB_TOKEN to its value');
    expect(refused.stderr).toContain('Nothing imported.');
    expect(await mine()).toEqual([]);

    const r = await svc(['mcp', 'import', file, '--no-try'], SECRETS);
    expect(r.exitCode, r.stderr).toBe(0);
    const stored = byName(await mine());
    expect(Object.keys(stored).sort()).toEqual(['Perplexity', 'fetch', 'github', 'memory']);
    expect(stored.Perplexity).toMatchObject({ url: 'stdio://perplexity', command: { env_names: ['PERPLEXITY_API_KEY'] } });
    expect(stored.memory.command).toMatchObject({ cwd: project, env_names: ['MEMORY_FILE_PATH'] });
    expect(stored.github).toMatchObject({ transport: 'http', url: 'https://api.githubcopilot.com/mcp/', header_names: ['Authorization'] });
    expectNoneOf(Object.values(SECRETS), r.stdout, r.stderr, refused.stderr, await storeFilesText(d.dataDir));
  });

  it('a command server svc can start is added as the file gives it, tried once unless --no-try says not to', async () => {
    const file = path.join(root, 'runnable.json');
    const everything = path.join(REPO, 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js');
    await writeFile(file, JSON.stringify({ mcpServers: { everything: { command: process.execPath, args: [everything, 'stdio'], env: { MARKER: 'runnable-secret' } } } }));
    const r = await svc(['mcp', 'import', file]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(byName(await mine()).everything).toMatchObject({ transport: 'command', url: 'stdio://everything', command: { command: process.execPath, args: [everything, 'stdio'], env_names: ['MARKER'] } });
    expectNoneOf(['runnable-secret'], r.stdout, r.stderr);
  });

  it('a bad file is refused whole, naming the file and each entry: bad JSON, an unknown shape, a value the daemon would refuse', async () => {
    const bad = path.join(root, 'bad.json');
    await writeFile(bad, '{\n  "mcpServers": {\n    "a": { "command": "npx" }\n    "b": {}\n  }\n}\n');
    const json = await svc(['mcp', 'import', bad]);
    expect(json.exitCode).toBe(1);
    expect(json.stderr).toContain(`${bad}: the JSON is malformed at line 4, column 5`);

    await writeFile(
      bad,
      JSON.stringify({
        mcpServers: {
          fine: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-memory'] },
          odd: { transport: { type: 'http', url: 'http://127.0.0.1:9/mcp' } },
          headerless: { url: 'https://x.example/mcp', headers: { Host: 'x.example' } },
        },
      }),
    );
    const shape = await svc(['mcp', 'import', bad, '--no-try']);
    expect(shape.exitCode).toBe(1);
    expect(shape.stderr).toContain(`${bad}: mcpServers.odd: has neither "command" nor "url": svc cannot tell how to reach it`);
    expect(shape.stderr).not.toContain('mcpServers.fine');
    await writeFile(bad, JSON.stringify({ mcpServers: { fine: { command: 'npx' }, headerless: { url: 'https://x.example/mcp', headers: { Host: 'x.example' } } } }));
    const header = await svc(['mcp', 'import', bad, '--no-try']);
    expect(header.exitCode).toBe(1);
    expect(header.stderr).toContain(`${bad}: mcpServers.headerless.headers.Host: is a header svc sets itself`);
    expect(await mine()).toEqual([]);

    const none = await svc(['mcp', 'import', path.join(root, 'nowhere.json')]);
    expect(none.exitCode).toBe(1);
    expect(none.stderr).toContain(`${path.join(root, 'nowhere.json')}: cannot be read: no such file. Nothing imported.`);
    const both = await svc(['mcp', 'import', bad, '--from', 'cursor']);
    expect(both.exitCode).toBe(2);
  });

  it('when the daemon refuses a server after others were added, those are removed again and the refusal names the entry', async () => {
    // percent-encoding makes this URL longer than the daemon stores, which only the daemon's normalising sees
    const long = `https://x.example/${'"'.repeat(700)}`;
    const file = path.join(root, 'late.json');
    await writeFile(file, JSON.stringify({ mcpServers: { first: { url: 'https://a.example/mcp' }, second: { command: 'npx', args: ['x'] }, third: { url: long } } }));
    const r = await svc(['mcp', 'import', file, '--no-try']);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain('mcpServers.third (third): ');
    expect(r.stderr).toContain('Nothing imported. The 2 added before it were removed again.');
    expect(await mine()).toEqual([]);
  });

  it('command servers are for admins: another user is told before anything is added', async () => {
    await userApi(d.url, admin, 'pat', 'power_user');
    const login = await svc(['login', '--username', 'pat', '--password-stdin'], {}, 'pw-pat-12345\n');
    expect(login.exitCode, login.stderr).toBe(0);
    try {
      const r = await svc(['mcp', 'import', path.join(FIXTURES, 'cursor-mcp.json'), '--no-try'], SECRETS);
      expect(r.exitCode).toBe(4);
      expect(r.stderr).toContain('Only an admin can add command servers (svc runs them as its own OS user), and this file has 2: playwright, postgres. Nothing imported.');
      const pat = await new Api(d.url).login('pat', 'pw-pat-12345');
      expect((await pat.get('/svc/v1/mcps')).body.data).toEqual([]);
      // remote servers are anyone's to add
      const remote = path.join(root, 'remote-only.json');
      await writeFile(remote, JSON.stringify({ mcpServers: { linear: { url: 'https://mcp.linear.app/sse' }, docs: { type: 'http', url: 'https://docs.example.com/mcp' } } }));
      const ok = await svc(['mcp', 'import', remote]);
      expect(ok.exitCode, ok.stderr).toBe(0);
      expect(((await pat.get('/svc/v1/mcps')).body.data as any[]).map((m) => [m.name, m.transport])).toEqual([
        ['linear', 'http'],
        ['docs', 'http'],
      ]);
    } finally {
      const back = await svc(['login', '--username', 'admin', '--password-stdin'], {}, `${d.adminPassword}\n`);
      expect(back.exitCode, back.stderr).toBe(0);
    }
  });
});

describe('svc mcp export', () => {
  let upstream: Awaited<ReturnType<typeof startMcpServer>>;

  beforeAll(async () => {
    upstream = await startMcpServer({ stateful: true });
  });

  afterAll(async () => {
    await upstream?.close();
  });

  /** Lists the tools of `url` through the MCP SDK client with `headers`, as a host would connect. */
  async function toolsThrough(url: string, headers: Record<string, string>): Promise<string[]> {
    const client = new Client({ name: 'exported-host', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
    try {
      return (await client.listTools()).tools.map((t) => t.name);
    } finally {
      await client.close();
    }
  }

  it('--key: each host\'s config, read back and connected with its headers, lists the tools through svc; the key is limited to these instances', async () => {
    const made = await admin.post('/svc/v1/mcps', { name: 'notes & more', url: upstream.url });
    expect(made.status, made.text).toBe(201);
    const off = await admin.post('/svc/v1/mcps', { name: 'off', url: upstream.url, enabled: false });
    expect(off.status, off.text).toBe(201);
    const proxyUrl = made.body.instance.proxy_url as string;

    const madeKeys: string[] = [];
    for (const host of ['claude-code', 'cursor', 'vscode'] as const) {
      const r = await svc(['mcp', 'export', '--for', host, '--key']);
      expect(r.exitCode, r.stderr).toBe(0);
      const config = JSON.parse(r.stdout);
      const block = host === 'vscode' ? config.servers : config.mcpServers;
      expect(Object.keys(block)).toEqual(['notes-more']);
      const entry = block['notes-more'];
      expect(entry.url).toBe(proxyUrl);
      if (host !== 'cursor') expect(entry.type).toBe('http');
      expect(entry.headers.Authorization).toMatch(/^Bearer svc_[A-Za-z0-9_-]{43}$/);
      expect(await toolsThrough(entry.url, entry.headers)).toEqual(expect.arrayContaining(['echo', 'add']));
      const said = /^1 instance \(1 disabled left out\)\. Put this in .*It holds API key ([0-9a-f-]{36}), shown only here/.exec(r.stderr);
      expect(said, r.stderr).not.toBeNull();
      madeKeys.push(said![1]);
    }
    const keys = ((await admin.get('/svc/v1/keys')).body.data as any[]).filter((k) => madeKeys.includes(k.id));
    expect(keys.map((k) => k.name).sort()).toEqual(['claude-code (svc mcp export)', 'cursor (svc mcp export)', 'vscode (svc mcp export)']);
    for (const k of keys) expect(k.mcp_servers).toEqual([{ url: upstream.url, instance_ids: [made.body.instance.id] }]);
  });

  it('without --key, the URLs alone: the host gets svc\'s 401 and signs in; --instance picks instances', async () => {
    const notes = (await admin.post('/svc/v1/mcps', { name: 'notes', url: upstream.url })).body.instance;
    await admin.post('/svc/v1/mcps', { name: 'other', url: upstream.url });
    const all = await svc(['mcp', 'export', '--for', 'cursor']);
    expect(Object.keys(JSON.parse(all.stdout).mcpServers)).toEqual(['notes', 'other']);
    const r = await svc(['mcp', 'export', '--for', 'cursor', '--instance', notes.id.slice(0, 8)]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(Object.keys(JSON.parse(r.stdout).mcpServers)).toEqual(['notes']);
    const entry = JSON.parse(r.stdout).mcpServers.notes;
    expect(entry.url).toBe(notes.proxy_url);
    expect(entry).toEqual({ url: expect.stringMatching(/\/svc\/v1\/apps\/mcps\/[0-9a-f-]+\/mcp$/) });
    const res = await fetch(entry.url, { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' }, body: '{}' });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer .*resource_metadata="/);
    expect(r.stderr).toContain('signs in through svc');

    const unknown = await svc(['mcp', 'export', '--for', 'cursor', '--instance', '00000000-0000-4000-8000-000000000000']);
    expect(unknown.exitCode).toBe(1);
    expect(unknown.stderr).toContain('No MCP instance of yours has the id 00000000-0000-4000-8000-000000000000');
    for (const m of await mine()) await admin.delete(`/svc/v1/mcps/${m.id}`);
    const empty = await svc(['mcp', 'export', '--for', 'vscode']);
    expect(empty.exitCode).toBe(1);
    expect(empty.stderr).toContain('You have no MCP instances to export');
  });

  it('Claude Desktop: the printed entry, run as Claude Desktop runs it (mcp-remote with its env), lists the tools through svc', async () => {
    const tools = await ensureTools();
    await admin.post('/svc/v1/mcps', { name: 'notes', url: upstream.url });
    const r = await svc(['mcp', 'export', '--for', 'claude-desktop', '--key']);
    expect(r.exitCode, r.stderr).toBe(0);
    const entry = JSON.parse(r.stdout).mcpServers.notes;
    expect(entry.command).toBe('npx');
    expect(entry.args.slice(0, 1)).toEqual(['mcp-remote']);
    expect(entry.args.slice(2)).toEqual(['--header', 'Authorization:${AUTH_HEADER}']);
    expect(entry.env.AUTH_HEADER).toMatch(/^Bearer svc_/);
    // `npx mcp-remote` is the installed mcp-remote here (no registry): the same arguments and environment
    let stderr = '';
    const transport = new StdioClientTransport({
      command: tools.hostNode,
      args: [tools.mcpRemote, ...entry.args.slice(1)],
      env: { PATH: process.env.PATH ?? '', HOME: path.join(root, 'home'), MCP_REMOTE_CONFIG_DIR: path.join(root, 'mcp-auth'), ...entry.env },
      stderr: 'pipe',
    });
    transport.stderr?.on('data', (c) => (stderr += String(c)));
    const client = new Client({ name: 'claude-desktop-like', version: '1.0.0' });
    try {
      await client.connect(transport);
      expect((await client.listTools()).tools.map((t) => t.name)).toEqual(expect.arrayContaining(['echo', 'add']));
    } catch (err) {
      (err as Error).message += `\n--- mcp-remote stderr ---\n${stderr.slice(-4000)}`;
      throw err;
    } finally {
      await client.close().catch(() => undefined);
    }
    expect(stderr).not.toContain('Please authorize');
  });
});
