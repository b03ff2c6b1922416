import { createHash, type Hash } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { CorruptStoreError, nodeFs, readJsonFileOrRefuse, snapshotBackup, type StoreFs } from './durable-file.js';
import { collectEvery, stringInterner } from './memory.js';
import { metaProblem, recordProblem, requiredCollections, validateDb } from './schema.js';
import { type CollectionName, COLLECTION_KEYS, isCollection } from './tables.js';

/** the snapshot's own field: the last journal entry it holds */
export const SEQ_FIELD = 'journal_seq';
/**
 * The snapshot's own field: `<journal_seq>:<digest>`, the digest of that last entry's journal
 * line (for a new store's first snapshot, a random value of its own), which the next line names
 * as the one it follows (journal.ts). Absent from a snapshot an older svc wrote. An older svc
 * keeps a field it does not know as a document and writes it back unchanged, at whatever change
 * its own snapshot ends: so the value names its change, and one naming another change than the
 * snapshot's own is no chain at all.
 */
export const CHAIN_FIELD = 'journal_chain';

const chainValue = (seq: number, chain: string) => `${seq}:${chain}`;

/**
 * The snapshot's own field: the store's mark, a random value made with the store that never
 * changes, which every journal line carries too (journal.ts). An older svc writes it back as it
 * found it, which for a value that never changes is right.
 */
export const STORE_FIELD = 'journal_store';

const storeMark = (value: unknown) => (typeof value === 'string' && value !== '' ? value : undefined);

/** The chain a CHAIN_FIELD value gives a snapshot at `seq`: none when it names another change (or is not svc's). */
function chainAt(value: unknown, seq: number): string | undefined {
  if (typeof value !== 'string') return undefined;
  const colon = value.indexOf(':');
  return colon > 0 && value.slice(0, colon) === String(seq) ? value.slice(colon + 1) : undefined;
}
/**
 * The snapshot's checksum: the SHA-256 (base64url) of every byte before its own line. It is the
 * last field, so it is computed while the records stream out and checked while they stream in.
 */
export const CHECK_FIELD = 'snapshot_sha256';
const CHECK_PREFIX = `,"${CHECK_FIELD}":`;
/** why a snapshot whose bytes no longer match its checksum is refused */
const CHECK_MISMATCH = 'its checksum does not match: a byte of it changed after it was written';

export interface StoreContents {
  /** the sequence number of the last change held */
  seq: number;
  /** the journal's chain at `seq` (CHAIN_FIELD), when the snapshot has one for that change */
  chain?: string;
  /** the store's mark (STORE_FIELD), when the snapshot has one */
  store?: string;
  collections: Map<CollectionName, Map<string, unknown>>;
  docs: Map<string, unknown>;
}

/*
 * db.json is one JSON document (lowdb's shape) written one record per line:
 *
 *   {"journal_seq":12,"journal_chain":"12:<digest>","meta":{...},"oauth_keys":"..."
 *   ,"users":[
 *   {...}
 *   ,{...}
 *   ]
 *   ,"mcp_tools":{
 *   "<key>":{...}
 *   }
 *   ,"snapshot_sha256":"<SHA-256 of every line above>"
 *   }
 *
 * so it can be written a few hundred records at a time and read back a record at a time: a
 * large store is never in memory twice, as text and as objects. The checksum makes a byte
 * changed inside a value (which still parses) a refused store rather than data. Any other JSON of
 * the right shape is read whole; it is checked too when it still has svc's checksum line.
 *
 * Upgrade: a snapshot an older svc wrote has no checksum field, and is loaded as before (there is
 * nothing to check it against); the first snapshot this version writes carries one.
 */

