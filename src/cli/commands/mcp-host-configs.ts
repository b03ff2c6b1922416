/**
 * `svc mcp import` and `svc mcp export`: a person's MCP host configs brought in as instances, and
 * their hosts pointed at svc's proxy URLs. Import reads, resolves and checks every server of the
 * file before it adds the first, and takes back what it added if the daemon refuses one later, so
 * a file is imported whole or not at all.
 */
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { type Command, Option } from 'commander';
import type { z } from 'zod';
import { AppError } from '../../errors.js';
import { AUTH_HEADER_VARIABLE, EXPORT_HOSTS, EXPORT_PLACE, type ExportHost, exportConfig } from '../../mcp/host-configs/export.js';
import { type HostConfig, HostConfigError, type HostServer, parseHostConfig } from '../../mcp/host-configs/parse.js';
import { HOST_KINDS, type HostKind, hostConfigPath, workspaceFolderOf } from '../../mcp/host-configs/paths.js';
import { checkServers, describeEntry, type ImportPlan, instanceBody, planImport, secretNames } from '../../mcp/host-configs/plan.js';
import { resolveServers } from '../../mcp/host-configs/resolve.js';
import type { mcpInstance } from '../../mcp/schemas.js';
import { DaemonClient, usage } from '../client.js';
import { CliError, EXIT, exitCodeFor } from '../errors.js';
import { resolveId, shortId } from '../ids.js';
import { inert } from '../../text.js';
import { type Output, printJson, printRows } from '../output.js';

/** as the API answers it (the route's own schema; type-only, so the CLI never loads zod) */
type Instance = z.infer<typeof mcpInstance>;

type Result = 'added' | 'would add' | 'exists' | 'duplicate';

/** One line of what import did (or would do) with a server of the file. */
interface Row {
  name: string;
  where: string;
  result: Result;
  transport: 'command' | 'http';
  /** the command line or the URL, as the file writes it */
  runs: string;
  secrets: string[];
  instance?: Instance;
  kept?: string;
}

const enc = encodeURIComponent;

/** The file import reads: FILE, or the host's usual place; and where a `${workspaceFolder}` points. */
function sourceFile(file: string | undefined, from: HostKind | undefined, o: Output): string {
  const env = o.env ?? process.env;
  if (file !== undefined && from !== undefined) throw usage('Give the file to import or --from HOST (its usual place), not both.');
  if (file !== undefined) return path.resolve(file);
  if (from === undefined) throw usage('Name the file to import, or --from HOST for that host\'s own file (claude-desktop, claude-code, cursor, vscode, windsurf).');
  return hostConfigPath(from, { home: env.HOME || os.homedir(), platform: o.platform ?? process.platform, env });
}

async function readConfigText(file: string, from: HostKind | undefined): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code === 'EISDIR' ? 'it is a directory' : (code ?? 'unreadable');
    const place = from && code === 'ENOENT' ? ` (where ${from} keeps its config; give the file's path if it is elsewhere)` : '';
    throw new CliError(`${file}: cannot be read: ${why}${place}. Nothing imported.`);
  }
}

/** The file read and its servers known, as written: nothing is sent before this succeeds. */
async function loadConfig(file: string, from: HostKind | undefined, o: Output): Promise<HostConfig> {
  return asCliError(o, async () => parseHostConfig(await readConfigText(file, from), file));
}

/** The servers to add with their references resolved, each checked by the daemon's rules: nothing is sent before this succeeds. */
function resolvedToAdd(config: HostConfig, plan: ImportPlan, o: Output): Promise<HostServer[]> {
  const env = o.env ?? process.env;
  return asCliError(o, () => {
    const servers = resolveServers({ ...config, servers: plan.add }, { env, home: env.HOME || os.homedir(), workspaceFolder: workspaceFolderOf(config.file) });
    checkServers(config.file, servers);
    return servers;
  });
}

/**
 * A problem of the file as the CLI says it: the file and each entry's problem on a line of its
 * own (cleaned of control characters, as the file's names may hold any), then that nothing was imported.
 */
async function asCliError<T>(o: Output, fn: () => T | Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (!(err instanceof HostConfigError) || err.problems.length === 1) throw err instanceof HostConfigError ? new CliError(`${err.message}. Nothing imported.`) : err;
    o.err(`svc: ${inert(err.file, 1000)}: ${err.problems.length} problems:\n${err.problems.map((p) => `  ${inert(p, 1000)}\n`).join('')}`);
    throw new CliError('Nothing imported.');
  }
}

/** Command servers are for admins: said before anything is added, rather than refused half-way. */
async function requireAdminFor(client: DaemonClient, servers: HostServer[]): Promise<void> {
  const commands = servers.filter((s) => s.entry.kind === 'command');
  if (commands.length === 0) return;
  const { body } = await client.request<{ user: { username: string; role: string } }>('GET', '/svc/v1/auth/me');
  if (body.user.role === 'admin') return;
  throw new CliError(
    `Only an admin can add command servers (svc runs them as its own OS user), and this file has ${commands.length}: ${commands.map((s) => s.name).join(', ')}. Nothing imported.`,
    EXIT.auth,
  );
}

