/**
 * How the store takes file-system faults, injected through the file system it is given (a
 * StoreFs that fails where the test says; nothing global is patched): directory fsyncs some file
 * systems refuse, file systems without hard links, appends that fail and cannot be cut off, and
 * a change that reached the disk but could not be applied.
 */
import { createHash } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';
import { copyFile, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '../src/config.js';
import { startDaemon } from '../src/daemon.js';
import { createLogger } from '../src/log.js';
import { FileWriteError, nodeFs, type StoreFs } from '../src/store/durable-file.js';
import { JournalFiles } from '../src/store/journal.js';
import type { UserRecord } from '../src/store/schema.js';
import { Store, type StoreOptions } from '../src/store/store.js';
import { noKeychain, tempDir } from './helpers/daemon.js';
import { Api } from './helpers/http.js';

const user = (id: string): UserRecord => ({ id, username: id, role: 'user', password_hash: 'x', created_at: '2025-01-01T00:00:00.000Z' });
const errno = (code: string) => Object.assign(new Error(`${code}: injected fault`), { code });
const ids = (store: Store) => store.all('users').map((u) => u.id);

/** What a fault rule sees: the call (`open`, `link`, `handle.sync`, `handle.datasync`, `handle.truncate`, ...) and its file. */
type FaultRule = (call: string, file: string) => Error | undefined;

/** node's file system, but each call first asks `rule` whether to fail; `calls` records every call made. */
function faultyFs(rule: FaultRule): StoreFs & { calls: string[] } {
  const calls: string[] = [];
  const check = (call: string, file: string) => {
    calls.push(`${call} ${file}`);
    const err = rule(call, file);
    if (err) throw err;
  };
  const faultyHandle = (handle: FileHandle, file: string): FileHandle =>
    new Proxy(handle, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target) as unknown;
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          if (['sync', 'datasync', 'write', 'truncate'].includes(String(prop))) {
            try {
              check(`handle.${String(prop)}`, file);
            } catch (err) {
              return Promise.reject(err);
            }
          }
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
  const wrap =
    <A extends unknown[], R>(name: string, fn: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      check(name, String(args[args.length > 1 && name === 'link' ? 1 : 0]));
      return fn(...args);
    };
  return {
    calls,
    open: async (file, flags, mode) => {
      check('open', file);
      return faultyHandle(await nodeFs.open(file, flags, mode), file);
    },
    readFile: wrap('readFile', nodeFs.readFile),
    readdir: wrap('readdir', nodeFs.readdir),
    rename: wrap('rename', nodeFs.rename),
    unlink: wrap('unlink', nodeFs.unlink),
    link: wrap('link', nodeFs.link),
    copyFile: wrap('copyFile', nodeFs.copyFile),
    stat: wrap('stat', nodeFs.stat),
    mkdir: wrap('mkdir', nodeFs.mkdir),
    access: wrap('access', nodeFs.access),
  };
}

/** A store on `dir` through `fs`, with a snapshot after nearly every write (so every path of the writer runs). */
const openWith = (dir: string, fs: StoreFs, opts: StoreOptions = {}, compactBytes = 1) => Store.open(dir, new JournalFiles(dir, { compactBytes, fs, onCompactionError: opts.onCompactionError }), opts);

async function filesOf(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(dir)).sort()) out[name] = createHash('sha256').update(await readFile(path.join(dir, name))).digest('hex');
  return out;
}

