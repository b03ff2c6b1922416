import { createHash } from 'node:crypto';
import { open, readFile, stat, unlink } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { FileWriteError, writeFileDurably } from './durable-file.js';

export const LOCK_FILE = 'daemon.lock';

export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    // pid 0: the holder has not written daemon.lock (yet); the lock itself is no file to read it from
    super(`Another svc serve (${pid > 0 ? `pid ${pid}` : 'its pid not yet in daemon.lock'}) is already using the data dir ${dataDir}. Stop it first, or pass another --data-dir.`);
    this.name = 'DataDirLockedError';
  }
}

export interface DataDirLock {
  /** Writes our pid to daemon.lock, once (at once unless the lock was taken with `recordPid: false`). */
  recordPid: () => Promise<void>;
  /** Removes daemon.lock if we wrote it, and frees the lock. */
  release: () => Promise<void>;
}

/**
 * An exclusive lock on the data dir that a dead process cannot hold, taken atomically: of two
 * processes that reach it at the same instant, exactly one gets it. `daemon.lock` holds the
 * holder's pid, for the message the other one gets and for people; it is not the lock.
 *
 * On Linux the lock is an abstract Unix socket named for the data dir: binding it is atomic
 * (EADDRINUSE means held), it is no file (nothing is left behind), and the kernel releases it
 * when the process dies, however it dies. Elsewhere (no abstract sockets; Node has no flock) it
 * is `daemon.lock` created with O_EXCL, and a lock whose pid no longer runs is taken over; two
 * starts that find such a stale lock at the same instant can both take it there.
 *
 * `recordPid: false` leaves daemon.lock (a dead holder's, say) as it is until recordPid() is
 * called: a daemon start calls it once its checks have passed, so a refused start changes no file.
 */
export async function lockDataDir(dataDir: string, opts: { recordPid?: boolean } = {}): Promise<DataDirLock> {
  const file = path.join(dataDir, LOCK_FILE);
  if (process.platform !== 'linux') return lockWithFile(dataDir, file);
  let server: net.Server;
  try {
    server = await bindLockSocket(await lockSocketName(dataDir));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') throw new DataDirLockedError(dataDir, await holderPid(file));
    throw err;
  }
  const closeSocket = () => new Promise<void>((resolve) => server.close(() => resolve()));
  let recorded = false;
  let released = false;
  const lock: DataDirLock = {
    recordPid: async () => {
      if (recorded || released) return;
      // Replaces whatever a dead holder left; whole or not at all, so a reader never sees it empty.
      await writeFileDurably(file, String(process.pid));
      recorded = true;
    },
    release: async () => {
      if (released) return;
      released = true;
      // The file first: once the socket is free, the next holder's file must not be ours to remove.
      if (recorded) await unlink(file).catch(() => undefined);
      await closeSocket();
    },
  };
  if (opts.recordPid !== false) {
    try {
      await lock.recordPid();
    } catch (err) {
      await lock.release();
      throw err;
    }
  }
  return lock;
}

/**
 * Whether some process holds the data dir's lock (a daemon running, or still starting), found
 * without taking it: on Linux by connecting to the lock's socket, which its holder closes at once;
 * elsewhere by daemon.lock naming a live process.
 */
export async function isDataDirLocked(dataDir: string): Promise<boolean> {
  if (process.platform !== 'linux') {
    const pid = Number.parseInt(await readFile(path.join(dataDir, LOCK_FILE), 'utf8').catch(() => ''), 10);
    return Number.isInteger(pid) && pid > 0 && isAlive(pid);
  }
  let name: string;
  try {
    name = await lockSocketName(dataDir);
  } catch {
    return false; // no data dir: nobody holds it
  }
  return new Promise((resolve) => {
    const socket = net.connect(name, () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * The data dir's identity (device and inode), not its path: a symlink, a relative path, or a
 * bind mount of the same directory all get the same lock. Abstract sockets belong to a network
 * namespace, so processes in different namespaces (containers sharing a volume) do not see each
 * other's locks.
 */
export async function lockSocketName(dataDir: string): Promise<string> {
  const { dev, ino } = await stat(dataDir, { bigint: true });
  return `\0svc-lock-${createHash('sha256').update(`${dev}:${ino}`).digest('hex').slice(0, 40)}`;
}

/** Binds the lock; the server keeps nothing alive and talks to nobody (a connection is closed at once). */
function bindLockSocket(name: string): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const server = net.createServer((socket) => socket.destroy());
    server.once('error', reject);
    // exclusive: in a cluster worker, never a handle shared through the primary
    server.listen({ path: name, exclusive: true }, () => {
      server.off('error', reject);
      server.unref();
      resolve(server);
    });
  });
}

/**
 * The pid in daemon.lock, for the refusal. The holder writes it once it has bound the socket (a
 * daemon, once its start has passed its checks), so a start that lost the race may first read
 * nothing, or the pid of a holder that died: it reads again for a moment, and answers 0 (not
 * known) rather than a pid that no longer runs.
 */
async function holderPid(file: string): Promise<number> {
  for (let attempt = 0; attempt < 40; attempt++) {
    const pid = Number.parseInt(await readFile(file, 'utf8').catch(() => ''), 10);
    if (Number.isInteger(pid) && pid > 0 && isAlive(pid)) return pid;
    await new Promise((r) => setTimeout(r, 50));
  }
  return 0;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Where there are no abstract sockets: `daemon.lock` created with O_EXCL and holding our pid. */
async function lockWithFile(dataDir: string, file: string): Promise<DataDirLock> {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const handle = await open(file, 'wx', 0o600);
      try {
        await handle.writeFile(String(process.pid));
        await handle.sync();
      } catch (err) {
        // Not held: an empty lock would only be taken over, but it would say nothing.
        await handle.close().catch(() => undefined);
        await unlink(file).catch(() => undefined);
        throw new FileWriteError(file, err);
      }
      await handle.close();
      let released = false;
      return {
        recordPid: async () => undefined, // written as the lock was made
        release: async () => {
          if (released) return;
          released = true;
          await unlink(file).catch(() => undefined);
        },
      };
    } catch (err) {
      if (err instanceof FileWriteError) throw err;
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw new FileWriteError(file, err);
      const pid = Number.parseInt(await readFile(file, 'utf8').catch(() => ''), 10);
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && isAlive(pid)) {
        throw new DataDirLockedError(dataDir, pid);
      }
      await unlink(file).catch(() => undefined);
    }
  }
  throw new Error(`Could not lock the data dir ${dataDir}`);
}