/** Streams `contents` as that document, yielding to the event loop between chunks. Answers the bytes written. */
export async function writeSnapshot(handle: FileHandle, contents: StoreContents, write: (h: FileHandle, buf: Buffer) => Promise<void>): Promise<number> {
  const CHUNK = 256 * 1024;
  let parts: string[] = [];
  let size = 0;
  let written = 0;
  const flush = async () => {
    if (parts.length === 0) return;
    const buf = Buffer.from(parts.join(''));
    parts = [];
    size = 0;
    await write(handle, buf);
    written += buf.length;
  };
  const hash = createHash('sha256');
  const push = (text: string) => {
    parts.push(text);
    hash.update(text);
    size += text.length;
    return size >= CHUNK;
  };
  push(`{"${SEQ_FIELD}":${contents.seq}`);
  if (contents.chain !== undefined) push(`,"${CHAIN_FIELD}":${JSON.stringify(chainValue(contents.seq, contents.chain))}`);
  if (contents.store !== undefined) push(`,"${STORE_FIELD}":${JSON.stringify(contents.store)}`);
  if (contents.docs.get('meta') === undefined) push(',"meta":null');
  for (const [name, value] of contents.docs) if (value !== undefined) push(`,${JSON.stringify(name)}:${JSON.stringify(value)}`);
  push('\n');
  for (const [name, records] of contents.collections) {
    const asObject = COLLECTION_KEYS[name] === null;
    push(`,${JSON.stringify(name)}:${asObject ? '{' : '['}\n`);
    let first = true;
    for (const [key, record] of records) {
      if (push(`${first ? '' : ','}${asObject ? `${JSON.stringify(key)}:` : ''}${JSON.stringify(record)}\n`)) await flush();
      first = false;
    }
    push(`${asObject ? '}' : ']'}\n`);
  }
  parts.push(`${CHECK_PREFIX}${JSON.stringify(hash.digest('base64url'))}\n}\n`);
  await flush();
  return written;
}

/**
 * Reads db.json: null when there is none (and no backup), else its contents. Refuses
 * (CorruptStoreError, nothing touched) a file that does not parse or check out, and a missing
 * one beside its backup.
 */
export async function readSnapshot(file: string, fs: StoreFs = nodeFs): Promise<StoreContents | null> {
  const streamed = await readLineByLine(file, fs);
  if (streamed !== 'not-line-shaped') return streamed;
  const loaded = await readJsonFileOrRefuse(file, checkWholeSnapshot, fs);
  if (!loaded) return null;
  const contents: StoreContents = { seq: 0, collections: new Map(), docs: new Map() };
  const intern = stringInterner();
  for (const [name, value] of Object.entries(loaded)) {
    if (name === SEQ_FIELD) contents.seq = typeof value === 'number' ? value : 0;
    else if (name === CHAIN_FIELD || name === STORE_FIELD || name === CHECK_FIELD) continue;
    else if (isCollection(name)) contents.collections.set(name, recordsOf(name, value, intern));
    else contents.docs.set(name, value);
  }
  contents.chain = chainAt(loaded[CHAIN_FIELD], contents.seq);
  contents.store = storeMark(loaded[STORE_FIELD]);
  return contents;
}

/**
 * A snapshot read whole (not in the shape writeSnapshot streams, e.g. its first line was
 * damaged): of svc's shape, and matching its checksum where the checksum still sits on its own
 * line as svc wrote it. A document a tool rewrote whole (JSON.parse, edit, JSON.stringify: one
 * line, or pretty-printed) keeps the field but none of svc's bytes, so there is nothing to check
 * it against: it is read as one written by hand. A byte changed in svc's file keeps its lines.
 */
function checkWholeSnapshot(value: unknown, text: string): ReturnType<typeof validateDb> {
  const checked = validateDb(value);
  if (!checked.ok) return { ok: false, reason: `unexpected content: ${checked.reason}` };
  const expected = (value as Record<string, unknown>)[CHECK_FIELD];
  const at = text.lastIndexOf(`\n${CHECK_PREFIX}`);
  if (expected === undefined || at < 0) return checked;
  const actual = createHash('sha256').update(text.slice(0, at + 1)).digest('base64url');
  return actual === expected ? checked : { ok: false, reason: CHECK_MISMATCH };
}