describe('directory fsync', () => {
  for (const code of ['EINVAL', 'EPERM']) {
    it(`answered with ${code} (a file system that cannot fsync a directory): writes, snapshots and restarts go on`, async () => {
      const dir = await tempDir();
      const fs = faultyFs((call, file) => (call === 'handle.sync' && file === dir ? errno(code) : undefined));
      const compactionErrors: unknown[] = [];
      const store = await openWith(dir, fs, { onCompactionError: (err) => compactionErrors.push(err) });
      for (let i = 0; i < 20; i++) await store.update((tx) => tx.put('users', user(`u${i}`)));
      await store.close();
      expect(fs.calls.filter((c) => c === `handle.sync ${dir}`).length, 'the directory was never fsynced').toBeGreaterThan(3);
      expect(compactionErrors).toEqual([]);
      const again = await Store.open(dir);
      expect(ids(again)).toHaveLength(20);
      await again.close();
    });
  }

  it('answered with any other error (EIO): the write fails, naming the file', async () => {
    const dir = await tempDir();
    const fs = faultyFs((call, file) => (call === 'handle.sync' && file === dir ? errno('EIO') : undefined));
    const store = await openWith(dir, fs);
    const err = await store.update((tx) => tx.put('users', user('u1'))).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'StoreUnavailableError' });
    expect((err as Error).cause).toBeInstanceOf(FileWriteError);
    expect(((err as Error).cause as Error).message).toMatch(/an I\/O error \(EIO\)/);
    await store.close();
  });
});

describe('db.json.bak where the file system has no hard links', () => {
  for (const code of ['EPERM', 'EXDEV', 'ENOTSUP']) {
    it(`link() answered with ${code}: the backup is a copy, and it plus the journal is still the whole store`, async () => {
      const dir = await tempDir();
      const fs = faultyFs((call) => (call === 'link' ? errno(code) : undefined));
      const compactionErrors: unknown[] = [];
      const store = await openWith(dir, fs, { onCompactionError: (err) => compactionErrors.push(err) });
      for (let i = 0; i < 20; i++) await store.update((tx) => tx.put('users', user(`u${i}`)));
      await store.close();
      expect(fs.calls.some((c) => c.startsWith('link ')), 'no link() was tried').toBe(true);
      expect(compactionErrors).toEqual([]);
      const current = JSON.parse(await readFile(path.join(dir, 'db.json'), 'utf8'));
      const backup = JSON.parse(await readFile(path.join(dir, 'db.json.bak'), 'utf8'));
      expect(backup.journal_seq).toBeLessThan(current.journal_seq);
      await copyFile(path.join(dir, 'db.json.bak'), path.join(dir, 'db.json'));
      const restored = await Store.open(dir);
      expect(ids(restored)).toHaveLength(20);
      await restored.close();
    });
  }
});

describe('a failed append', () => {
  it('is reported to the owner with its file and cause, once while the cause lasts, and again once writes succeed', async () => {
    const dir = await tempDir();
    let full = false;
    const fs = faultyFs((call, file) => (full && call === 'handle.datasync' && path.basename(file).startsWith('db.journal.') ? errno('ENOSPC') : undefined));
    const reported: unknown[] = [];
    let recovered = 0;
    const store = await openWith(dir, fs, { onWriteError: (err) => reported.push(err), onWriteRecovered: () => recovered++ }, 1e12);
    await store.update((tx) => tx.put('users', user('u1')));
    full = true;
    for (const id of ['u2', 'u3', 'u4']) await expect(store.update((tx) => tx.put('users', user(id)))).rejects.toMatchObject({ code: 'store_unavailable' });
    expect(reported).toHaveLength(1);
    expect(reported[0]).toBeInstanceOf(FileWriteError);
    expect(reported[0]).toMatchObject({ file: path.join(dir, 'db.journal.1'), code: 'ENOSPC' });
    expect((reported[0] as Error).message).toBe(`Cannot write ${path.join(dir, 'db.journal.1')}: the disk is full (ENOSPC)`);
    full = false;
    await store.update((tx) => tx.put('users', user('u5')));
    expect(recovered).toBe(1);
    const again = await Store.open(dir);
    expect(ids(again)).toEqual(['u1', 'u5']);
    await again.close();
  });

  /**
   * A store with u1 written, then a change refused whose line reached the file (only its fdatasync
   * failed) and could not be cut off again; the disk answers again afterwards.
   */
  async function afterUncutRefusal(dir: string) {
    let failNext = false;
    const fs = faultyFs((call) => (failNext && (call === 'handle.datasync' || call === 'handle.truncate') ? errno('EIO') : undefined));
    const store = await openWith(dir, fs, {}, 1e12);
    await store.update((tx) => tx.put('users', user('u1')));
    failNext = true;
    await expect(store.update((tx) => tx.put('users', user('refused')))).rejects.toMatchObject({ code: 'store_unavailable' });
    failNext = false;
    return store;
  }

  it('that cannot be cut off either goes on in a new journal file, and a restart loads exactly what was acknowledged', async () => {
    const dir = await tempDir();
    const store = await afterUncutRefusal(dir);
    await store.update((tx) => tx.put('users', user('u2')));
    expect((await readFile(path.join(dir, 'db.journal.1'), 'utf8')).split('\n')).toHaveLength(3); // u1, the refused line, and the end
    expect((await readdir(dir)).filter((n) => n.startsWith('db.journal.')).sort()).toEqual(['db.journal.1', 'db.journal.2']);
    const again = await Store.open(dir);
    expect(ids(again)).toEqual(['u1', 'u2']);
    await again.close();
  });

  it.each([
    ['a clean stop', true],
    ['a kill', false],
  ])('that cannot be cut off, with no write after it before %s, never comes back at the next start', async (_name, clean) => {
    const dir = await tempDir();
    const store = await afterUncutRefusal(dir);
    // the disk answers again, but nothing more is written before the process ends
    if (clean) await store.close();
    const again = await Store.open(dir);
    expect(ids(again)).toEqual(['u1']);
    await again.update((tx) => tx.put('users', user('u2')));
    await again.close();
    const third = await Store.open(dir);
    expect(ids(third)).toEqual(['u1', 'u2']);
    await third.close();
  });
});

