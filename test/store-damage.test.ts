/**
 * A damaged or incomplete store on disk (src/store/journal.ts, snapshot.ts, seq-file.ts,
 * recovery.ts) is never loaded as data: the start is refused, naming the damaged file, with every
 * file as it was. Each refusal is followed here as a person would follow it: the command line it
 * prints is run as printed, the store is opened again, and what it kept is what the message said.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFile, open as fsOpen, readdir, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CorruptStoreError } from '../src/store/durable-file.js';
import { JournalFiles } from '../src/store/journal.js';
import type { UserRecord } from '../src/store/schema.js';
import { seqLine } from '../src/store/seq-file.js';
import { readSnapshot, writeSnapshot } from '../src/store/snapshot.js';
import { Store } from '../src/store/store.js';
import { tempDir } from './helpers/daemon.js';

const user = (id: string): UserRecord => ({ id, username: id, role: 'user', password_hash: 'x', created_at: '2025-01-01T00:00:00.000Z' });
const open = (dir: string, compactBytes?: number) => Store.open(dir, new JournalFiles(dir, { compactBytes }));
const ids = (store: Store) => store.all('users').map((u) => u.id);
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `u${from + i}`);
const journals = async (dir: string) => (await readdir(dir)).filter((n) => /^db\.journal\.\d+$/.test(n)).sort((a, b) => Number(a.slice(11)) - Number(b.slice(11)));

const opened: Store[] = [];
afterEach(async () => {
  for (const s of opened.splice(0)) await s.close().catch(() => undefined);
});

/** Writes users u<from>..u<to>, one change each, and leaves the store unclosed: a crash. Answers the store, still open. */
async function writeThenCrash(dir: string, from: number, to: number, compactBytes?: number): Promise<Store> {
  const store = await open(dir, compactBytes);
  for (let i = from; i <= to; i++) await store.update((tx) => tx.put('users', user(`u${i}`)));
  return store;
}

/** Three runs, each killed: db.journal.1 (changes 1-5), db.journal.6 (6-8), db.journal.9 (9-10); db.json holds none of them. */
async function threeJournalFiles(): Promise<string> {
  const dir = await tempDir();
  await writeThenCrash(dir, 1, 5);
  await writeThenCrash(dir, 6, 8);
  await writeThenCrash(dir, 9, 10);
  expect(await journals(dir)).toEqual(['db.journal.1', 'db.journal.6', 'db.journal.9']);
  return dir;
}

/** Every file of the data dir and a hash of its bytes. */
async function filesOf(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(dir)).sort()) out[name] = createHash('sha256').update(await readFile(path.join(dir, name))).digest('hex');
  return out;
}

/** The store's refusal, checking that it changed no file. */
async function refusal(dir: string): Promise<CorruptStoreError> {
  const before = await filesOf(dir);
  const err = await open(dir).then(
    (s) => {
      opened.push(s);
      return null;
    },
    (e: unknown) => e,
  );
  expect(err, 'the store was opened').toBeInstanceOf(CorruptStoreError);
  expect(await filesOf(dir), 'the refused start changed a file').toEqual(before);
  return err as CorruptStoreError;
}

/** The way out a refusal prints (the command line after "Run: ", last), run as printed; answers its commands. */
function follow(err: Error): string[] {
  const at = err.message.lastIndexOf(' Run: ');
  if (at < 0) return [];
  const line = err.message.slice(at + ' Run: '.length);
  execFileSync('sh', ['-c', line], { stdio: 'pipe' });
  return line.split(' && ');
}

async function openAgain(dir: string): Promise<Store> {
  const store = await open(dir);
  opened.push(store);
  return store;
}

/** Changes one byte inside line `n` (1-based) of a file, keeping its newline. */
async function damageLine(file: string, n: number, from: string, to: string): Promise<void> {
  const lines = (await readFile(file, 'utf8')).split('\n');
  expect(lines[n - 1]).toContain(from);
  lines[n - 1] = lines[n - 1].replace(from, to);
  await writeFile(file, lines.join('\n'));
}