/**
 * The store's mark a snapshot names, from its first line only (db.json.bak at each start: no
 * second read of the whole store). Undefined when there is none, or the file is missing or not in
 * the shape writeSnapshot writes.
 */
export async function readStoreMark(file: string, fs: StoreFs = nodeFs): Promise<string | undefined> {
  try {
    const header = await headerLine(file, fs);
    return header ? storeMark((JSON.parse(`${header}}`) as Record<string, unknown>)[STORE_FIELD]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A snapshot's header line, as writeSnapshot writes it: ending within the first 256 KiB. Null when
 * the file does not start so; undefined when it cannot be opened.
 */
async function headerLine(file: string, fs: StoreFs): Promise<string | null | undefined> {
  const handle = await fs.open(file, 'r').catch(() => null);
  if (!handle) return undefined;
  try {
    const head = Buffer.alloc(256 * 1024);
    const { bytesRead } = await handle.read(head, 0, head.length, 0);
    const text = head.subarray(0, bytesRead).toString('utf8');
    const newline = text.indexOf('\n');
    return text.startsWith(`{"${SEQ_FIELD}":`) && newline >= 0 ? text.slice(0, newline) : null;
  } finally {
    await handle.close();
  }
}

/** Whether the file starts the way writeSnapshot writes (one that cannot be opened: the reader reports what is wrong). */
async function lineShaped(file: string, fs: StoreFs): Promise<boolean> {
  return (await headerLine(file, fs)) !== null;
}

async function readLineByLine(file: string, fs: StoreFs): Promise<StoreContents | null | 'not-line-shaped'> {
  if (!(await lineShaped(file, fs))) return 'not-line-shaped';
  let handle: FileHandle;
  try {
    handle = await fs.open(file, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return readJsonFileOrRefuse(file, checkWholeSnapshot, fs).then(() => null);
    throw err;
  }
  const stream = handle.createReadStream({ encoding: 'utf8', highWaterMark: 1024 * 1024 });
  const lines = createInterface({ input: stream, crlfDelay: Infinity });
  const reader = new SnapshotLines(async (reason) => new CorruptStoreError(file, reason, await snapshotBackup(file, fs)));
  try {
    for await (const line of lines) {
      if ((await reader.take(line)) === 'not-line-shaped') return 'not-line-shaped';
    }
  } finally {
    lines.close();
    stream.destroy();
    await handle.close().catch(() => undefined);
  }
  return reader.finish();
}

/** Takes db.json a line at a time, as writeSnapshot writes it, checking each line and the checksum. */
class SnapshotLines {
  private readonly intern = stringInterner();
  private readonly collect = collectEvery();
  private readonly contents: StoreContents = { seq: 0, collections: new Map(), docs: new Map() };
  private readonly hash: Hash = createHash('sha256');
  private collection: { name: CollectionName | string; asObject: boolean; records: Map<string, unknown> } | null = null;
  private lineNo = 0;
  private ended = false;
  /** the checksum line was there and matched; false for a snapshot an older svc wrote */
  private checked = false;

  constructor(private readonly refuse: (reason: string) => Promise<CorruptStoreError>) {}

  async take(line: string): Promise<'not-line-shaped' | void> {
    this.lineNo++;
    if (this.lineNo === 1) return this.header(line);
    if (this.ended) {
      if (line.trim() === '') return;
      throw await this.refuse(`not valid JSON: content after the end, line ${this.lineNo}`);
    }
    if (!this.collection && line.startsWith(CHECK_PREFIX)) return this.checksum(line);
    if (this.checked) {
      // only the closing brace follows the checksum
      if (line !== '}') throw await this.refuse(`not valid JSON: line ${this.lineNo} follows the checksum`);
      this.ended = true;
      return;
    }
    this.hash.update(`${line}\n`);
    if (!this.collection) return this.topLevel(line);
    return this.record(line, this.collection);
  }

  private async header(line: string): Promise<'not-line-shaped' | void> {
    if (!line.startsWith(`{"${SEQ_FIELD}":`)) return 'not-line-shaped';
    let header: Record<string, unknown>;
    try {
      header = JSON.parse(`${line}}`) as Record<string, unknown>;
    } catch {
      return 'not-line-shaped';
    }
    this.hash.update(`${line}\n`);
    for (const [name, value] of Object.entries(header)) {
      if (name === SEQ_FIELD) this.contents.seq = typeof value === 'number' ? value : 0;
      else if (name !== CHAIN_FIELD && name !== STORE_FIELD) this.contents.docs.set(name, value);
    }
    this.contents.chain = chainAt(header[CHAIN_FIELD], this.contents.seq);
    this.contents.store = storeMark(header[STORE_FIELD]);
    const problem = metaProblem(this.contents.docs.get('meta'));
    if (problem) throw await this.refuse(`unexpected content: meta: ${problem}`);
  }

  private async checksum(line: string): Promise<void> {
    if (this.checked) throw await this.refuse(`not valid JSON: a second checksum, line ${this.lineNo}`);
    let expected: unknown;
    try {
      expected = JSON.parse(line.slice(CHECK_PREFIX.length));
    } catch {
      expected = null;
    }
    if (expected !== this.hash.digest('base64url')) throw await this.refuse(CHECK_MISMATCH);
    this.checked = true;
  }

  private async topLevel(line: string): Promise<void> {
    if (line === '}') {
      this.ended = true;
      return;
    }
    const open = /^,("(?:[^"\\]|\\.)*"):([[{])$/.exec(line);
    if (!open) throw await this.refuse(`not valid JSON: line ${this.lineNo} is not a collection`);
    const name = JSON.parse(open[1]) as string;
    this.collection = { name, asObject: open[2] === '{', records: new Map() };
  }

  private async record(line: string, collection: NonNullable<SnapshotLines['collection']>): Promise<void> {
    if (line === (collection.asObject ? '}' : ']')) {
      const { name, records } = collection;
      if (isCollection(name)) this.contents.collections.set(name, records);
      else this.contents.docs.set(name, collection.asObject ? Object.fromEntries(records) : [...records.values()]);
      this.collection = null;
      return;
    }
    const text = line.startsWith(',') && collection.records.size > 0 ? line.slice(1) : line;
    let parsed: unknown;
    try {
      parsed = JSON.parse(collection.asObject ? `{${text}}` : text);
    } catch (err) {
      throw await this.refuse(`not valid JSON: line ${this.lineNo}: ${(err as Error).message}`);
    }
    if (collection.asObject) {
      const [[key, value]] = Object.entries(parsed as Record<string, unknown>);
      collection.records.set(key, value);
      return;
    }
    const problem = recordProblem(collection.name, parsed);
    if (problem) throw await this.refuse(`unexpected content: ${collection.name}.${collection.records.size}: ${problem}`);
    const keyOf = isCollection(collection.name) ? (COLLECTION_KEYS[collection.name] as ((r: unknown) => string) | null) : null;
    collection.records.set(keyOf ? keyOf(parsed) : String(collection.records.size), this.intern(parsed, ''));
    // a large store's load collects its garbage as it goes (memory.ts)
    this.collect(collection.records.size);
  }

  async finish(): Promise<StoreContents> {
    if (!this.ended) throw await this.refuse('not valid JSON: the file ends early (cut off)');
    for (const name of requiredCollections) if (!this.contents.collections.has(name)) throw await this.refuse(`unexpected content: ${name}: missing`);
    return this.contents;
  }
}

export function recordsOf(name: CollectionName, value: unknown, intern: (v: unknown, key: string) => unknown): Map<string, unknown> {
  const key = COLLECTION_KEYS[name] as ((r: unknown) => string) | null;
  if (!key) return new Map(Object.entries((value ?? {}) as Record<string, unknown>));
  return new Map(((value ?? []) as unknown[]).map((r) => [key(r), intern(r, '')]));
}
