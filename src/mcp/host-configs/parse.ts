/**
 * Reads an MCP host's config text into the servers it names, as written (references such as
 * `${env:TOKEN}` are left for resolve.ts). One reader serves every host: Claude Desktop, Cursor,
 * Windsurf and Claude Code keep an `mcpServers` object (Claude Code's `~/.claude.json` also one per
 * project under `projects`), VS Code a `servers` object beside its `inputs` (in `mcp.json`, or
 * under `mcp` in settings.json). Each entry is a command (`command`, `args`, `env`, `cwd`) or a
 * remote server (`url`, or Windsurf's `serverUrl`, with `headers`), told apart by those fields and
 * the optional `type`. Windsurf's `disabled: true` imports the server disabled. Other fields
 * (`description`, `timeout`, `autoApprove`, `disabledTools`, `oauth`...) change nothing of how
 * svc reaches the server and are passed over; `envFile` and `headersHelper`, whose values svc
 * would have to make itself, refuse the entry. Pure: the caller reads the file.
 */

export interface NameValue {
  name: string;
  value: string;
}

export interface CommandEntry {
  kind: 'command';
  command: string;
  args: string[];
  env: NameValue[];
  cwd: string | null;
}

export interface RemoteEntry {
  kind: 'remote';
  /** http: Streamable HTTP; sse: the older HTTP+SSE transport (svc speaks both to a server) */
  transport: 'http' | 'sse';
  url: string;
  headers: NameValue[];
}

/** One server of the file. */
export interface HostServer {
  name: string;
  /** where it is in the file, for messages: `mcpServers.files`, `projects["/src/app"].mcpServers.db` */
  where: string;
  enabled: boolean;
  entry: CommandEntry | RemoteEntry;
}

/** A VS Code input: a value the host asks the person for, named in the file as `${input:ID}`. */
export interface HostInput {
  id: string;
  description: string | null;
  password: boolean;
}

/** A later entry of a name the file has already given (Claude Code's projects often repeat one). */
export interface DuplicateServer {
  name: string;
  where: string;
  kept: string;
  server: HostServer;
}

export interface HostConfig {
  file: string;
  servers: HostServer[];
  inputs: HostInput[];
  duplicates: DuplicateServer[];
}

/** What is wrong with a file, every problem named with the file and the entry (never a value). */
export class HostConfigError extends Error {
  constructor(
    readonly file: string,
    readonly problems: string[],
  ) {
    super(problems.length === 1 ? `${file}: ${problems[0]}` : `${file}: ${problems.length} problems:\n${problems.map((p) => `  ${p}`).join('\n')}`);
    this.name = 'HostConfigError';
  }
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * JSON with comments (`//`, `/* *\/`) and trailing commas, as VS Code's and Cursor's files may
 * hold, made plain JSON. Each character taken out becomes a space (newlines stay), so a position
 * JSON.parse names is the position in the file.
 */
export function stripJsonComments(text: string): string {
  const out = text.split('');
  let i = 0;
  let lastSignificant = -1;
  const blank = (from: number, to: number) => {
    for (let k = from; k < to; k++) if (out[k] !== '\n' && out[k] !== '\r') out[k] = ' ';
  };
  while (i < text.length) {
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      lastSignificant = j;
      i = j + 1;
    } else if (c === '/' && text[i + 1] === '/') {
      const end = text.indexOf('\n', i);
      const stop = end === -1 ? text.length : end;
      blank(i, stop);
      i = stop;
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      const stop = end === -1 ? text.length : end + 2;
      blank(i, stop);
      i = stop;
    } else {
      if ((c === '}' || c === ']') && lastSignificant >= 0 && text[lastSignificant] === ',') out[lastSignificant] = ' ';
      if (!/\s/.test(c)) lastSignificant = i;
      i++;
    }
  }
  return out.join('');
}

/** Line and column (from 1) of a position in `text`. */
function lineColumn(text: string, position: number): string {
  const before = text.slice(0, position);
  const line = before.split('\n').length;
  return `line ${line}, column ${position - before.lastIndexOf('\n')}`;
}

