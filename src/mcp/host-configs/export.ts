/**
 * The config an MCP host needs to reach the person's instances through svc: each instance's
 * proxy URL under the host's own block, with an API key's `Authorization` header when one was
 * made for it. Hosts that speak only stdio (Claude Desktop) run `npx mcp-remote <proxy URL>`,
 * which takes the header from an environment variable of the entry (so no space has to survive
 * the host's argument handling). Without a key, the host signs in through svc's OAuth when the
 * proxy first answers 401. Pure.
 */
import type { HostKind } from './paths.js';

export const EXPORT_HOSTS = ['claude-code', 'cursor', 'vscode', 'claude-desktop'] as const satisfies readonly HostKind[];
export type ExportHost = (typeof EXPORT_HOSTS)[number];

export const isExportHost = (value: string): value is ExportHost => (EXPORT_HOSTS as readonly string[]).includes(value);

export interface ExportInstance {
  name: string;
  proxy_url: string;
}

/** The variable of a Claude Desktop entry that mcp-remote reads the Authorization header from. */
export const AUTH_HEADER_VARIABLE = 'AUTH_HEADER';

/**
 * A key per instance for the host's block: the name with each run of other characters than
 * letters, digits, `_` and `-` made `-` (hosts build tool names from it), and `-2`, `-3`... when
 * two instances come out the same.
 */
export function serverKeys(names: string[]): string[] {
  const used = new Set<string>();
  return names.map((name) => {
    const base = name.replace(/[^A-Za-z0-9_-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 60) || 'server';
    let key = base;
    for (let n = 2; used.has(key); n++) key = `${base}-${n}`;
    used.add(key);
    return key;
  });
}

/** Where mcp-remote takes plain http without being told (it does not count [::1]). */
const isLoopback = (url: URL) => ['localhost', '127.0.0.1'].includes(url.hostname);

/** A Claude Desktop entry: mcp-remote bridging stdio to the proxy URL. */
function bridgeEntry(proxyUrl: string, key: string | null): Record<string, unknown> {
  const args = ['mcp-remote', proxyUrl];
  // mcp-remote refuses plain http to anything but this machine unless told it is meant
  const url = new URL(proxyUrl);
  if (url.protocol === 'http:' && !isLoopback(url)) args.push('--allow-http');
  if (key === null) return { command: 'npx', args };
  args.push('--header', `Authorization:\${${AUTH_HEADER_VARIABLE}}`);
  return { command: 'npx', args, env: { [AUTH_HEADER_VARIABLE]: `Bearer ${key}` } };
}

/** One instance's entry for `host`. */
function entryFor(host: ExportHost, proxyUrl: string, key: string | null): Record<string, unknown> {
  const headers = key === null ? {} : { headers: { Authorization: `Bearer ${key}` } };
  switch (host) {
    case 'claude-code':
    case 'vscode':
      return { type: 'http', url: proxyUrl, ...headers };
    case 'cursor':
      return { url: proxyUrl, ...headers };
    case 'claude-desktop':
      return bridgeEntry(proxyUrl, key);
  }
}

/** The whole config for `host`: `servers` for VS Code, `mcpServers` for the others. */
export function exportConfig(host: ExportHost, instances: ExportInstance[], key: string | null): Record<string, unknown> {
  const keys = serverKeys(instances.map((i) => i.name));
  const block = Object.fromEntries(instances.map((i, n) => [keys[n], entryFor(host, i.proxy_url, key)]));
  return host === 'vscode' ? { servers: block } : { mcpServers: block };
}

/** Where the printed config goes, said to the person after it. */
export const EXPORT_PLACE: Record<ExportHost, string> = {
  'claude-code': "a project's .mcp.json (or the mcpServers of ~/.claude.json)",
  cursor: '~/.cursor/mcp.json (or a project\'s .cursor/mcp.json), beside any servers it has',
  vscode: "a project's .vscode/mcp.json (or your user mcp.json: MCP: Open User Configuration)",
  'claude-desktop': 'claude_desktop_config.json (Settings > Developer > Edit Config), then restart Claude Desktop',
};