/**
 * Adds the plan's servers one by one; when the daemon refuses one, the ones added before it are
 * removed again and the refusal is said with the entry it was for.
 */
async function addAll(client: DaemonClient, servers: HostServer[], tryCommands: boolean): Promise<Map<string, Instance>> {
  const added = new Map<string, Instance>();
  for (const server of servers) {
    const body = { ...instanceBody(server), ...(server.entry.kind === 'command' && !tryCommands ? { try: false } : {}) };
    try {
      added.set(server.where, (await client.request<{ instance: Instance }>('POST', '/svc/v1/mcps', body)).body.instance);
    } catch (err) {
      const left = await takeBack(client, [...added.values()]);
      const undone = added.size === 0 ? '' : left.length === 0 ? ` The ${added.size} added before it were removed again.` : ` Could not remove ${left.join(', ')} again: remove ${left.length === 1 ? 'it' : 'them'} with \`svc mcp remove\`.`;
      const message = `${server.where} (${server.name}): ${(err instanceof Error ? err.message : String(err)).replace(/\.$/, '')}. Nothing imported.${undone}`;
      throw new CliError(message, err instanceof AppError ? exitCodeFor(err) : EXIT.error);
    }
  }
  return added;
}

/** Removes instances this import added; answers the ids it could not remove. */
async function takeBack(client: DaemonClient, instances: Instance[]): Promise<string[]> {
  const left: string[] = [];
  for (const m of instances.reverse()) {
    await client.request('DELETE', `/svc/v1/mcps/${enc(m.id)}`).catch(() => left.push(m.id));
  }
  return left;
}

/** What import did (or would do) with each server, shown as the file writes it (references unresolved). */
function rowsOf(plan: ImportPlan, added: Map<string, Instance> | null): Row[] {
  const row = (s: HostServer, result: Result, extra: Partial<Row> = {}): Row => ({
    name: s.name,
    where: s.where,
    result,
    transport: s.entry.kind === 'command' ? 'command' : 'http',
    runs: describeEntry(s),
    secrets: secretNames(s),
    ...extra,
  });
  const rows = plan.add.map((s) => row(s, added ? 'added' : 'would add', added ? { instance: added.get(s.where) } : {}));
  for (const skip of plan.skip) rows.push(row(skip.server, skip.reason, skip.kept ? { kept: skip.kept } : {}));
  return rows;
}

const RESULT_TEXT: Record<Result, string> = { added: 'added', 'would add': 'would add', exists: 'skipped: you have one of that name', duplicate: 'skipped: named twice in the file' };

function printImport(o: Output, file: string, rows: Row[], dryRun: boolean, json: boolean | undefined): void {
  if (json) {
    return printJson(o, {
      file,
      dry_run: dryRun,
      servers: rows.map((r) => ({
        name: r.name,
        where: r.where,
        result: r.result,
        transport: r.transport,
        runs: r.runs,
        [r.transport === 'command' ? 'env_names' : 'header_names']: r.secrets,
        ...(r.kept ? { kept: r.kept } : {}),
        ...(r.instance ? { id: r.instance.id, url: r.instance.url, proxy_url: r.instance.proxy_url } : {}),
      })),
    });
  }
  printRows(o, rows, [
    { header: 'name', value: (r) => r.name },
    { header: 'result', value: (r) => RESULT_TEXT[r.result] },
    { header: 'transport', value: (r) => r.transport },
    { header: 'runs', value: (r) => r.runs },
    { header: 'secrets', value: (r) => r.secrets.join(',') },
    { header: 'id', value: (r) => (r.instance ? (o.isTTY ? shortId(r.instance.id) : r.instance.id) : ''), copy: true },
  ]);
  const count = (result: Result) => rows.filter((r) => r.result === result).length;
  const skipped = count('exists') + count('duplicate');
  const also = skipped > 0 ? `; ${skipped} skipped (${count('exists')} you already have by name, ${count('duplicate')} named twice in the file)` : '';
  if (dryRun) o.err(`Would add ${count('would add')} of ${file}${also}. Nothing added (--dry-run).\n`);
  else o.err(`Added ${count('added')} of ${file}${also}.${count('added') > 0 ? ' `svc mcp export --for HOST` prints the config that points a host at them.' : ''}\n`);
}

