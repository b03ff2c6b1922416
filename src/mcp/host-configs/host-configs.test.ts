/** Host configs as units: reading each host's file, resolving its references, the import plan, and the export. */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { exportConfig, serverKeys } from './export.js';
import { HostConfigError, type HostServer, parseHostConfig, stripJsonComments } from './parse.js';
import { hostConfigPath, workspaceFolderOf } from './paths.js';
import { checkServers, describeEntry, instanceBody, planImport, secretNames } from './plan.js';
import { inputEnvName, type ResolveContext, resolveServers } from './resolve.js';

const FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'test', 'fixtures', 'host-configs');
const fixture = (name: string) => {
  const file = path.join(FIXTURES, name);
  return { file, text: readFileSync(file, 'utf8') };
};
const parseFixture = (name: string) => {
  const { file, text } = fixture(name);
  return parseHostConfig(text, file);
};
const ctx = (env: Record<string, string> = {}, over: Partial<ResolveContext> = {}): ResolveContext => ({ env, home: '/home/sam', workspaceFolder: null, ...over });
const byName = (servers: HostServer[]) => Object.fromEntries(servers.map((s) => [s.name, s]));

/** The problems a HostConfigError names, or a failure when none is thrown. */
function problemsOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(HostConfigError);
    return (err as HostConfigError).problems;
  }
  throw new Error('expected a HostConfigError');
}

