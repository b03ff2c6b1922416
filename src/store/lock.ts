import { open, readFile, unlink } from 'node:fs/promises';
import path from 'node:path';
import { FileWriteError } from './durable-file.js';

export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(`Another svc serve (pid ${pid}) is already using the data dir ${dataDir}. Stop it first, or pass another --data-dir.`);
    this.name = 'DataDirLockedError';
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * An exclusive lock on the data dir: `daemon.lock` created with O_EXCL and holding our pid.
 * A lock left by a process that no longer runs (a SIGKILL) is taken over.
 */
export async function lockDataDir(dataDir: string): Promise<{ release: () => Promise<void> }> {
  const file = path.join(dataDir, 'daemon.lock');
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