/** The parsed document, or a HostConfigError saying where the JSON breaks (never quoting it). */
export function parseJsonText(text: string, file: string): unknown {
  const plain = stripJsonComments(text.replace(/^\uFEFF/, ' '));
  try {
    return JSON.parse(plain);
  } catch (err) {
    const message = (err as Error).message;
    const at = /position (\d+)/.exec(message);
    const end = plain.trimEnd().length;
    if (/^Unexpected end/i.test(message) || (at && Number(at[1]) >= end)) throw new HostConfigError(file, [`the JSON ends early, at ${lineColumn(plain, end)}`]);
    throw new HostConfigError(file, [at ? `the JSON is malformed at ${lineColumn(plain, Number(at[1]))}` : 'the JSON is malformed']);
  }
}

/** Where a name sits in a path such as `mcpServers.files`: bare when it is a plain word, quoted otherwise. */
export const member = (base: string, key: string) => (/^[A-Za-z_][A-Za-z0-9_-]*$/.test(key) ? `${base}.${key}` : `${base}[${JSON.stringify(key)}]`);

/** The blocks of servers the document holds, with the path each is at. */
function serverBlocks(doc: Json): { where: string; block: unknown }[] {
  const blocks: { where: string; block: unknown }[] = [];
  if ('mcpServers' in doc) blocks.push({ where: 'mcpServers', block: doc.mcpServers });
  if ('servers' in doc) blocks.push({ where: 'servers', block: doc.servers });
  if (isObject(doc.mcp) && 'servers' in doc.mcp) blocks.push({ where: 'mcp.servers', block: doc.mcp.servers });
  if (isObject(doc.projects)) {
    for (const [dir, project] of Object.entries(doc.projects)) {
      if (isObject(project) && 'mcpServers' in project) blocks.push({ where: `${member('projects', dir)}.mcpServers`, block: project.mcpServers });
    }
  }
  return blocks;
}

/** VS Code's `inputs` (in mcp.json, or under `mcp` in settings.json). */
function readInputs(doc: Json, problems: string[]): HostInput[] {
  const raw = 'inputs' in doc ? doc.inputs : isObject(doc.mcp) ? doc.mcp.inputs : undefined;
  if (raw === undefined) return [];
  if (!Array.isArray(raw)) {
    problems.push('inputs: expected an array');
    return [];
  }
  const inputs: HostInput[] = [];
  raw.forEach((input, i) => {
    if (!isObject(input) || typeof input.id !== 'string' || input.id === '') {
      problems.push(`inputs[${i}]: expected an object with an id`);
      return;
    }
    inputs.push({ id: input.id, description: typeof input.description === 'string' ? input.description : null, password: input.password === true });
  });
  return inputs;
}

/** Reads a host's config text: every server, VS Code's inputs, and the names given twice. */
export function parseHostConfig(text: string, file: string): HostConfig {
  const doc = parseJsonText(text, file);
  if (!isObject(doc)) throw new HostConfigError(file, ['expected a JSON object with an "mcpServers" or "servers" block']);
  const blocks = serverBlocks(doc);
  if (blocks.length === 0) throw new HostConfigError(file, ['has no "mcpServers" or "servers" block (nor projects with one)']);
  const problems: string[] = [];
  const inputs = readInputs(doc, problems);
  const servers: HostServer[] = [];
  const duplicates: DuplicateServer[] = [];
  for (const { where, block } of blocks) {
    if (!isObject(block)) {
      problems.push(`${where}: expected an object of servers by name`);
      continue;
    }
    for (const [key, raw] of Object.entries(block)) {
      const at = member(where, key);
      const server = readServer(key, at, raw, problems);
      if (!server) continue;
      const kept = servers.find((s) => s.name === server.name);
      if (kept) duplicates.push({ name: server.name, where: at, kept: kept.where, server });
      else servers.push(server);
    }
  }
  if (problems.length > 0) throw new HostConfigError(file, problems);
  return { file, servers, inputs, duplicates };
}

/** Fields whose meaning svc cannot carry over: the entry is refused, saying what to do instead. */
const UNSUPPORTED: Record<string, string> = {
  envFile: 'envFile (variables read from a file) is not imported: put the variables in "env"',
  headersHelper: 'headersHelper (a command that makes the headers) is not imported: put the headers in "headers"',
};

const TYPES: Record<string, 'stdio' | 'http' | 'sse'> = { stdio: 'stdio', http: 'http', 'streamable-http': 'http', streamableHttp: 'http', sse: 'sse' };