describe('a journal line that ends in its newline and does not check out is damage, not a torn append', () => {
  it('a byte changed in the last line refuses the start naming the file; the way out loses that change and no other', async () => {
    const dir = await tempDir();
    await writeThenCrash(dir, 1, 3);
    const file = path.join(dir, 'db.journal.1');
    await damageLine(file, 3, '"u3"', '"x3"');
    const err = await refusal(dir);
    expect(err.message).toContain(`The store's journal ${file} is damaged: line 3 does not check out (it held change 3)`);
    expect(err.message).toContain('loses change 3');
    expect(follow(err)).toHaveLength(2); // cut the line off; move db.seq aside (it records change 3 as made)
    expect(ids(await openAgain(dir))).toEqual(['u1', 'u2']);
  });

  it('a damaged last line that db.seq does not record as acknowledged (a power cut mid-append): cutting it off loses nothing acknowledged', async () => {
    const dir = await tempDir();
    await writeThenCrash(dir, 1, 3);
    await writeFile(path.join(dir, 'db.seq'), seqLine(2));
    await damageLine(path.join(dir, 'db.journal.1'), 3, '"u3"', '"x3"');
    const err = await refusal(dir);
    expect(err.message).toContain('Cutting it off loses nothing that was acknowledged');
    expect(follow(err)).toEqual([expect.stringMatching(/^truncate -s \d+ /)]);
    expect(ids(await openAgain(dir))).toEqual(['u1', 'u2']);
  });

  it('a damaged last line of an earlier file is named as such (not as a later file lacking a change); going on from before it loses what it says', async () => {
    const dir = await threeJournalFiles();
    const damaged = path.join(dir, 'db.journal.6');
    await damageLine(damaged, 3, '"u8"', '"x8"');
    const err = await refusal(dir);
    expect(err.file).toBe(damaged);
    expect(err.message).toContain(`The store's journal ${damaged} is damaged: line 3 does not check out (it held change 8)`);
    expect(err.message).toContain('loses changes 8 to 10 (3 changes)');
    expect(err.message).not.toMatch(/db\.journal\.9 .*lacks/);
    const commands = follow(err);
    expect(commands.join('\n')).toContain(path.join(dir, 'db.journal.9'));
    expect(ids(await openAgain(dir))).toEqual(range(1, 7));
  });

  it('a damaged file whose every change db.json already has: moving only that file aside loses nothing', async () => {
    const dir = await threeJournalFiles();
    // a clean stop: db.json now holds changes 1 to 11 (db.json.bak, the first snapshot, still needs the journal files)
    const store = await open(dir);
    await store.update((tx) => tx.put('users', user('u11')));
    await store.close();
    await writeThenCrash(dir, 12, 22); // 11 more acknowledged changes after the snapshot, in db.journal.12
    const damaged = path.join(dir, 'db.journal.6');
    await damageLine(damaged, 2, '"u7"', '"x7"');
    const err = await refusal(dir);
    expect(err.message).toContain(damaged);
    expect(err.message).toContain('starting without it loses nothing');
    expect(follow(err)).toEqual([`mv '${damaged}' '${damaged}.damaged'`]);
    expect(ids(await openAgain(dir)).sort()).toEqual(range(1, 22).sort());
  });

  it('a line cut out of the middle of a file is refused as out of order, naming the file', async () => {
    const dir = await tempDir();
    await writeThenCrash(dir, 1, 5);
    const file = path.join(dir, 'db.journal.1');
    const lines = (await readFile(file, 'utf8')).split('\n');
    lines.splice(1, 1);
    await writeFile(file, lines.join('\n'));
    const err = await refusal(dir);
    expect(err.message).toContain(`The store's journal ${file} is out of order: line 2 holds change 3 where change 2 belongs`);
  });
});

