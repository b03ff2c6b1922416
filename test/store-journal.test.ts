/**
 * The store on disk (src/store/journal.ts): a snapshot plus an append-only journal. Each write
 * costs its change, survives a crash once acknowledged, and the last good copy plus the journal is
 * always the whole store.
 */
import { appendFile, copyFile, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AccessRequestsService } from '../src/access-requests/service.js';
import { createLogger } from '../src/log.js';
import { CorruptStoreError } from '../src/store/durable-file.js';
import { JournalFiles, readStoreFiles } from '../src/store/journal.js';
import type { AccessRequestRecord, UserRecord } from '../src/store/schema.js';
import { seqLine } from '../src/store/seq-file.js';
import { Store } from '../src/store/store.js';
import { storeRepositories } from '../src/store/store-repositories.js';
import { tempDir } from './helpers/daemon.js';

const user = (id: string): UserRecord => ({ id, username: id, role: 'admin', password_hash: 'x', created_at: new Date().toISOString() });
const journals = async (dir: string) => (await readdir(dir)).filter((n) => n.startsWith('db.journal.')).sort();
const open = (dir: string, compactBytes?: number) => Store.open(dir, new JournalFiles(dir, { compactBytes }));

const opened: Store[] = [];
afterEach(async () => {
  for (const s of opened.splice(0)) await s.close().catch(() => undefined);
});

describe('a write costs its change', () => {
  it('appends one line of the size of the change, whatever the store holds', async () => {
    const dir = await tempDir();
    const store = await open(dir, 1e12);
    const users = Array.from({ length: 5000 }, (_, i) => user(`u${i}`));
    await store.update((tx) => users.forEach((u) => tx.put('users', u)));
    const [file] = await journals(dir);
    const before = (await stat(path.join(dir, file))).size;
    await store.update((tx) => tx.put('users', user('one-more')));
    const added = (await stat(path.join(dir, file))).size - before;
    expect(added).toBeLessThan(400);
    expect((await stat(path.join(dir, 'db.json'))).size).toBeLessThan(400); // the first, empty snapshot: not rewritten
    await store.close();
  });
});

describe('crash and restart', () => {
  it('a store never closed (a crash) has every acknowledged write after a restart', async () => {
    const dir = await tempDir();
    const store = await open(dir);
    await store.update((tx) => tx.put('users', user('a')));
    await Promise.all(['b', 'c', 'd'].map((id) => store.update((tx) => tx.put('users', user(id)))));
    await store.update((tx) => tx.delete('users', 'a'));
    await store.update((tx) => tx.setDoc('oauth_keys', 'sealed'));
    // no close: the process died
    const again = await open(dir);
    opened.push(again);
    expect(again.all('users').map((u) => u.id)).toEqual(['b', 'c', 'd']);
    expect(again.doc('oauth_keys')).toBe('sealed');
  });

  it('a torn last line (a crash mid-append, never acknowledged) is dropped, and later writes follow on', async () => {
    const dir = await tempDir();
    const store = await open(dir);
    await store.update((tx) => tx.put('users', user('a')));
    const [file] = await journals(dir);
    await appendFile(path.join(dir, file), '[2,[["p","users","zz",{"id":"zz"');
    const again = await open(dir);
    expect(again.all('users').map((u) => u.id)).toEqual(['a']);
    await again.update((tx) => tx.put('users', user('b')));
    const third = await open(dir);
    opened.push(third);
    expect(third.all('users').map((u) => u.id)).toEqual(['a', 'b']);
  });

  it('a last line torn in the middle of a multi-byte character is a torn append too: dropped, the rest loads', async () => {
    const dir = await tempDir();
    const store = await open(dir);
    await store.update((tx) => tx.put('users', user('a')));
    await store.update((tx) => tx.put('users', { ...user('b'), username: '日本語のユーザー' }));
    const file = path.join(dir, (await journals(dir))[0]);
    const bytes = await readFile(file);
    const cut = bytes.indexOf(Buffer.from('本')) + 1; // inside the character's three bytes
    await writeFile(file, bytes.subarray(0, cut));
    // db.seq as the append left it before its fdatasync returned: the torn change never acknowledged
    await writeFile(path.join(dir, 'db.seq'), seqLine(1));
    const again = await open(dir);
    opened.push(again);
    expect(again.all('users').map((u) => u.id)).toEqual(['a']);
  });

  it('refuses a journal line that does not check out before later lines, naming the file and touching nothing', async () => {
    const dir = await tempDir();
    const store = await open(dir);
    for (const id of ['a', 'b', 'c']) await store.update((tx) => tx.put('users', user(id)));
    const file = path.join(dir, (await journals(dir))[0]);
    const lines = (await readFile(file, 'utf8')).split('\n');
    lines[1] = lines[1].replace('"b"', '"B"'); // checksum no longer matches
    const bad = lines.join('\n');
    await writeFile(file, bad);
    const err = await open(dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CorruptStoreError);
    expect((err as Error).message).toContain(file);
    expect((err as Error).message).toMatch(/line 2 does not check out/);
    expect(await readFile(file, 'utf8')).toBe(bad);
  });

  it('refuses a gap in the journal (a file lost), rather than start without the changes it held', async () => {
    const dir = await tempDir();
    const store = await open(dir, 1); // a snapshot after every write
    for (const id of ['a', 'b', 'c', 'd']) await store.update((tx) => tx.put('users', user(id)));
    // the snapshots run in the background: a slow machine is still writing one after the last write
    await store.settled();
    // an old snapshot back in place, without the journal that follows it
    const files = await journals(dir);
    expect(files.length).toBeGreaterThan(1);
    await writeFile(path.join(dir, 'db.json'), JSON.stringify({ journal_seq: 0, meta: null, users: [], sessions: [], mcp_instances: [], access_requests: [] }));
    const { rm } = await import('node:fs/promises');
    await rm(path.join(dir, files[0]));
    // one change or several: which journal files the background snapshots left varies from run to run
    await expect(open(dir)).rejects.toThrow(/lacks changes? \d/);
  });
});

