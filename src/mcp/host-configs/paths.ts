/**
 * The MCP hosts whose configs svc reads and writes, and where each keeps its user-level file on
 * Linux and macOS. Pure: the home directory, platform and environment are passed in.
 */
import path from 'node:path';

export const HOST_KINDS = ['claude-desktop', 'claude-code', 'cursor', 'vscode', 'windsurf'] as const;
export type HostKind = (typeof HOST_KINDS)[number];

export const isHostKind = (value: string): value is HostKind => (HOST_KINDS as readonly string[]).includes(value);

export interface PlaceContext {
  home: string;
  platform: NodeJS.Platform;
  env: Record<string, string | undefined>;
}

/** `$XDG_CONFIG_HOME` when it is an absolute path (as the spec asks), else ~/.config. */
function xdgConfig(ctx: PlaceContext): string {
  const set = ctx.env.XDG_CONFIG_HOME;
  return set && path.isAbsolute(set) ? set : path.join(ctx.home, '.config');
}

/** Where the host's own settings folder is: ~/Library/Application Support on macOS, the XDG config dir elsewhere. */
const appSupport = (ctx: PlaceContext) => (ctx.platform === 'darwin' ? path.join(ctx.home, 'Library', 'Application Support') : xdgConfig(ctx));

/**
 * The file `--from HOST` reads: the host's user-level config (a project's own file, such as
 * `.mcp.json`, `.cursor/mcp.json` or `.vscode/mcp.json`, is given by its path instead).
 */
export function hostConfigPath(host: HostKind, ctx: PlaceContext): string {
  switch (host) {
    case 'claude-desktop':
      return path.join(appSupport(ctx), 'Claude', 'claude_desktop_config.json');
    case 'claude-code':
      return path.join(ctx.home, '.claude.json');
    case 'cursor':
      return path.join(ctx.home, '.cursor', 'mcp.json');
    case 'vscode':
      return path.join(appSupport(ctx), 'Code', 'User', 'mcp.json');
    case 'windsurf':
      return path.join(ctx.home, '.codeium', 'windsurf', 'mcp_config.json');
  }
}

/**
 * The folder a project's config belongs to, which VS Code and Cursor call `${workspaceFolder}`:
 * the parent of the `.vscode` or `.cursor` folder the file is in; null for any other file.
 */
export function workspaceFolderOf(file: string): string | null {
  const dir = path.dirname(path.resolve(file));
  return ['.vscode', '.cursor'].includes(path.basename(dir)) ? path.dirname(dir) : null;
}