describe('db.json carries a checksum', () => {
  const closedStore = async () => {
    const dir = await tempDir();
    const store = await open(dir);
    for (const id of ['alice', 'bob']) await store.update((tx) => tx.put('users', user(id)));
    await store.close(); // db.json holds both; db.json.bak is the first (empty) snapshot, with the journal beside it
    return dir;
  };

  it('a byte changed inside a value that stays valid JSON refuses the start; restoring the copy as told loses nothing', async () => {
    const dir = await closedStore();
    const file = path.join(dir, 'db.json');
    await writeFile(file, (await readFile(file, 'utf8')).replace('"username":"alice"', '"username":"alicf"'));
    const err = await refusal(dir);
    expect(err.message).toContain(`The store ${file} cannot be read (its checksum does not match`);
    expect(follow(err)).toEqual([`cp '${file}.bak' '${file}'`]);
    const store = await openAgain(dir);
    expect(store.all('users').map((u) => u.username)).toEqual(['alice', 'bob']);
  });

  it('a damaged first line (so the file is read whole) is checked too', async () => {
    const dir = await closedStore();
    const file = path.join(dir, 'db.json');
    await writeFile(file, (await readFile(file, 'utf8')).replace('{"journal_seq":', '{"journal_sez":'));
    expect((await refusal(dir)).message).toContain('its checksum does not match');
  });

  it('a document a script rewrote whole (parse, edit, stringify) has no bytes of svc left to check: it loads as one written by hand', async () => {
    const dir = await closedStore();
    const file = path.join(dir, 'db.json');
    const db = JSON.parse(await readFile(file, 'utf8'));
    db.users[0].username = 'alicia';
    for (const text of [JSON.stringify(db), JSON.stringify(db, null, 2)]) {
      await writeFile(file, text);
      const store = await openAgain(dir);
      expect(store.all('users').map((u) => u.username)).toEqual(['alicia', 'bob']);
    }
  });

  it('a snapshot an older svc wrote (no checksum) still loads', async () => {
    const dir = await closedStore();
    const file = path.join(dir, 'db.json');
    await writeFile(file, (await readFile(file, 'utf8')).replace(/\n,"snapshot_sha256":"[^"]*"\n/, '\n'));
    expect(ids(await openAgain(dir))).toEqual(['alice', 'bob']);
  });
});

describe('a journal that lost its end is noticed (db.seq)', () => {
  it('the last journal file deleted after a crash: refused, naming what is missing; going on without it loses what it says', async () => {
    const dir = await threeJournalFiles();
    const last = path.join(dir, 'db.journal.9');
    const kept = await readFile(last);
    await rm(last);
    const err = await refusal(dir);
    expect(err.message).toContain('The store lacks changes 9 to 10 (2 changes)');
    // put back, nothing is lost
    await writeFile(last, kept);
    expect(ids(await openAgain(dir))).toEqual(range(1, 10));
    // or gone for good: the way out loses exactly those
    await rm(last);
    follow(await refusal(dir));
    expect(ids(await openAgain(dir))).toEqual(range(1, 8));
  });

  it('the last journal file cut at a line boundary: refused', async () => {
    const dir = await threeJournalFiles();
    const last = path.join(dir, 'db.journal.9');
    await truncate(last, (await readFile(last, 'utf8')).indexOf('\n') + 1);
    const err = await refusal(dir);
    expect(err.message).toContain('The store lacks change 10');
    expect(err.message).toContain(`${last} was cut short`);
    follow(err);
    expect(ids(await openAgain(dir))).toEqual(range(1, 9));
  });

  it('after a clean stop db.json has every change: a lost journal file loses nothing, and the start goes on', async () => {
    const dir = await threeJournalFiles();
    const store = await open(dir);
    await store.update((tx) => tx.put('users', user('u11')));
    await store.close();
    for (const name of await journals(dir)) await rm(path.join(dir, name));
    expect(ids(await openAgain(dir))).toEqual(range(1, 11));
  });

  it('a damaged db.seq refuses the start; moving it aside as told starts with everything', async () => {
    const dir = await threeJournalFiles();
    await writeFile(path.join(dir, 'db.seq'), (await readFile(path.join(dir, 'db.seq'), 'utf8')).replace('10', '19'));
    const err = await refusal(dir);
    expect(err.message).toContain('is damaged (it does not check out)');
    follow(err);
    expect(ids(await openAgain(dir))).toEqual(range(1, 10));
  });

  it('a journal file missing from the middle: put back, nothing is lost; without it, the way out loses what it says', async () => {
    const dir = await threeJournalFiles();
    const middle = path.join(dir, 'db.journal.6');
    const kept = await readFile(middle);
    await rm(middle);
    const err = await refusal(dir);
    expect(err.message).toContain(`The store's journal lacks changes 6 to 8 (3 changes)`);
    expect(err.message).toContain('which loses changes 6 to 10 (5 changes)');
    await writeFile(middle, kept);
    expect(ids(await openAgain(dir))).toEqual(range(1, 10));
    await rm(middle);
    opened.pop();
    follow(await refusal(dir));
    expect(ids(await openAgain(dir))).toEqual(range(1, 5));
  });
});

describe('db.json replaced by an older copy of itself (the store goes back in time)', () => {
  it('is refused once the journal no longer holds what came after it; putting the newer one back loses nothing', async () => {
    const dir = await tempDir();
    // a snapshot after every change, so journal files are dropped as db.json.bak moves on
    const store = await open(dir, 1);
    for (let i = 1; i <= 2; i++) await store.update((tx) => tx.put('users', user(`u${i}`)));
    await store.settled();
    const old = await readFile(path.join(dir, 'db.json'));
    for (let i = 3; i <= 8; i++) await store.update((tx) => tx.put('users', user(`u${i}`)));
    await store.close();
    const current = await readFile(path.join(dir, 'db.json'));
    await writeFile(path.join(dir, 'db.json'), old);
    const err = await refusal(dir);
    expect(err.message).toContain('if db.json was replaced by an older copy, put the newer one back');
    await writeFile(path.join(dir, 'db.json'), current);
    expect(ids(await openAgain(dir))).toEqual(range(1, 8));
  });
});

describe('a journal file or db.json from another data dir: refused, never loaded as this store\'s changes', () => {
  /** Another store in `other`, its changes numbered as those of threeJournalFiles(). */
  async function anotherStore(): Promise<string> {
    const other = await tempDir();
    const o = await open(other);
    for (let i = 1; i <= 5; i++) await o.update((tx) => tx.put('users', user(`u${i}`)));
    const o2 = await open(other);
    for (let i = 6; i <= 8; i++) await o2.update((tx) => tx.put('users', user(`intruder${i}`)));
    expect(await journals(other)).toEqual(['db.journal.1', 'db.journal.6']);
    return other;
  }

  it("copied in over this store's own file of the same name (same changes numbered alike)", async () => {
    const dir = await threeJournalFiles();
    const other = await anotherStore();
    const copied = path.join(dir, 'db.journal.6');
    await writeFile(copied, await readFile(path.join(other, 'db.journal.6')));
    const err = await refusal(dir);
    expect(err.file).toBe(copied);
    expect(err.message).toContain(`The store's journal ${copied} does not belong with the rest of the store: line 1 (change 6) checks out, but it was written by another store than ${path.join(dir, 'db.json')} and the rest of this store's journal`);
    expect(err.message).toContain('svc will not start, and has changed no file.');
    // the way out that loses least goes on from change 5, as for a damaged line
    expect(err.message).toContain('loses changes 6 to 10 (5 changes)');
    follow(err);
    expect(ids(await openAgain(dir))).toEqual(range(1, 5));
  });

  it("another store's db.json put beside this store's journal: no line names its store, and svc cannot tell which is the stranger", async () => {
    const dir = await threeJournalFiles();
    const other = await anotherStore();
    // both db.json files are the first snapshot of a new store (change 0): only their marks and chains differ
    await writeFile(path.join(dir, 'db.json'), await readFile(path.join(other, 'db.json')));
    const err = await refusal(dir);
    expect(err.message).toContain(`line 1 (change 1) checks out, but it was written by another store than ${path.join(dir, 'db.json')} (each names the store it belongs to), and no journal line here names the store db.json names`);
    expect(err.message).toContain('put this store\'s back from a backup of the data dir');
    expect(follow(err)).toEqual([]);
  });

  it("another store's db.json holding as many changes as this store's journal (both stopped cleanly): refused, though no change follows it", async () => {
    const dir = await tempDir();
    const other = await tempDir();
    for (const [d, name] of [[dir, 'u'], [other, 'intruder']]) {
      const s = await open(d);
      for (let i = 1; i <= 3; i++) await s.update((tx) => tx.put('users', user(`${name}${i}`)));
      await s.close(); // db.json holds changes 1 to 3; db.journal.1, kept for db.json.bak, holds them too
    }
    const file = path.join(dir, 'db.json');
    await writeFile(file, await readFile(path.join(other, 'db.json')));
    const err = await refusal(dir);
    expect(err.message).toContain(`line 1 (change 1) checks out, but it was written by another store than ${file}`);
    // which of the two came from elsewhere cannot be told, so no way out is offered as the one to run
    expect(follow(err)).toEqual([]);
    const restore = `mv '${file}' '${file}.other' && cp '${file}.bak' '${file}'`;
    expect(err.message).toContain(restore);
    execFileSync('sh', ['-c', restore]);
    expect(ids(await openAgain(dir))).toEqual(range(1, 3));
  });

  // nothing here follows or precedes a db.json beyond every change this journal holds: the mark
  // of the store, in db.json and in every line, tells
  it("another store's db.json that has made more changes than this store's journal holds: refused", async () => {
    const dir = await tempDir();
    const other = await tempDir();
    for (const [d, name, count] of [[dir, 'u', 3], [other, 'intruder', 4]] as const) {
      const s = await open(d);
      for (let i = 1; i <= count; i++) await s.update((tx) => tx.put('users', user(`${name}${i}`)));
      await s.close();
    }
    await writeFile(path.join(dir, 'db.json'), await readFile(path.join(other, 'db.json')));
    const err = await refusal(dir);
    expect(err.message).toContain('checks out, but it was written by another store than');
  });

  it('a store an older svc wrote (lines that name nothing, a snapshot without a chain) loads, and its next changes are chained', async () => {
    const dir = await tempDir();
    // the older format: [seq, ops] lines, and a db.json without journal_chain
    const snapshot = JSON.stringify({ journal_seq: 0, meta: null, users: [], sessions: [], mcp_instances: [], access_requests: [] });
    await writeFile(path.join(dir, 'db.json'), `${snapshot}\n`);
    const old = (seq: number) => {
      const json = JSON.stringify([seq, [['p', 'users', `u${seq}`, user(`u${seq}`)]]]);
      return `${json}\t${createHash('sha256').update(json).digest('base64url').slice(0, 16)}\n`;
    };
    await writeFile(path.join(dir, 'db.journal.1'), old(1) + old(2));
    const s = await open(dir);
    expect(ids(s)).toEqual(range(1, 2));
    await s.update((tx) => tx.put('users', user('u3')));
    expect(await journals(dir)).toEqual(['db.journal.1', 'db.journal.3']);
    const olderLast = (await readFile(path.join(dir, 'db.journal.1'), 'utf8')).trimEnd().split('\n')[1];
    const [json, digest] = (await readFile(path.join(dir, 'db.journal.3'), 'utf8')).trimEnd().split('\t');
    // the new line follows the older one's digest, and still ends in its own JSON's digest, as an older svc checks
    expect(JSON.parse(json)[2]).toBe(olderLast.split('\t')[1]);
    expect(createHash('sha256').update(json).digest('base64url').slice(0, 16)).toBe(digest);
    // the store's mark comes with the first new line; a crash before any snapshot names it keeps it
    const mark = JSON.parse(json)[3] as string;
    expect(mark).toMatch(/^[\w-]{16}$/);
    const afterCrash = await open(dir);
    await afterCrash.update((tx) => tx.put('users', user('u4')));
    const lastLine = (await readFile(path.join(dir, 'db.journal.4'), 'utf8')).trimEnd().split('\t')[0];
    expect(JSON.parse(lastLine)[3]).toBe(mark);
    await afterCrash.close();
    expect(ids(await openAgain(dir))).toEqual(range(1, 4));
    expect((await readFile(path.join(dir, 'db.json'), 'utf8')).split('\n')[0]).toContain(`"journal_store":"${mark}"`);
  });
});

describe('a downgrade to an older svc (one that writes no chain), then this version again', () => {
  /**
   * What an older svc leaves after changes `from`..`to` and a clean stop: lines that name
   * nothing, db.json.bak the db.json it started from, and a db.json at `to` that carries the
   * journal_chain and journal_store it read on as documents of its own, unchanged (the chain of an
   * earlier change, and the store's mark).
   */
  async function olderSvcRun(dir: string, from: number, to: number): Promise<void> {
    const file = path.join(dir, 'db.json');
    const header = JSON.parse(`${(await readFile(file, 'utf8')).split('\n')[0]}}`) as Record<string, unknown>;
    expect(header.journal_chain).toEqual(expect.any(String));
    const contents = (await readSnapshot(file))!;
    let lines = '';
    for (let seq = from; seq <= to; seq++) {
      const json = JSON.stringify([seq, [['p', 'users', `u${seq}`, user(`u${seq}`)]]]);
      lines += `${json}\t${createHash('sha256').update(json).digest('base64url').slice(0, 16)}\n`;
      contents.collections.get('users')!.set(`u${seq}`, user(`u${seq}`));
    }
    await writeFile(path.join(dir, `db.journal.${from}`), lines);
    await copyFile(file, `${file}.bak`);
    const handle = await fsOpen(file, 'w');
    try {
      const docs = new Map<string, unknown>([['journal_chain', header.journal_chain], ['journal_store', header.journal_store], ...contents.docs]);
      await writeSnapshot(handle, { seq: to, collections: contents.collections, docs }, (h, buf) => h.write(buf).then(() => undefined));
    } finally {
      await handle.close();
    }
    await writeFile(path.join(dir, 'db.seq'), seqLine(to));
  }

  it("the chain an older svc carried on names an earlier change: after a crash, db.json damaged and db.json.bak restored as told, nothing is lost", async () => {
    const dir = await tempDir();
    const store = await open(dir);
    for (let i = 1; i <= 3; i++) await store.update((tx) => tx.put('users', user(`u${i}`)));
    await store.close(); // db.json at change 3, with its chain
    await olderSvcRun(dir, 4, 5); // db.json at change 5, still naming change 3's chain; db.json.bak at change 3
    await writeThenCrash(dir, 6, 6); // this version again, killed before a snapshot
    expect(ids(await openAgain(dir))).toEqual(range(1, 6));
    const file = path.join(dir, 'db.json');
    await writeFile(file, (await readFile(file, 'utf8')).replace('"username":"u1"', '"username":"x1"'));
    const err = await refusal(dir);
    expect(follow(err)).toEqual([`cp '${file}.bak' '${file}'`]);
    expect(ids(await openAgain(dir))).toEqual(range(1, 6));
  });

  it("another store's db.json put beside a journal whose lines an older svc wrote (they name no store): db.json.bak names this store, so it is refused", async () => {
    const dir = await tempDir();
    const store = await open(dir);
    for (let i = 1; i <= 3; i++) await store.update((tx) => tx.put('users', user(`u${i}`)));
    await store.close(); // db.json at change 3, with the store's mark
    await olderSvcRun(dir, 4, 5); // db.json at change 5, still naming the mark; db.json.bak at change 3
    // the older svc's next snapshot would drop db.journal.1 (db.json.bak holds it): every line left names nothing
    await rm(path.join(dir, 'db.journal.1'));
    expect(ids(await openAgain(dir))).toEqual(range(1, 5));
    await opened.pop()!.close();
    const other = await tempDir();
    const o = await open(other);
    // more changes than this journal holds: no line of it is the change that db.json ends at
    for (let i = 1; i <= 6; i++) await o.update((tx) => tx.put('users', user(`intruder${i}`)));
    await o.close();
    const file = path.join(dir, 'db.json');
    await writeFile(file, await readFile(path.join(other, 'db.json')));
    const err = await refusal(dir);
    expect(err.file).toBe(file);
    expect(err.message).toContain(`The store's snapshot ${file} and its copy ${file}.bak name two different stores`);
    expect(err.message).toContain('svc will not start, and has changed no file.');
    // which of the two came from elsewhere cannot be told, so no way out is offered as the one to run
    expect(follow(err)).toEqual([]);
    const restore = `mv '${file}' '${file}.other' && cp '${file}.bak' '${file}'`;
    expect(err.message).toContain(restore);
    expect(err.message).toContain(`mv '${file}.bak' '${file}.bak.other'`);
    execFileSync('sh', ['-c', restore]);
    expect(ids(await openAgain(dir))).toEqual(range(1, 5));
  });
});

describe('db.json and db.json.bak both missing beside journal files: never an empty store', () => {
  it('a journal that starts at the first change: the way out rebuilds the whole store from it', async () => {
    const dir = await tempDir();
    await writeThenCrash(dir, 1, 5);
    await rm(path.join(dir, 'db.json'));
    const err = await refusal(dir);
    expect(err.message).toContain('are both missing');
    expect(err.message).toContain('svc will not start an empty store');
    follow(err);
    expect(ids(await openAgain(dir))).toEqual(range(1, 5));
  });

  it('a journal that starts later: refused every time, offering no way that starts over; restoring db.json from a backup loses nothing', async () => {
    const dir = await tempDir();
    const crashed = await writeThenCrash(dir, 1, 30, 1); // a snapshot after nearly every write: the first journal files are dropped
    await crashed.settled(); // the last snapshot, written in the background, is done
    expect((await journals(dir))[0]).not.toBe('db.journal.1');
    const backup = await readFile(path.join(dir, 'db.json'));
    await rm(path.join(dir, 'db.json'));
    await rm(path.join(dir, 'db.json.bak'));
    const err = await refusal(dir);
    expect(err.message).toContain('are both missing');
    expect(err.message).toContain('from a backup of the data dir');
    expect(follow(err), 'a way out that starts over').toEqual([]);
    expect(err.message).not.toMatch(/\bmove\b|\bmv\b/);
    await refusal(dir); // and again: following nothing changes nothing
    await writeFile(path.join(dir, 'db.json'), backup);
    expect(ids(await openAgain(dir)).sort()).toEqual(range(1, 30).sort());
  });

  it('db.json missing beside its .bak: the copy it names restores everything', async () => {
    const dir = await tempDir();
    const store = await open(dir);
    await store.update((tx) => tx.put('users', user('u1')));
    await store.close();
    await writeThenCrash(dir, 2, 3);
    await rm(path.join(dir, 'db.json'));
    const err = await refusal(dir);
    expect(follow(err)).toEqual([`cp '${path.join(dir, 'db.json.bak')}' '${path.join(dir, 'db.json')}'`]);
    expect(ids(await openAgain(dir))).toEqual(range(1, 3));
  });
});