describe('snapshots (compaction)', () => {
  it('rewrites db.json in the background, keeps db.json.bak, drops the journal files the backup holds, and loses nothing', async () => {
    const dir = await tempDir();
    const store = await open(dir, 2000);
    const ids: string[] = [];
    for (let i = 0; i < 200; i++) {
      ids.push(`u${i}`);
      await store.update((tx) => tx.put('users', user(`u${i}`)));
    }
    await store.update((tx) => tx.delete('users', 'u7'));
    await store.close();
    const snapshot = JSON.parse(await readFile(path.join(dir, 'db.json'), 'utf8'));
    expect(snapshot.users.map((u: UserRecord) => u.id)).toEqual(ids.filter((id) => id !== 'u7'));
    const backup = JSON.parse(await readFile(path.join(dir, 'db.json.bak'), 'utf8'));
    expect(backup.journal_seq).toBeLessThan(snapshot.journal_seq);
    // bounded: old journal files went once the backup held them
    expect((await journals(dir)).length).toBeLessThanOrEqual(3);

    // The last good copy plus the journal is the whole store.
    await copyFile(path.join(dir, 'db.json.bak'), path.join(dir, 'db.json'));
    const restored = await open(dir);
    opened.push(restored);
    expect(restored.all('users').map((u) => u.id)).toEqual(ids.filter((id) => id !== 'u7'));
  });

  it('reads a snapshot back a record at a time, refuses one cut off in the middle, and still reads one written whole (by hand)', async () => {
    const dir = await tempDir();
    const store = await open(dir, 1e12);
    for (const id of ['a', 'b', 'c']) await store.update((tx) => tx.put('users', user(id)));
    await store.close();
    const file = path.join(dir, 'db.json');
    const good = await readFile(file, 'utf8');
    expect(good.split('\n').length).toBeGreaterThan(8); // one record per line
    await writeFile(file, good.slice(0, good.indexOf('"b"') + 10));
    await expect(open(dir)).rejects.toThrow(/not valid JSON: the file ends early|not valid JSON/);
    await writeFile(file, JSON.stringify(await readStoreFiles(dir).catch(() => JSON.parse(good))));
    const whole = await open(dir);
    opened.push(whole);
    expect(whole.all('users').map((u) => u.id)).toEqual(['a', 'b', 'c']);
  });

  it('never holds the event loop long while writing a large snapshot: it serialises a few hundred records a turn', async () => {
    const dir = await tempDir();
    const store = await open(dir, 1e12);
    // Every record counts the times it is serialised, so the test counts the work each turn of
    // the event loop holds rather than timing it (a busy machine stretches any time).
    let serialised = 0;
    const counting = {
      toJSON(this: object) {
        serialised++;
        return { ...this };
      },
    };
    // many short strings, as real records hold: what makes serialising a store slow
    const bulk = Array.from({ length: 20_000 }, (_, i) =>
      Object.assign(Object.create(counting) as object, { ...user(`u${i}`), password_hash: `scrypt$16384$8$1$${'x'.repeat(22)}$${'y'.repeat(43)}`, notes: Array.from({ length: 20 }, (_, j) => `note ${i}.${j}`) }),
    );
    await store.update((tx) => bulk.forEach((u) => tx.put('users', u as UserRecord)));
    const perTurn: number[] = [];
    let counted = serialised;
    let closing = true;
    const turn = () => {
      perTurn.push(serialised - counted);
      counted = serialised;
      if (closing) setImmediate(turn);
    };
    setImmediate(turn);
    try {
      await store.close(); // a snapshot of ~7 MB
    } finally {
      closing = false;
    }
    perTurn.push(serialised - counted);
    // the snapshot serialised every record once, spread over many turns: a store written in one
    // turn would show all 20,000 in one
    expect(perTurn.reduce((a, b) => a + b, 0)).toBe(20_000);
    expect(Math.max(...perTurn)).toBeLessThan(20_000 / 10);
    expect((await stat(path.join(dir, 'db.json'))).size).toBeGreaterThan(6_000_000);
    expect((await readStoreFiles(dir)).users).toHaveLength(20_000);
  });
});

