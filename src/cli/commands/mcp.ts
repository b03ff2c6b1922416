import path from 'node:path';
import type { Command } from 'commander';
import { inert, relativeWhen } from '../../text.js';
import { resolve, shortId } from '../ids.js';
import { DaemonClient, usage } from '../client.js';
import { type Output, printFields, printJson, printRows, when } from '../output.js';
import type { z } from 'zod';
import type { mcpInstance } from '../../mcp/schemas.js';
import { secretFromStdin } from '../prompt.js';
import { CliError } from '../errors.js';
import { browserCommand, launch } from './open.js';
import { registerMcpHostConfigs } from './mcp-host-configs.js';

/** as the API answers it (the route's own schema; type-only, so the CLI never loads zod) */
type Instance = z.infer<typeof mcpInstance>;

const collect = (value: string, previous: string[] = []) => [...previous, value];

export function parseHeader(raw: string): { name: string; value: string } {
  const at = raw.indexOf(':');
  if (at <= 0) throw usage(`--header takes "Name: value", not "${raw.slice(0, 40)}".`);
  return { name: raw.slice(0, at).trim(), value: raw.slice(at + 1).trim() };
}

const toolList = (raw: string) => raw.split(',').map((t) => t.trim()).filter(Boolean);

/**
 * One `--env`: `KEY=VALUE`, or `KEY` alone for the value of KEY in this shell's environment (so
 * that a secret need not be typed on the command line).
 */
export function parseEnv(raw: string, env: Record<string, string | undefined>): { name: string; value: string } {
  const at = raw.indexOf('=');
  // the value may be a secret: never repeated back
  if (at === 0) throw usage('--env takes KEY=VALUE (or KEY alone, for its value in this shell): the name before "=" is missing.');
  if (at > 0) return { name: raw.slice(0, at), value: raw.slice(at + 1) };
  const value = env[raw];
  if (value === undefined) throw usage(`--env ${inert(raw, 100)}: there is no ${inert(raw, 100)} in this environment to take the value from (give --env ${inert(raw, 100)}=VALUE).`);
  return { name: raw, value };
}

