import { createHash } from 'node:crypto';
import { chmod, lstat, mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/**
 * Where a running daemon says where it listens. Kept apart from daemon.ts so that client commands
 * can find the daemon without loading the whole server (Koa, the OAuth server, the MCP SDK).
 */
export const DAEMON_FILE = 'daemon.json';

/** Sent by the review surfaces' polling: the daemon logs those requests at debug, so they do not fill the log. */
export const QUIET_HEADER = 'x-svc-quiet';

/** Answered by a daemon on every control-plane response: the `instance` of its daemon.json. */
export const INSTANCE_HEADER = 'x-svc-instance';

/**
 * The CLI on the daemon's own machine proves it with a header whose value is derived from the
 * master key (SecretBox.derive of the label): its logins never wait behind someone else's guesses.
 */
export const LOCAL_LOGIN_HEADER = 'x-svc-local-login';
export const LOCAL_LOGIN_LABEL = 'svc local cli login v1';

/**
 * Where the daemon of a data dir listens for its own CLI: a Unix socket inside the data dir, which
 * is 0700, so only the data dir's owner can reach it and no other process can stand in for it.
 * The CLI sends everything (its session cookie, typed passwords, provider keys) there and never
 * over TCP, where whatever holds the port after a crash would receive it.
 *
 * A socket path is limited to about 100 bytes (104 on macOS, 108 on Linux). A data dir too deep
 * for that gets its socket in a private folder of the user's own instead: $XDG_RUNTIME_DIR when
 * set (0700 by definition), else `<tmpdir>/svc-<uid>`, made 0700 and checked to be the user's.
 */
export const SOCKET_FILE = 'svc.sock';
const MAX_SOCKET_PATH = 100;

export interface SocketPlace {
  /** the socket's path */
  path: string;
  /** the folder that keeps it private, which both sides check before use */
  dir: string;
}

export function localSocketPlace(dataDir: string, env: NodeJS.ProcessEnv = process.env): SocketPlace {
  const inDataDir = path.join(dataDir, SOCKET_FILE);
  if (Buffer.byteLength(inDataDir) <= MAX_SOCKET_PATH) return { path: inDataDir, dir: dataDir };
  const name = `svc-${createHash('sha256').update(path.resolve(dataDir)).digest('hex').slice(0, 16)}.sock`;
  const runtime = env.XDG_RUNTIME_DIR;
  if (runtime && path.isAbsolute(runtime) && Buffer.byteLength(path.join(runtime, name)) <= MAX_SOCKET_PATH) return { path: path.join(runtime, name), dir: runtime };
  const dir = path.join(os.tmpdir(), `svc-${process.getuid?.() ?? 'user'}`);
  return { path: path.join(dir, name), dir };
}

/** Thrown when the folder a socket lives in could be another user's to replace it in. */
export class UnsafeSocketDirError extends Error {
  constructor(readonly dir: string, why: string) {
    super(`The folder ${dir} that holds svc's local socket ${why}; svc will not use it.`);
    this.name = 'UnsafeSocketDirError';
  }
}

/**
 * Checks that `dir` is a real folder (not a link) of this user that nobody else may write in or
 * read; `create` makes it (0700) when missing, as the daemon does for the tmpdir fallback.
 */
export async function checkPrivateDir(dir: string, create = false): Promise<void> {
  if (create) await mkdir(dir, { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => (err.code === 'EEXIST' ? undefined : Promise.reject(err)));
  const st = await lstat(dir);
  if (!st.isDirectory()) throw new UnsafeSocketDirError(dir, 'is not a folder');
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid) throw new UnsafeSocketDirError(dir, 'belongs to another user');
  if ((st.mode & 0o077) !== 0) throw new UnsafeSocketDirError(dir, `can be opened by other users (mode ${(st.mode & 0o777).toString(8)}; chmod 700 it)`);
}

/** Thrown when a data dir could be another user's: svc neither writes in it nor trusts what it holds. */
export class UnsafeDataDirError extends Error {
  constructor(readonly dir: string, why: string, fix: string) {
    super(`The data dir ${dir} ${why}; svc will not use it. ${fix}`);
    this.name = 'UnsafeDataDirError';
  }
}

/**
 * Checks that the data dir is this user's own before anything in it is written or believed: a
 * real folder (not a link), owned by this user, that nobody else may write in. A folder another
 * user made could hold their master.key (a store sealed under their key) and, later, their
 * daemon.json (a URL where the person's scripts send API keys). Only the folder itself is checked:
 * its parent may be anyone's (/tmp). `create` makes a missing one, 0700 (its missing parents too),
 * and takes away what others may read of an existing one (as a data dir is 0700); without it (the
 * CLI), a missing one answers false: no daemon runs there.
 */
export async function checkDataDir(dir: string, create: boolean): Promise<boolean> {
  let st = await lstat(dir).catch((err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? null : Promise.reject(err)));
  if (!st && !create) return false;
  if (!st) {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    st = await lstat(dir);
  }
  if (st.isSymbolicLink()) throw new UnsafeDataDirError(dir, 'is a link', 'Give --data-dir (or SVC_HOME) the folder itself, one of your own.');
  if (!st.isDirectory()) throw new UnsafeDataDirError(dir, 'is not a folder', 'Give --data-dir (or SVC_HOME) a folder of your own, or a path where svc may make one.');
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid) {
    throw new UnsafeDataDirError(dir, `belongs to another user (uid ${st.uid})`, 'Use a data dir of your own (svc makes a missing one, 0700), or check who made this one before you chown it to yourself.');
  }
  if (uid !== undefined && (st.mode & 0o022) !== 0) {
    throw new UnsafeDataDirError(dir, `can be written in by other users (mode ${(st.mode & 0o777).toString(8)})`, `Check its files are yours, then \`chmod 700 ${dir}\`.`);
  }
  if (create && uid !== undefined && (st.mode & 0o077) !== 0) await chmod(dir, 0o700);
  return true;
}
