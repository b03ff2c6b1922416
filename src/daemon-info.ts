/**
 * Where a running daemon says where it listens. Kept apart from daemon.ts so that client commands
 * can find the daemon without loading the whole server (Koa, the OAuth server, the MCP SDK).
 */
export const DAEMON_FILE = 'daemon.json';

/** Answered by a daemon on every control-plane response: the `instance` of its daemon.json. */
export const INSTANCE_HEADER = 'x-svc-instance';

/**
 * The CLI on the daemon's own machine proves it with a header whose value is derived from the
 * master key (SecretBox.derive of the label): its logins never wait behind someone else's guesses.
 */
export const LOCAL_LOGIN_HEADER = 'x-svc-local-login';
export const LOCAL_LOGIN_LABEL = 'svc local cli login v1';
