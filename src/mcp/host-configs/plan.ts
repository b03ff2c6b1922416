/**
 * What an import adds and skips, and the instance bodies it sends, decided before anything is
 * sent: every server is checked here by the rules the daemon holds a new instance to (kept in
 * step with src/mcp/schemas.ts, without loading zod into the CLI), so one that would be refused
 * stops the import before the first is added. Pure.
 */
import { type CommandEntry, type HostConfig, HostConfigError, type HostServer, member, type RemoteEntry } from './parse.js';

// The daemon's bounds (src/mcp/schemas.ts, src/http/urls.ts).
const MAX_URL_LENGTH = 2048;
const FORBIDDEN_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'upgrade', 'te', 'keep-alive', 'trailer', 'proxy-connection']);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const PRINTABLE = /^[^\0-\x1f\x7f]+$/;
const UNSAFE_IN_URL = /[\p{Cc}\p{Cf}\p{Cs}\p{Z}\s]/u;

function checkCommand(e: CommandEntry, at: string, problems: string[]): void {
  if (e.command.length > 4096 || !PRINTABLE.test(e.command)) problems.push(`${at}.command: must be printable text of at most 4096 characters`);
  if (e.args.length > 1000) problems.push(`${at}.args: at most 1000 arguments`);
  e.args.forEach((a, i) => {
    if (a.length > 32_768 || a.includes('\0')) problems.push(`${at}.args[${i}]: must be at most 32768 characters, with no NUL`);
  });
  if (e.env.length > 100) problems.push(`${at}.env: at most 100 variables`);
  for (const v of e.env) {
    const where = member(`${at}.env`, v.name);
    if (!ENV_NAME.test(v.name)) problems.push(`${where}: must be a variable name (letters, digits and _, not starting with a digit)`);
    if (v.value.length > 32_768 || v.value.includes('\0')) problems.push(`${where}: its value must be at most 32768 characters, with no NUL`);
  }
  if (e.cwd !== null && (!e.cwd.startsWith('/') || e.cwd.length > 4096 || !PRINTABLE.test(e.cwd))) problems.push(`${at}.cwd: must be an absolute directory`);
}

function checkUrl(url: string, at: string, problems: string[]): void {
  let parsed: URL | null = null;
  try {
    parsed = new URL(url);
  } catch {
    // said below
  }
  if (!parsed || UNSAFE_IN_URL.test(url)) problems.push(`${at}: must be an absolute URL`);
  else if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') problems.push(`${at}: must be an http or https URL`);
  else if (parsed.username || parsed.password) problems.push(`${at}: must not carry credentials (put them in "headers")`);
  else if (url.length > MAX_URL_LENGTH) problems.push(`${at}: must be at most ${MAX_URL_LENGTH} characters`);
}

function checkRemote(e: RemoteEntry, at: string, problems: string[]): void {
  checkUrl(e.url, `${at}.url`, problems);
  if (e.headers.length > 32) problems.push(`${at}.headers: at most 32 headers`);
  const seen = new Set<string>();
  for (const h of e.headers) {
    const where = member(`${at}.headers`, h.name);
    if (!HEADER_NAME.test(h.name)) problems.push(`${where}: must be an HTTP header name`);
    else if (FORBIDDEN_HEADERS.has(h.name.toLowerCase())) problems.push(`${where}: is a header svc sets itself`);
    if (seen.has(h.name.toLowerCase())) problems.push(`${where}: is named twice`);
    seen.add(h.name.toLowerCase());
    if (h.value.length > 8192 || !HEADER_VALUE.test(h.value)) problems.push(`${where}: its value must be one line of printable Latin-1 text, at most 8192 characters`);
  }
}

/** Every server (references resolved) as the daemon would take it; a HostConfigError naming each problem. */
export function checkServers(file: string, servers: HostServer[]): void {
  const problems: string[] = [];
  for (const s of servers) {
    if (s.name.length > 100 || !PRINTABLE.test(s.name)) problems.push(`${s.where}: the name must be printable, at most 100 characters`);
    if (s.entry.kind === 'command') checkCommand(s.entry, s.where, problems);
    else checkRemote(s.entry, s.where, problems);
  }
  if (problems.length > 0) throw new HostConfigError(file, problems);
}

/** The body of `POST /svc/v1/mcps` for one server: the command form, or the HTTP form. */
export function instanceBody(s: HostServer): Record<string, unknown> {
  const enabled = s.enabled ? {} : { enabled: false };
  if (s.entry.kind === 'command') {
    const { command, args, env, cwd } = s.entry;
    return { name: s.name, command: { command, args, env, ...(cwd !== null ? { cwd } : {}) }, ...enabled };
  }
  return { name: s.name, url: s.entry.url, headers: s.entry.headers, ...enabled };
}

export interface Skipped {
  server: HostServer;
  reason: 'exists' | 'duplicate';
  /** for a duplicate: where the entry of that name that was kept is */
  kept?: string;
}

export interface ImportPlan {
  /** the servers to add, in the file's order */
  add: HostServer[];
  skip: Skipped[];
}

/**
 * Which servers are added: those whose name none of the person's instances has, so a second
 * import adds nothing (and needs none of the variables the first one read).
 */
export function planImport(config: Pick<HostConfig, 'servers' | 'duplicates'>, existingNames: Iterable<string>): ImportPlan {
  const taken = new Set(existingNames);
  const plan: ImportPlan = { add: [], skip: [] };
  for (const s of config.servers) {
    if (taken.has(s.name)) plan.skip.push({ server: s, reason: 'exists' });
    else plan.add.push(s);
  }
  for (const d of config.duplicates) plan.skip.push({ server: d.server, reason: 'duplicate', kept: d.kept });
  return plan;
}

/** Shell-like quoting for showing a command line (it is never run through a shell). */
const quoted = (a: string) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`);

/** What a server runs or reaches, as the file writes it (references unresolved, so no value resolved from the environment is shown). */
export function describeEntry(s: HostServer): string {
  return s.entry.kind === 'command' ? [s.entry.command, ...s.entry.args].map(quoted).join(' ') : s.entry.url;
}

/** The names of a server's secrets: env variables or headers, never their values. */
export const secretNames = (s: HostServer): string[] => (s.entry.kind === 'command' ? s.entry.env : s.entry.headers).map((p) => p.name);