describe('a change that reached the disk but could not be applied', () => {
  it('is not answered "nothing changed": the store takes no more writes, writes nothing more, and a restart has the change', async () => {
    const dir = await tempDir();
    const fatal: Error[] = [];
    const store = await Store.open(dir, undefined, { onFatal: (err) => fatal.push(err) });
    await store.update((tx) => tx.put('users', user('u1')));
    store.watch('users', (key) => {
      if (key === 'u2') throw new Error('an index that cannot follow');
    });
    const err = await store.update((tx) => tx.put('users', user('u2'))).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'StoreFailedError', code: 'store_failed' });
    expect((err as Error).message).not.toMatch(/nothing was changed/);
    expect(fatal).toEqual([err]);
    await expect(store.update((tx) => tx.put('users', user('u3')))).rejects.toMatchObject({ code: 'store_unavailable' });
    const before = await filesOf(dir);
    await store.close();
    expect(await filesOf(dir), 'a broken store wrote a snapshot of its memory').toEqual(before);
    const again = await Store.open(dir);
    expect(ids(again)).toEqual(['u1', 'u2']);
    await again.close();
  });

  it('stops the daemon, which loads the change at its next start', { timeout: 60_000 }, async () => {
    const dataDir = await tempDir();
    const config = resolveConfig({ host: '127.0.0.1', port: 0, dataDir, keychain: 'file', logLevel: 'error' }, {});
    let stop: (err: Error) => void = () => undefined;
    const stopped = new Promise<Error>((resolve) => (stop = resolve));
    const daemon = await startDaemon({ config, keychain: noKeychain, logger: createLogger('silent'), notify: () => undefined, onFatal: (err) => stop(err) });
    const admin = await new Api(daemon.url).login('admin', daemon.initialAdminPassword!);
    daemon.store.watch('users', (_key, record) => {
      if (record?.username === 'bob') throw new Error('an index that cannot follow');
    });
    const res = await admin.post('/svc/v1/users', { username: 'bob', role: 'user', password: 'password-of-bob' });
    expect(res.status, 'answered as if nothing had changed (503), or as if it worked').toBe(500);
    const stoppedWith = await stopped;
    expect((await fetch(`${daemon.url}/svc/v1/health`).catch((e: Error) => e)) instanceof Error, 'the daemon still serves').toBe(true);
    expect(stoppedWith.name).toBe('StoreFailedError');
    const after = await startDaemon({ config, keychain: noKeychain, logger: createLogger('silent'), notify: () => undefined });
    try {
      expect(after.store.all('users').map((u) => u.username)).toContain('bob');
    } finally {
      await after.close();
    }
  });
});