describe('reading each host\'s file', () => {
  it('Claude Desktop: every mcpServers entry a command, with its args and env; the rest of the file passed over', () => {
    const config = parseFixture('claude_desktop_config.json');
    expect(config.servers.map((s) => s.name)).toEqual(['filesystem', 'memory', 'github', 'sqlite', 'git']);
    const s = byName(config.servers);
    expect(s.filesystem.entry).toEqual({ kind: 'command', command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', '/Users/sam/Desktop', '/Users/sam/Downloads'], env: [], cwd: null });
    expect(s.github.entry).toMatchObject({ kind: 'command', command: 'docker', env: [{ name: 'GITHUB_PERSONAL_ACCESS_TOKEN', value: 'fixture-desktop-github-token-7f3a' }] });
    expect(s.github.where).toBe('mcpServers.github');
    expect(config.duplicates).toEqual([]);
  });

  it('Cursor: commands and url entries (an SSE one and one with headers)', () => {
    const s = byName(parseFixture('cursor-mcp.json').servers);
    expect(s.linear.entry).toEqual({ kind: 'remote', transport: 'http', url: 'https://mcp.linear.app/sse', headers: [] });
    expect(s.docs.entry).toEqual({ kind: 'remote', transport: 'http', url: 'https://docs.example.com/mcp', headers: [{ name: 'Authorization', value: 'Bearer ${env:CURSOR_FIXTURE_DOCS_TOKEN}' }] });
    expect(s.postgres.entry.kind).toBe('command');
  });

  it('Claude Code: the user servers and each project\'s, a name given twice kept once and said', () => {
    const config = parseFixture('claude.json');
    expect(config.servers.map((s) => [s.name, s.where])).toEqual([
      ['sequential-thinking', 'mcpServers.sequential-thinking'],
      ['sentry', 'mcpServers.sentry'],
      ['shop-db', 'projects["/home/sam/src/shop"].mcpServers.shop-db'],
      ['stripe', 'projects["/home/sam/src/shop"].mcpServers.stripe'],
    ]);
    expect(config.duplicates).toMatchObject([{ name: 'sentry', where: 'projects["/home/sam/src/blog"].mcpServers.sentry', kept: 'mcpServers.sentry', server: { entry: { transport: 'sse' } } }]);
    expect(byName(config.servers).sentry.entry).toMatchObject({ kind: 'remote', transport: 'http', url: 'https://mcp.sentry.dev/mcp' });
  });

  it('VS Code: servers and inputs from a file with comments and a trailing comma; a type-less entry with a command is stdio', () => {
    const config = parseFixture('vscode-project/.vscode/mcp.json');
    expect(config.inputs).toEqual([
      { id: 'perplexity-key', description: 'Perplexity API Key', password: true },
      { id: 'github_token', description: 'GitHub Personal Access Token', password: true },
    ]);
    const s = byName(config.servers);
    expect(Object.keys(s)).toEqual(['Perplexity', 'memory', 'github', 'fetch']);
    expect(s.memory.entry).toMatchObject({ kind: 'command', cwd: '${workspaceFolder}' });
    expect(s.github.entry).toMatchObject({ kind: 'remote', transport: 'http', headers: [{ name: 'Authorization', value: 'Bearer ${input:github_token}' }] });
  });

  it('Windsurf: serverUrl is the url, and disabled: true imports the server disabled', () => {
    const s = byName(parseFixture('windsurf-mcp_config.json').servers);
    expect(s.figma.entry).toMatchObject({ kind: 'remote', url: 'https://mcp.figma.com/mcp' });
    expect(s.puppeteer.enabled).toBe(false);
    expect(s.github.enabled).toBe(true);
  });

  it('VS Code settings.json: the servers and inputs under "mcp"', () => {
    const config = parseHostConfig(JSON.stringify({ 'editor.fontSize': 13, mcp: { inputs: [{ type: 'promptString', id: 'k' }], servers: { a: { type: 'sse', url: 'http://127.0.0.1:9/sse' } } } }), 'settings.json');
    expect(config.servers[0]).toMatchObject({ name: 'a', where: 'mcp.servers.a', entry: { transport: 'sse' } });
    expect(config.inputs.map((i) => i.id)).toEqual(['k']);
  });

  it('comments and trailing commas go, strings with // or /* in them stay, positions are kept', () => {
    const text = '{\n  // a comment\n  "a": "http://x//y /* not a comment */", /* block */\n  "b": [1, 2,],\n}';
    const plain = stripJsonComments(text);
    expect(plain).toHaveLength(text.length);
    expect(JSON.parse(plain)).toEqual({ a: 'http://x//y /* not a comment */', b: [1, 2] });
    expect(JSON.parse(stripJsonComments('{"a": "quote \\" // inside"}'))).toEqual({ a: 'quote " // inside' });
  });
});

describe('what is refused, named by the file and the entry (never a value)', () => {
  it('bad JSON says where it breaks, and quotes nothing of the file', () => {
    const problems = problemsOf(() => parseHostConfig('{\n  "mcpServers": {\n    "a": { "command": "npx" "secret-value" }\n  }\n}', '/tmp/x.json'));
    expect(problems).toEqual([expect.stringMatching(/^the JSON is malformed at line 3, column \d+$/)]);
    expect(problems.join()).not.toContain('secret-value');
    expect(problemsOf(() => parseHostConfig('{"mcpServers": {', 'x.json'))[0]).toMatch(/^the JSON ends early/);
    expect(new HostConfigError('/tmp/x.json', ['one']).message).toBe('/tmp/x.json: one');
  });

  it('a file with no block of servers, or not an object', () => {
    expect(problemsOf(() => parseHostConfig('{"theme": "dark"}', 'f'))).toEqual(['has no "mcpServers" or "servers" block (nor projects with one)']);
    expect(problemsOf(() => parseHostConfig('[]', 'f'))[0]).toMatch(/expected a JSON object/);
  });

  it('every entry of an unknown shape at once, each by its path', () => {
    const problems = problemsOf(() =>
      parseHostConfig(
        JSON.stringify({
          mcpServers: {
            nothing: { description: 'neither command nor url' },
            both: { command: 'x', url: 'http://127.0.0.1/mcp' },
            wrongType: { type: 'websocket', url: 'ws://x' },
            stdioWithUrl: { type: 'stdio', url: 'http://127.0.0.1/mcp' },
            badArgs: { command: 'x', args: 'not an array' },
            badEnv: { command: 'x', env: { A: { nested: 'secret-nested' } } },
            fromFile: { command: 'x', envFile: '${workspaceFolder}/.env' },
            helper: { type: 'http', url: 'https://x.example/mcp', headersHelper: '/bin/get-token' },
            notObject: 'npx server',
            'two words': { url: 42 },
          },
        }),
        'cfg.json',
      ),
    );
    expect(problems).toEqual([
      'mcpServers.nothing: has neither "command" nor "url": svc cannot tell how to reach it',
      'mcpServers.both: has both "command" and "url": it must be one or the other',
      'mcpServers.wrongType.type: "websocket" is not a type svc knows (stdio, http, sse)',
      'mcpServers.stdioWithUrl: type stdio takes a "command" to run',
      'mcpServers.badArgs.args: expected an array of strings',
      'mcpServers.badEnv.env.A: expected text',
      'mcpServers.fromFile: envFile (variables read from a file) is not imported: put the variables in "env"',
      'mcpServers.helper: headersHelper (a command that makes the headers) is not imported: put the headers in "headers"',
      'mcpServers.notObject: expected an object (a "command" or a "url")',
      'mcpServers["two words"].url: expected a URL (text)',
    ]);
    expect(problems.join()).not.toContain('secret-nested');
  });
});

describe('resolving references', () => {
  it('${env:NAME}, ${NAME} and ${NAME:-default} from the environment; ${input:ID} from SVC_INPUT_<ID>; ${workspaceFolder} for a project file', () => {
    const cursor = resolveServers(parseFixture('cursor-mcp.json'), ctx({ CURSOR_FIXTURE_PGPASSWORD: 'pg-pw', CURSOR_FIXTURE_DOCS_TOKEN: 'docs-tok' }));
    expect(byName(cursor).postgres.entry).toMatchObject({ env: [{ name: 'PGPASSWORD', value: 'pg-pw' }] });
    expect(byName(cursor).docs.entry).toMatchObject({ headers: [{ name: 'Authorization', value: 'Bearer docs-tok' }] });

    const code = resolveServers(parseFixture('claude.json'), ctx({ SHOP_DATABASE_URL: 'postgres://db', STRIPE_SECRET_KEY: 'sk_test' }));
    expect(byName(code)['shop-db'].entry).toMatchObject({ env: [{ name: 'DATABASE_URL', value: 'postgres://db' }, { name: 'LOG_LEVEL', value: 'warn' }] });
    const project = resolveServers(parseFixture('project.mcp.json'), ctx({ CONTEXT7_API_KEY: 'c7', PROJECT_ROOT: '/work/app' }));
    expect(byName(project).filesystem.entry).toMatchObject({ args: ['-y', '@modelcontextprotocol/server-filesystem', '/work/app'] });

    const { file, text } = fixture('vscode-project/.vscode/mcp.json');
    expect(workspaceFolderOf(file)).toBe(path.join(FIXTURES, 'vscode-project'));
    const vscode = byName(
      resolveServers(parseHostConfig(text, file), ctx({ [inputEnvName('perplexity-key')]: 'pplx-1', [inputEnvName('github_token')]: 'gh-1' }, { workspaceFolder: '/src/proj' })),
    );
    expect(vscode.Perplexity.entry).toMatchObject({ env: [{ name: 'PERPLEXITY_API_KEY', value: 'pplx-1' }] });
    expect(vscode.memory.entry).toMatchObject({ cwd: '/src/proj', env: [{ name: 'MEMORY_FILE_PATH', value: '/src/proj/.vscode/memory.jsonl' }] });
    expect(vscode.github.entry).toMatchObject({ headers: [{ name: 'Authorization', value: 'Bearer gh-1' }] });
    expect(inputEnvName('api-key')).toBe('SVC_INPUT_API_KEY');
    expect(inputEnvName('-api.key ')).toBe(inputEnvName('API_KEY'));
  });

  it('refuses each reference it cannot resolve by name, all at once, and never quotes a default or a value', () => {
    const config = parseHostConfig(
      JSON.stringify({
        servers: {
          a: { command: '${userHome}/bin/a', args: ['${file:/etc/secret}', '${command:pick}', '${HAS_DEFAULT:-secret-default}'], env: { K: '${input:api-key}', L: '${env:NOT_SET}' } },
          b: { type: 'http', url: 'https://${HOST_NOT_SET}/mcp', headers: { X: '${workspaceFolder}' } },
        },
        inputs: [{ type: 'promptString', id: 'api-key', description: 'The API key', password: true }],
      }),
      'mcp.json',
    );
    const problems = problemsOf(() => resolveServers(config, ctx({})));
    expect(problems).toEqual([
      'servers.a.args[0]: ${file:…} cannot be resolved by svc: give the value itself',
      'servers.a.args[1]: ${command:…} cannot be resolved by svc: give the value itself',
      'servers.a.env.K: ${input:api-key} is an input the host asks for ("The API key"): set SVC_INPUT_API_KEY to its value',
      'servers.a.env.L: ${env:NOT_SET} is not set in the environment',
      'servers.b.url: ${HOST_NOT_SET} is not set in the environment',
      "servers.b.headers.X: ${workspaceFolder} is known only for a file in a project's .vscode or .cursor folder",
    ]);
    expect(problems.join()).not.toContain('secret');
    const fine = { ...config, servers: config.servers.map((s) => (s.entry.kind === 'command' ? { ...s, entry: { ...s.entry, args: ['${HAS_DEFAULT:-d}'] } } : s)) };
    const resolved = byName(resolveServers(fine, ctx({ SVC_INPUT_API_KEY: 'k', NOT_SET: 'l', HOST_NOT_SET: 'h.example' }, { workspaceFolder: '/w' })));
    expect(resolved.a.entry).toMatchObject({ command: '/home/sam/bin/a', args: ['d'], env: [{ name: 'K', value: 'k' }, { name: 'L', value: 'l' }] });
    expect(resolved.b.entry).toMatchObject({ url: 'https://h.example/mcp', headers: [{ name: 'X', value: '/w' }] });
  });
});

describe('the import plan', () => {
  it('a name the person has is skipped, so a second import adds nothing; duplicates are skipped with where the kept one is', () => {
    const config = parseFixture('claude.json');
    const first = planImport(config, ['unrelated']);
    expect(first.add.map((s) => s.name)).toEqual(['sequential-thinking', 'sentry', 'shop-db', 'stripe']);
    expect(first.skip).toMatchObject([{ server: { name: 'sentry', where: 'projects["/home/sam/src/blog"].mcpServers.sentry' }, reason: 'duplicate', kept: 'mcpServers.sentry' }]);
    const second = planImport(config, first.add.map((s) => s.name));
    expect(second.add).toEqual([]);
    expect(second.skip.filter((s) => s.reason === 'exists').map((s) => s.server.name)).toEqual(['sequential-thinking', 'sentry', 'shop-db', 'stripe']);
    // only what is added is resolved: the second import needs none of the variables
    expect(resolveServers({ ...config, servers: second.add }, ctx({}))).toEqual([]);
  });

  it('bodies in the command and the HTTP form; what is shown names secrets, never their values', () => {
    const servers = byName(resolveServers(parseFixture('windsurf-mcp_config.json'), ctx({ WINDSURF_FIXTURE_GH_TOKEN: 'gh-secret', WINDSURF_FIXTURE_FIGMA_TOKEN: 'figma-secret' })));
    expect(instanceBody(servers.github)).toEqual({
      name: 'github',
      command: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-github'], env: [{ name: 'GITHUB_PERSONAL_ACCESS_TOKEN', value: 'gh-secret' }] },
    });
    expect(instanceBody(servers.figma)).toEqual({ name: 'figma', url: 'https://mcp.figma.com/mcp', headers: [{ name: 'X-Figma-Token', value: 'figma-secret' }] });
    expect(instanceBody(servers.puppeteer)).toMatchObject({ enabled: false });
    expect(secretNames(servers.github)).toEqual(['GITHUB_PERSONAL_ACCESS_TOKEN']);
    expect(describeEntry({ ...servers.github, entry: { kind: 'command', command: 'node', args: ['a b', "it's"], env: [], cwd: null } })).toBe("node 'a b' 'it'\\''s'");
  });

  it('checks each server by the daemon\'s rules before anything is sent', () => {
    const config = parseHostConfig(
      JSON.stringify({
        mcpServers: {
          a: { command: 'x', env: { 'BAD-NAME': 'v', OK: 'nul\u0000' }, cwd: 'relative/dir' },
          b: { url: 'ftp://files.example/mcp' },
          c: { url: 'https://user:pw@x.example/mcp' },
          d: { url: 'https://x.example/mcp', headers: { Host: 'x', 'Bad Header': 'v', X: 'line\nbreak' } },
        },
      }),
      'f.json',
    );
    const problems = problemsOf(() => checkServers('f.json', resolveServers(config, ctx())));
    expect(problems).toEqual([
      'mcpServers.a.env.BAD-NAME: must be a variable name (letters, digits and _, not starting with a digit)',
      'mcpServers.a.env.OK: its value must be at most 32768 characters, with no NUL',
      'mcpServers.a.cwd: must be an absolute directory',
      'mcpServers.b.url: must be an http or https URL',
      'mcpServers.c.url: must not carry credentials (put them in "headers")',
      'mcpServers.d.headers.Host: is a header svc sets itself',
      'mcpServers.d.headers["Bad Header"]: must be an HTTP header name',
      'mcpServers.d.headers.X: its value must be one line of printable Latin-1 text, at most 8192 characters',
    ]);
  });
});

describe('where each host keeps its file', () => {
  it('on Linux (XDG) and macOS', () => {
    const linux = { home: '/home/sam', platform: 'linux' as const, env: {} };
    const mac = { home: '/Users/sam', platform: 'darwin' as const, env: {} };
    expect(hostConfigPath('claude-desktop', linux)).toBe('/home/sam/.config/Claude/claude_desktop_config.json');
    expect(hostConfigPath('claude-desktop', { ...linux, env: { XDG_CONFIG_HOME: '/x/conf' } })).toBe('/x/conf/Claude/claude_desktop_config.json');
    expect(hostConfigPath('claude-desktop', mac)).toBe('/Users/sam/Library/Application Support/Claude/claude_desktop_config.json');
    expect(hostConfigPath('vscode', linux)).toBe('/home/sam/.config/Code/User/mcp.json');
    expect(hostConfigPath('vscode', mac)).toBe('/Users/sam/Library/Application Support/Code/User/mcp.json');
    expect(hostConfigPath('claude-code', mac)).toBe('/Users/sam/.claude.json');
    expect(hostConfigPath('cursor', linux)).toBe('/home/sam/.cursor/mcp.json');
    expect(hostConfigPath('windsurf', mac)).toBe('/Users/sam/.codeium/windsurf/mcp_config.json');
    expect(workspaceFolderOf('/src/app/.cursor/mcp.json')).toBe('/src/app');
    expect(workspaceFolderOf('/home/sam/.claude.json')).toBeNull();
  });
});

describe('the export', () => {
  const instances = [
    { name: 'files', proxy_url: 'http://127.0.0.1:7878/svc/v1/apps/mcps/i1/mcp' },
    { name: 'my files', proxy_url: 'http://127.0.0.1:7878/svc/v1/apps/mcps/i2/mcp' },
    { name: 'my/files', proxy_url: 'https://svc.example/svc/v1/apps/mcps/i3/mcp' },
  ];

  it('each host\'s own block and entry, the key in the headers', () => {
    expect(exportConfig('cursor', instances.slice(0, 1), null)).toEqual({ mcpServers: { files: { url: instances[0].proxy_url } } });
    expect(exportConfig('claude-code', instances.slice(0, 1), 'svc_k')).toEqual({
      mcpServers: { files: { type: 'http', url: instances[0].proxy_url, headers: { Authorization: 'Bearer svc_k' } } },
    });
    expect(exportConfig('vscode', instances.slice(0, 1), 'svc_k')).toEqual({ servers: { files: { type: 'http', url: instances[0].proxy_url, headers: { Authorization: 'Bearer svc_k' } } } });
  });

  it('Claude Desktop runs mcp-remote, the header from a variable of its entry; plain http off this machine is allowed by name', () => {
    expect(exportConfig('claude-desktop', instances.slice(0, 1), null)).toEqual({ mcpServers: { files: { command: 'npx', args: ['mcp-remote', instances[0].proxy_url] } } });
    expect(exportConfig('claude-desktop', instances.slice(0, 1), 'svc_k')).toEqual({
      mcpServers: {
        files: { command: 'npx', args: ['mcp-remote', instances[0].proxy_url, '--header', 'Authorization:${AUTH_HEADER}'], env: { AUTH_HEADER: 'Bearer svc_k' } },
      },
    });
    const lan = exportConfig('claude-desktop', [{ name: 'x', proxy_url: 'http://192.168.1.5:7878/svc/v1/apps/mcps/i/mcp' }], null) as { mcpServers: { x: { args: string[] } } };
    expect(lan.mcpServers.x.args).toContain('--allow-http');
  });

  it('names become keys hosts take, each once', () => {
    expect(serverKeys(['files', 'my files', 'my/files', '***', 'files'])).toEqual(['files', 'my-files', 'my-files-2', 'server', 'files-2']);
    expect(Object.keys((exportConfig('cursor', instances, null) as { mcpServers: object }).mcpServers)).toEqual(['files', 'my-files', 'my-files-2']);
  });
});