describe('the in-memory store: the services run on it unchanged', () => {
  const reviewer = user('r1');
  const draft = { app_client_id: 'app', flow_type: 'popup', requested_role: 'scope_user_user', requested: { version: '1', mcp_servers: [] } } as never;

  it('creates, approves, and of two concurrent decisions lets exactly one win', async () => {
    const store = Store.memory({ users: [reviewer] });
    const requests = new AccessRequestsService(storeRepositories(store), Date.now, createLogger('silent'));
    const a = await requests.create(draft);
    const [approved, denied] = await Promise.allSettled([requests.approve(reviewer, a.id, { approved_role: 'scope_user_user' } as never), requests.deny(reviewer, a.id)]);
    expect(approved.status).toBe('fulfilled');
    expect(denied).toMatchObject({ status: 'rejected', reason: { code: 'already_processed' } });
    expect(store.get('access_requests', a.id)?.status).toBe('approved');
  });

  it('caps drafts per client from its index, counting those still being written', async () => {
    const store = Store.memory({ users: [reviewer] });
    const requests = new AccessRequestsService(storeRepositories(store), Date.now, createLogger('silent'), undefined, { draftsPerClient: 3, drafts: 5 });
    const results = await Promise.allSettled(Array.from({ length: 4 }, () => requests.create(draft)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(3);
    expect(results.find((r) => r.status === 'rejected')).toMatchObject({ reason: { code: 'too_many_drafts' } });
    const other = await Promise.allSettled(Array.from({ length: 3 }, () => requests.create({ ...(draft as object), app_client_id: 'other' } as never)));
    expect(other.filter((r) => r.status === 'fulfilled')).toHaveLength(2);
    expect(store.count('access_requests')).toBe(5);
  });

  it('records are values: changing one in place throws, and a failed transaction changes nothing', async () => {
    const store = Store.memory({ users: [reviewer] });
    const requests = new AccessRequestsService(storeRepositories(store), Date.now, createLogger('silent'));
    const a = await requests.create(draft);
    const stored = store.get('access_requests', a.id)!;
    expect(() => {
      (stored as AccessRequestRecord).status = 'approved';
    }).toThrow(TypeError);
    await expect(
      store.update((tx) => {
        tx.edit('access_requests', a.id)!.status = 'denied';
        throw new Error('no');
      }),
    ).rejects.toThrow('no');
    expect(store.get('access_requests', a.id)!.status).toBe('draft');
  });
});