function registerImport(mcp: Command, o: Output): void {
  mcp
    .command('import [file]')
    .description("Add the MCP servers of a host's config as your instances (env and header values are stored encrypted, never shown again)")
    .addOption(new Option('--from <host>', "read that host's own config at its usual place, instead of FILE").choices(HOST_KINDS))
    .option('--dry-run', 'say what would be added; add nothing')
    .option('--no-try', 'store command servers without starting each once first')
    .option('--json', 'machine-readable output')
    .addHelpText(
      'after',
      `
Examples:
  $ svc mcp import --from claude-desktop --dry-run
  $ svc mcp import ~/.cursor/mcp.json
  $ SVC_INPUT_API_KEY=... svc mcp import .vscode/mcp.json     # \${input:api-key}
  $ svc mcp import --from claude-code --json
`,
    )
    .action(async (file: string | undefined, opts: { from?: HostKind; dryRun?: boolean; try: boolean; json?: boolean }, cmd: Command) => {
      const target = sourceFile(file, opts.from, o);
      const config = await loadConfig(target, opts.from, o);
      const client = await DaemonClient.connect(cmd.optsWithGlobals(), o.env, o.err);
      const { body } = await client.request<{ data: Instance[] }>('GET', '/svc/v1/mcps');
      const plan = planImport(config, body.data.map((m) => m.name));
      const servers = await resolvedToAdd(config, plan, o);
      await requireAdminFor(client, servers);
      const added = opts.dryRun ? null : await addAll(client, servers, opts.try);
      printImport(o, target, rowsOf(plan, added), Boolean(opts.dryRun), opts.json);
    });
}

/** An API key for exactly these instances, made as `svc keys create --mcp URL=ID...` would. */
async function makeKey(client: DaemonClient, host: ExportHost, instances: Instance[]): Promise<{ id: string; key: string }> {
  const byUrl = new Map<string, string[]>();
  for (const m of instances) byUrl.set(m.url, [...(byUrl.get(m.url) ?? []), m.id]);
  const mcp_servers = [...byUrl].map(([url, instance_ids]) => ({ url, instance_ids }));
  const { body } = await client.request<{ id: string; key: string }>('POST', '/svc/v1/keys', { name: `${host} (svc mcp export)`, mcp_servers });
  return body;
}

/** The instances `--instance` names (ids or unique prefixes, as every command takes them), or all of them. */
async function chosenInstances(all: Instance[], typed: string[]): Promise<Instance[]> {
  if (typed.length === 0) return all;
  const ids = new Set(typed.map((t) => resolveId(t, all.map((m) => m.id), 'MCP instance')));
  const unknown = [...ids].filter((id) => !all.some((m) => m.id === id));
  if (unknown.length > 0) throw new CliError(`No MCP instance of yours has the id ${unknown.join(', ')} (\`svc mcp list\` shows yours).`);
  return all.filter((m) => ids.has(m.id));
}

function registerExport(mcp: Command, o: Output): void {
  mcp
    .command('export')
    .description("Print the config an MCP host needs to reach your enabled instances through svc (each one's proxy URL)")
    .addOption(new Option('--for <host>', 'the host the config is for').choices(EXPORT_HOSTS).makeOptionMandatory())
    .option('--instance <id>', 'only this instance (its id or a unique prefix; repeatable); default: every enabled one', (v: string, prev: string[] = []) => [...prev, v], [])
    .option('--key', 'make an API key for these instances and put it in the headers (it is in the output only; without it the host signs in through svc)')
    .addHelpText(
      'after',
      `
Examples:
  $ svc mcp export --for cursor > ~/.cursor/mcp.json        # the host signs in through svc
  $ svc mcp export --for claude-code --key > .mcp.json      # with an API key (keep the file private)
  $ svc mcp export --for claude-desktop --key               # npx mcp-remote <proxy URL>, for stdio-only hosts
  $ svc mcp export --for vscode --instance 9b1e...
`,
    )
    .action(async (opts: { for: ExportHost; instance: string[]; key?: boolean }, cmd: Command) => {
      const client = await DaemonClient.connect(cmd.optsWithGlobals(), o.env, o.err);
      const { body } = await client.request<{ data: Instance[] }>('GET', '/svc/v1/mcps');
      const chosen = await chosenInstances(body.data, opts.instance);
      const enabled = chosen.filter((m) => m.enabled);
      if (enabled.length === 0) throw new CliError(body.data.length === 0 ? 'You have no MCP instances to export: add some with `svc mcp add` or `svc mcp import`.' : 'None of these MCP instances is enabled: `svc mcp enable ID` first.');
      const key = opts.key ? await makeKey(client, opts.for, enabled) : null;
      printJson(o, exportConfig(opts.for, enabled.map((m) => ({ name: m.name, proxy_url: m.proxy_url })), key?.key ?? null));
      const off = chosen.length - enabled.length;
      const skipped = off > 0 ? ` (${off} disabled left out)` : '';
      const how = key
        ? `It holds API key ${key.id}, shown only here${opts.for === 'claude-desktop' ? ` (in each entry's ${AUTH_HEADER_VARIABLE})` : ''}: keep the file private; \`svc keys revoke ${key.id}\` ends it.`
        : 'The host signs in through svc the first time it connects, and you approve it on the review page.';
      o.err(`${enabled.length} instance${enabled.length === 1 ? '' : 's'}${skipped}. Put this in ${EXPORT_PLACE[opts.for]}. ${how}\n`);
    });
}

/** `svc mcp import` and `svc mcp export`, under `svc mcp`. */
export function registerMcpHostConfigs(mcp: Command, o: Output): void {
  registerImport(mcp, o);
  registerExport(mcp, o);
}
