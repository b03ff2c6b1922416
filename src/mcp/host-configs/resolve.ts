/**
 * The references in a host's config resolved from the environment of `svc mcp import`, so what
 * svc stores is what the host would have run. Resolved in `command`, `args`, `env` values, `cwd`,
 * `url` and header values, in every host's file alike:
 *
 * - `${env:NAME}` (VS Code, Cursor, Windsurf) and `${NAME}` / `${NAME:-default}` (Claude Code):
 *   the variable NAME;
 * - `${input:ID}` (VS Code's inputs, which the host asks the person for): the variable
 *   `SVC_INPUT_<ID>`, ID upper-cased with each run of other characters than letters and digits
 *   made `_` (`${input:api-key}` reads `SVC_INPUT_API_KEY`);
 * - `${userHome}`, `${pathSeparator}` and `${/}`; `${workspaceFolder}` (and its basename) for a
 *   file in a project's `.vscode/` or `.cursor/` folder: that project's folder.
 *
 * Anything else (`${file:...}`, `${command:...}`, a variable that is not set) is refused by name,
 * every one of them at once, and nothing is imported. A message names the reference, never a value.
 */
import path from 'node:path';
import { type CommandEntry, type HostConfig, HostConfigError, type HostInput, type HostServer, member, type NameValue, type RemoteEntry } from './parse.js';

export interface ResolveContext {
  env: Record<string, string | undefined>;
  home: string | null;
  /** the project folder of a `.vscode/` or `.cursor/` file; null for any other file */
  workspaceFolder: string | null;
}

/** The variable a VS Code input is read from: `api-key` → `SVC_INPUT_API_KEY`. */
export const inputEnvName = (id: string) => `SVC_INPUT_${id.toUpperCase().replace(/[^A-Z0-9]+/g, '_').replace(/^_+|_+$/g, '')}`;

const VAR = /^[A-Za-z_][A-Za-z0-9_]*$/;
const VAR_DEFAULT = /^([A-Za-z_][A-Za-z0-9_]*):-([\s\S]*)$/;
const REFERENCE = /\$\{([^}]*)\}/g;

/** How a reference is named in a message: its kind and name only (a default may be a secret). */
function named(body: string): string {
  const m = VAR_DEFAULT.exec(body);
  if (m) return `\${${m[1]}:-…}`;
  if (VAR.test(body) || /^(env|input):[^\s]{1,100}$/.test(body)) return `\${${body}}`;
  const kind = /^([A-Za-z]{1,30}):/.exec(body);
  return kind ? `\${${kind[1]}:…}` : '${…}';
}

interface Scope {
  ctx: ResolveContext;
  inputs: HostInput[];
  problems: string[];
}

/** The value of one reference, or undefined with the reason added to the problems. */
function valueOf(body: string, at: string, scope: Scope): string | undefined {
  const { ctx } = scope;
  const missing = (why: string) => {
    scope.problems.push(`${at}: ${named(body)} ${why}`);
    return undefined;
  };
  const fromEnv = (name: string) => ctx.env[name] ?? missing('is not set in the environment');
  if (body.startsWith('env:')) return fromEnv(body.slice(4));
  if (body.startsWith('input:')) {
    const id = body.slice(6);
    const variable = inputEnvName(id);
    if (ctx.env[variable] !== undefined) return ctx.env[variable];
    const input = scope.inputs.find((i) => i.id === id);
    return missing(`is an input the host asks for${input?.description ? ` ("${input.description.slice(0, 80)}")` : ''}: set ${variable} to its value`);
  }
  if (body === 'userHome') return ctx.home ?? missing('is not known here');
  if (body === '/' || body === 'pathSeparator') return path.sep;
  if (body === 'workspaceFolder' || body === 'workspaceFolderBasename') {
    if (!ctx.workspaceFolder) return missing("is known only for a file in a project's .vscode or .cursor folder");
    return body === 'workspaceFolder' ? ctx.workspaceFolder : path.basename(ctx.workspaceFolder);
  }
  if (VAR.test(body)) return fromEnv(body);
  const withDefault = VAR_DEFAULT.exec(body);
  if (withDefault) return ctx.env[withDefault[1]] || withDefault[2];
  return missing('cannot be resolved by svc: give the value itself');
}

/** `text` with each reference replaced by its value (unresolved ones stay, and are problems). */
function resolveText(text: string, at: string, scope: Scope): string {
  return text.replace(REFERENCE, (whole, body: string) => valueOf(body, at, scope) ?? whole);
}

const resolvePairs = (pairs: NameValue[], at: string, scope: Scope): NameValue[] =>
  pairs.map((p) => ({ name: p.name, value: resolveText(p.value, member(at, p.name), scope) }));

function resolveCommand(e: CommandEntry, at: string, scope: Scope): CommandEntry {
  return {
    kind: 'command',
    command: resolveText(e.command, `${at}.command`, scope),
    args: e.args.map((a, i) => resolveText(a, `${at}.args[${i}]`, scope)),
    env: resolvePairs(e.env, `${at}.env`, scope),
    cwd: e.cwd === null ? null : resolveText(e.cwd, `${at}.cwd`, scope),
  };
}

function resolveRemote(e: RemoteEntry, at: string, scope: Scope): RemoteEntry {
  return { ...e, url: resolveText(e.url, `${at}.url`, scope), headers: resolvePairs(e.headers, `${at}.headers`, scope) };
}

/** Every server of the file with its references resolved; a HostConfigError naming each one that is not. */
export function resolveServers(config: HostConfig, ctx: ResolveContext): HostServer[] {
  const scope: Scope = { ctx, inputs: config.inputs, problems: [] };
  const servers = config.servers.map((s) => ({
    ...s,
    entry: s.entry.kind === 'command' ? resolveCommand(s.entry, s.where, scope) : resolveRemote(s.entry, s.where, scope),
  }));
  if (scope.problems.length > 0) throw new HostConfigError(config.file, scope.problems);
  return servers;
}