/** A command line as a person would type it: each word quoted when the shell would need it. */
export function commandLine(command: string, args: string[]): string {
  const word = (w: string) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`);
  return inert([command, ...args].map(word).join(' '), 2000);
}

/** A command instance's processes in a few words: status, how many live, the last exit and when. */
export function processesText(p: Instance['processes'], now = Date.now()): string {
  if (!p) return '';
  const parts = [p.status, `${p.live} live`];
  const e = p.last_exit;
  if (e) parts.push(`last exit: ${e.signal ? `signal ${e.signal}` : `code ${e.code}`} (${e.reason}) ${relativeWhen(e.at, now)}`);
  return parts.join(', ');
}

interface AddOptions {
  name: string;
  url?: string;
  header: string[];
  env: string[];
  cwd?: string;
  allowTools?: string;
  disabled?: boolean;
  try: boolean;
  json?: boolean;
  oauthClientId?: string;
  oauthClientSecretStdin?: boolean;
  oauthScope?: string;
}

/** The body `svc mcp add` sends: the command form when a command line follows `--`, the HTTP form otherwise. */
export function addBody(opts: AddOptions, commandWords: string[], env: Record<string, string | undefined>, cwd: string, oauthSecret?: string): Record<string, unknown> {
  const common = {
    name: opts.name,
    ...(opts.allowTools !== undefined ? { allow_tools: toolList(opts.allowTools) } : {}),
    ...(opts.disabled ? { enabled: false } : {}),
  };
  if (commandWords.length === 0) {
    if (!opts.url) throw usage('svc mcp add needs --url URL (an HTTP server), or -- COMMAND [ARG]... (a command server svc runs).');
    if (opts.env.length > 0 || opts.cwd !== undefined) throw usage('--env and --cwd are for a command server: give its command line after --.');
    const oauth = { ...(opts.oauthClientId ? { client_id: opts.oauthClientId } : {}), ...(oauthSecret ? { client_secret: oauthSecret } : {}), ...(opts.oauthScope ? { scope: opts.oauthScope } : {}) };
    return { ...common, url: opts.url, headers: opts.header.map(parseHeader), ...(Object.keys(oauth).length ? { oauth } : {}) };
  }
  if (opts.header.length > 0) throw usage('--header is for an HTTP server; a command server takes --env KEY=VALUE.');
  if (opts.oauthClientId || opts.oauthScope) throw usage('--oauth-client-id and --oauth-scope are for an HTTP server that signs in with OAuth, not a command server.');
  const [program, ...args] = commandWords;
  const command = {
    command: program,
    args,
    env: opts.env.map((e) => parseEnv(e, env)),
    ...(opts.cwd !== undefined ? { cwd: path.resolve(cwd, opts.cwd) } : {}),
  };
  return { ...common, command, ...(opts.url ? { url: opts.url } : {}), ...(opts.try ? {} : { try: false }) };
}

export function registerMcp(program: Command, o: Output): void {
  const mcp = program
    .command('mcp')
    .description('Your MCP server instances, which you can grant to apps')
    .addHelpText(
      'after',
      `
Examples:
  $ svc mcp add --name files --url http://127.0.0.1:3001/mcp --header "Authorization: Bearer $TOKEN"
  $ svc mcp add --name search --url http://127.0.0.1:3002/mcp --allow-tools search,fetch
  $ svc mcp add --name filesystem -- npx -y @modelcontextprotocol/server-filesystem ~/notes
  $ svc mcp add --name github --env GITHUB_TOKEN -- github-mcp-server stdio
  $ svc mcp list --json
  $ svc mcp show 9b1e...
  $ svc mcp disable 9b1e...
  $ svc mcp enable 9b1e...
  $ svc mcp allow-tools 9b1e... search,fetch
  $ svc mcp add --name linear --url https://mcp.linear.app/mcp    # signs in with OAuth: then
  $ svc mcp login 9b1e...
  $ svc mcp logout 9b1e...
  $ svc mcp remove 9b1e...
`,
    );
  const connect = (cmd: Command) => DaemonClient.connect(cmd.optsWithGlobals(), o.env, o.err);
  /** A connection and the full id of one of your instances, from the id or a unique prefix. */
  const target = async (cmd: Command, typed: string) => {
    const client = await connect(cmd);
    return { client, id: await resolve(client, 'instance', typed) };
  };
  const enc = encodeURIComponent;

  mcp
    .command('add')
    .description('Register an MCP server: one at a URL, or (admins only) a command svc runs, after --; header and env values are stored encrypted, never shown again')
    .argument('[command...]', 'after --: the command line of a command server (run with no shell)')
    .requiredOption('--name <name>', 'a name for you to recognise it')
    .option('--url <url>', 'the MCP server URL (Streamable HTTP); for a command server, the URL apps name it by (default stdio://<name>)')
    .option('--header <"Name: value">', 'a header svc sends upstream (repeatable)', collect, [])
    .option('--env <KEY=VALUE>', "a command server's variable (repeatable; KEY alone takes its value from this shell)", collect, [])
    .option('--cwd <dir>', 'the directory a command server runs in')
    .option('--allow-tools <a,b>', 'only these tools are visible and callable')
    .option('--disabled', 'add it disabled')
    .option('--no-try', "don't start a command server once to check it before adding it")
    .option('--oauth-client-id <id>', 'for a server that signs in with OAuth: a client you registered at its authorization server')
    .option('--oauth-client-secret-stdin', "read that client's secret from standard input (stored encrypted, never shown)")
    .option('--oauth-scope <scopes>', 'the scopes to ask for at sign-in ("a b"), instead of those the server lists')
    .option('--json', 'machine-readable output')
    .action(async (commandWords: string[], opts: AddOptions, cmd: Command) => {
      if (opts.oauthClientSecretStdin && !opts.oauthClientId) throw usage('--oauth-client-secret-stdin goes with --oauth-client-id.');
      const secret = opts.oauthClientSecretStdin ? await secretFromStdin(o.stdin) : undefined;
      if (opts.oauthClientSecretStdin && !secret) throw usage('--oauth-client-secret-stdin read an empty secret.');
      const body = addBody(opts, commandWords, o.env ?? process.env, process.cwd(), secret);
      const { body: res } = await (await connect(cmd)).request<{ instance: Instance }>('POST', '/svc/v1/mcps', body);
      if (opts.json) return printJson(o, res.instance);
      const m = res.instance;
      o.out(`${m.id}\n`);
      if (m.command) {
        const vars = m.command.env_names.length ? ` Its variables (${m.command.env_names.join(', ')}) are stored encrypted and never shown again.` : '';
        o.err(`Added ${m.name}, a command server svc runs: ${commandLine(m.command.command, m.command.args)}.${vars}\nApps name it ${m.url}; MCP hosts connect to ${m.proxy_url} (they sign in through svc).\n`);
        return;
      }
      o.err(`Added ${m.name} (${m.url}).\nMCP hosts connect to ${m.proxy_url} (they sign in through svc).\n`);
      if (m.auth.kind === 'oauth') o.err(`The server signs in with OAuth: it needs you to sign in before apps can use it. Run: svc mcp login ${m.id}\n`);
    });

  mcp
    .command('list')
    .description('List your instances')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }, cmd: Command) => {
      const { body } = await (await connect(cmd)).request<{ data: Instance[] }>('GET', '/svc/v1/mcps');
      if (opts.json) return printJson(o, body.data);
      printRows(o, body.data, [
        // the id and both URLs go into other commands and MCP hosts: never cut
        { header: 'id', value: (m) => (o.isTTY ? shortId(m.id) : m.id), copy: true },
        { header: 'name', value: (m) => m.name },
        { header: 'url', value: (m) => m.url, copy: true },
        { header: 'proxy url', value: (m) => m.proxy_url, copy: true },
        { header: 'enabled', value: (m) => (m.enabled ? 'yes' : 'no') },
        { header: 'tools', value: (m) => (m.allow_tools ? m.allow_tools.join(',') : 'all') },
        { header: 'headers', value: (m) => m.header_names.join(',') },
        { header: 'transport', value: (m) => m.transport ?? 'http' },
        // a command server's variables by name only: the values never leave svc
        { header: 'env', value: (m) => (m.command ? m.command.env_names.join(',') : '') },
        { header: 'processes', value: (m) => processesText(m.processes) },
        { header: 'auth', value: (m) => (m.auth.kind === 'oauth' ? (m.auth.status === 'connected' ? 'signed in' : 'needs sign-in') : m.auth.kind) },
      ]);
    });

  mcp
    .command('show <id>')
    .description('One instance: its URL, what it runs (a command server), and its processes')
    .option('--json', 'machine-readable output')
    .action(async (typed: string, opts: { json?: boolean }, cmd: Command) => {
      const { client, id } = await target(cmd, typed);
      const { body } = await client.request<{ instance: Instance }>('GET', `/svc/v1/mcps/${enc(id)}`);
      if (opts.json) return printJson(o, body.instance);
      printInstance(o, body.instance);
    });

  for (const [verb, enabled] of [
    ['enable', true],
    ['disable', false],
  ] as const) {
    mcp
      .command(`${verb} <id>`)
      .description(`${verb === 'enable' ? 'Enable' : 'Disable'} an instance`)
      .action(async (typed: string, _opts, cmd: Command) => {
        const { client, id } = await target(cmd, typed);
        await client.request('PATCH', `/svc/v1/mcps/${enc(id)}`, { enabled });
        o.err(`${verb === 'enable' ? 'Enabled' : 'Disabled'} ${id}.\n`);
      });
  }

  mcp
    .command('allow-tools <id> <tools>')
    .description('Set the tool allow-list ("a,b"; "*" allows every tool)')
    .action(async (typed: string, tools: string, _opts, cmd: Command) => {
      const { client, id } = await target(cmd, typed);
      await client.request('PATCH', `/svc/v1/mcps/${enc(id)}`, { allow_tools: tools.trim() === '*' ? null : toolList(tools) });
      o.err(`Updated ${id}.\n`);
    });

  mcp
    .command('remove <id>')
    .description('Remove an instance')
    .action(async (typed: string, _opts, cmd: Command) => {
      const { client, id } = await target(cmd, typed);
      await client.request('DELETE', `/svc/v1/mcps/${enc(id)}`);
      o.err(`Removed ${id}.\n`);
    });

  registerMcpSignIn(mcp, o, target);
  registerMcpHostConfigs(mcp, o);
}

type Target = (cmd: Command, typed: string) => Promise<{ client: DaemonClient; id: string }>;
type CliLogin = { authorization_url: string; login: string; expires_at: string };

/** Asks svc how the sign-in went until it is connected, refused, or its 10 minutes are over. */
async function waitForLogin(client: DaemonClient, id: string, name: string, started: CliLogin): Promise<void> {
  // this machine's clock, not the daemon's: svc itself says `unknown` once the sign-in expired
  const deadline = Date.now() + 10 * 60_000;
  for (;;) {
    const { body } = await client.request<{ status: string; why?: string }>('POST', `/svc/v1/mcps/${encodeURIComponent(id)}/oauth/login/status`, { login: started.login });
    if (body.status === 'connected') return;
    if (body.status === 'refused') throw new CliError(`${name} is not signed in: ${body.why ?? 'the sign-in was refused'}. Run svc mcp login again.`);
    if (body.status === 'unknown' || Date.now() > deadline) throw new CliError(`${name} is still not signed in after 10 minutes; run svc mcp login again.`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** `svc mcp login` and `logout`: the sign-in svc holds for a server that uses OAuth. */
function registerMcpSignIn(mcp: Command, o: Output, target: Target): void {
  const enc = encodeURIComponent;
  mcp
    .command('login <id>')
    .description('Sign in to an instance whose server uses OAuth: opens the sign-in in your browser, waits until it is connected')
    .option('--print', "print the server's sign-in URL instead of opening it")
    .action(async (typed: string, opts: { print?: boolean }, cmd: Command) => {
      const { client, id } = await target(cmd, typed);
      const { instance } = (await client.request<{ instance: Instance }>('GET', `/svc/v1/mcps/${enc(id)}`)).body;
      if (instance.auth.kind !== 'oauth') throw new CliError(`${instance.name} does not sign in with OAuth (its server asked for no sign-in when it was added).`);
      // the server's own authorization URL, whose state only this login (its secret) may finish, in any browser
      const { body: started } = await client.request<CliLogin>('POST', `/svc/v1/mcps/${enc(id)}/oauth/login`);
      const url = started.authorization_url;
      if (opts.print) o.out(`${url}\n`);
      else {
        const [file, args] = browserCommand(url, o.platform ?? process.platform, o.env ?? process.env);
        await (o.run ?? launch)(file, args).catch(() => o.out(`${url}\n`));
      }
      o.err(`Sign in to ${instance.name} in the browser (within 10 minutes); waiting…\n`);
      await waitForLogin(client, id, instance.name, started);
      o.err(`Connected: ${instance.name} is signed in. Apps you grant it use the sign-in without seeing it.\n`);
    });

  mcp
    .command('logout <id>')
    .description("Forget an instance's sign-in (revoked at its server where it takes revocations)")
    .action(async (typed: string, _opts, cmd: Command) => {
      const { client, id } = await target(cmd, typed);
      const { body } = await client.request<{ revoked: boolean }>('POST', `/svc/v1/mcps/${enc(id)}/oauth/logout`);
      o.err(`Signed out of ${id}${body.revoked ? ' (revoked at the server)' : ''}.\n`);
    });
}

/** `svc mcp show`: one instance, field by field; env and header values are never in the answer. */
function printInstance(o: Output, m: Instance): void {
  const c = m.command;
  const p = m.processes;
  const e = p?.last_exit;
  printFields(o, [
    ['id', m.id],
    ['name', m.name],
    ['transport', m.transport ?? 'http'],
    ['url', m.url],
    ['proxy url', m.proxy_url],
    ['enabled', m.enabled ? 'yes' : 'no'],
    ['tools', m.allow_tools ? m.allow_tools.join(',') : 'all'],
    ...(c
      ? ([
          ['command', commandLine(c.command, c.args)],
          ['cwd', c.cwd ?? "svc's own"],
          ['env', c.env_names.join(',')],
        ] as [string, unknown][])
      : ([['headers', m.header_names.join(',')]] as [string, unknown][])),
    ...(p
      ? ([
          ['status', p.status],
          ['live', p.live],
          ['last exit', e ? `${e.signal ? `signal ${e.signal}` : `code ${e.code}`} (${e.reason}) ${when(o, e.at)}` : 'none'],
        ] as [string, unknown][])
      : []),
    ['created', when(o, m.created_at)],
  ]);
}
