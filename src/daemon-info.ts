/**
 * Where a running daemon says where it listens. Kept apart from daemon.ts so that client commands
 * can find the daemon without loading the whole server (Koa, the OAuth server, the MCP SDK).
 */
export const DAEMON_FILE = 'daemon.json';