/** One entry as svc will import it, or null with its problems added to `problems`. */
function readServer(key: string, at: string, raw: unknown, problems: string[]): HostServer | null {
  const name = key.trim();
  if (!isObject(raw)) {
    problems.push(`${at}: expected an object (a "command" or a "url")`);
    return null;
  }
  const own: string[] = [];
  for (const [field, why] of Object.entries(UNSUPPORTED)) if (field in raw) own.push(`${at}: ${why}`);
  let type: 'stdio' | 'http' | 'sse' | undefined;
  if (raw.type !== undefined) {
    type = typeof raw.type === 'string' ? TYPES[raw.type] : undefined;
    if (!type) own.push(`${at}.type: ${typeof raw.type === 'string' ? JSON.stringify(raw.type.slice(0, 40)) : 'this value'} is not a type svc knows (stdio, http, sse)`);
  }
  if (name === '') own.push(`${at}: the server has no name`);
  const entry = 'command' in raw || type === 'stdio' ? readCommand(at, raw, type, own) : readRemote(at, raw, type, own);
  if (own.length > 0 || !entry) {
    problems.push(...own);
    return null;
  }
  return { name, where: at, enabled: raw.disabled !== true && raw.enabled !== false, entry };
}

/** A list of strings, or a problem. */
function strings(at: string, v: unknown, own: string[]): string[] {
  if (v === undefined) return [];
  if (!Array.isArray(v) || !v.every((a) => typeof a === 'string')) {
    own.push(`${at}: expected an array of strings`);
    return [];
  }
  return v;
}

/**
 * An object of names to values as a list. Numbers and booleans are their text (VS Code's env
 * allows them); null leaves the variable out, as VS Code does (svc's commands never inherit it).
 */
function pairs(at: string, v: unknown, own: string[]): NameValue[] {
  if (v === undefined) return [];
  if (!isObject(v)) {
    own.push(`${at}: expected an object of names to text`);
    return [];
  }
  const out: NameValue[] = [];
  for (const [name, value] of Object.entries(v)) {
    if (value === null) continue;
    if (typeof value === 'string') out.push({ name, value });
    else if (typeof value === 'number' || typeof value === 'boolean') out.push({ name, value: String(value) });
    else own.push(`${member(at, name)}: expected text`);
  }
  return out;
}

function readCommand(at: string, raw: Json, type: string | undefined, own: string[]): CommandEntry | null {
  if (!('command' in raw)) {
    own.push(`${at}: type stdio takes a "command" to run`);
    return null;
  }
  if (type && type !== 'stdio') own.push(`${at}: has "command" but type ${type}: a command runs over stdio`);
  if ('url' in raw || 'serverUrl' in raw) own.push(`${at}: has both "command" and "url": it must be one or the other`);
  if ('headers' in raw) own.push(`${at}.headers: a command takes "env", not headers`);
  if (typeof raw.command !== 'string' || raw.command.trim() === '') {
    own.push(`${at}.command: expected the program to run (text)`);
    return null;
  }
  if (raw.cwd !== undefined && typeof raw.cwd !== 'string') own.push(`${at}.cwd: expected a directory (text)`);
  return {
    kind: 'command',
    command: raw.command,
    args: strings(`${at}.args`, raw.args, own),
    env: pairs(`${at}.env`, raw.env, own),
    cwd: typeof raw.cwd === 'string' && raw.cwd !== '' ? raw.cwd : null,
  };
}

function readRemote(at: string, raw: Json, type: string | undefined, own: string[]): RemoteEntry | null {
  const url = raw.url ?? raw.serverUrl;
  if (raw.url !== undefined && raw.serverUrl !== undefined && raw.url !== raw.serverUrl) own.push(`${at}: has "url" and "serverUrl" that differ`);
  if (url === undefined) {
    own.push(`${at}: has neither "command" nor "url": svc cannot tell how to reach it`);
    return null;
  }
  if (typeof url !== 'string' || url === '') {
    own.push(`${member(at, raw.url !== undefined ? 'url' : 'serverUrl')}: expected a URL (text)`);
    return null;
  }
  if ('env' in raw) own.push(`${at}.env: a remote server takes "headers", not env`);
  if ('args' in raw) own.push(`${at}.args: a remote server takes no arguments`);
  return { kind: 'remote', transport: type === 'sse' ? 'sse' : 'http', url, headers: pairs(`${at}.headers`, raw.headers, own) };
}
