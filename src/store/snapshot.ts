import { createReadStream } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { CorruptStoreError, readJsonFileOrRefuse, snapshotBackup } from './durable-file.js';
import { recordProblem, requiredCollections, validateDb } from './schema.js';
import { type CollectionName, COLLECTION_KEYS, isCollection } from './tables.js';

/** the snapshot's own field: the last journal entry it holds */
export const SEQ_FIELD = 'journal_seq';

export interface StoreContents {
  /** the sequence number of the last change held */
  seq: number;
  collections: Map<CollectionName, Map<string, unknown>>;
  docs: Map<string, unknown>;
}

/*
 * db.json is one JSON document (lowdb's shape) written one record per line:
 *
 *   {"journal_seq":12,"meta":{...},"oauth_keys":"..."
 *   ,"users":[
 *   {...}
 *   ,{...}
 *   ]
 *   ,"mcp_tools":{
 *   "<key>":{...}
 *   }
 *   }
 *
 * so it can be written a few hundred records at a time and read back a record at a time: a
 * large store is never in memory twice, as text and as objects. Any other JSON of the right
 * shape (an older svc's file, one edited by hand) is read whole.
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
  const push = (text: string) => {
    parts.push(text);
    size += text.length;
    return size >= CHUNK;
  };
  push(`{"${SEQ_FIELD}":${contents.seq}`);
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
  push('}\n');
  await flush();
  return written;
}

/**
 * Reads db.json: null when there is none (and no backup), else its contents. Refuses
 * (CorruptStoreError, nothing touched) a file that does not parse or check out, and a missing
 * one beside its backup.
 */
export async function readSnapshot(file: string): Promise<StoreContents | null> {
  const streamed = await readLineByLine(file);
  if (streamed !== 'not-line-shaped') return streamed;
  const loaded = await readJsonFileOrRefuse(file, validateDb);
  if (!loaded) return null;
  const contents: StoreContents = { seq: 0, collections: new Map(), docs: new Map() };
  const intern = stringInterner();
  for (const [name, value] of Object.entries(loaded)) {
    if (name === SEQ_FIELD) contents.seq = typeof value === 'number' ? value : 0;
    else if (isCollection(name)) contents.collections.set(name, recordsOf(name, value, intern));
    else contents.docs.set(name, value);
  }
  return contents;
}

/** Whether the file starts the way writeSnapshot writes: its header line ends within the first 256 KiB. */
async function lineShaped(file: string): Promise<boolean> {
  const handle = await open(file, 'r').catch(() => null);
  if (!handle) return true; // let the reader report what is wrong
  try {
    const head = Buffer.alloc(256 * 1024);
    const { bytesRead } = await handle.read(head, 0, head.length, 0);
    const text = head.subarray(0, bytesRead).toString('utf8');
    return text.startsWith(`{"${SEQ_FIELD}":`) && text.includes('\n');
  } finally {
    await handle.close();
  }
}

async function readLineByLine(file: string): Promise<StoreContents | null | 'not-line-shaped'> {
  if (!(await lineShaped(file))) return 'not-line-shaped';
  const stream = createReadStream(file, { encoding: 'utf8', highWaterMark: 1024 * 1024 });
  const opened = await new Promise<NodeJS.ErrnoException | null>((resolve) => {
    stream.once('open', () => resolve(null));
    stream.once('error', (err) => resolve(err));
  });
  if (opened) {
    stream.destroy();
    if (opened.code === 'ENOENT') return readJsonFileOrRefuse(file, validateDb).then(() => null);
    throw opened;
  }
  const lines = createInterface({ input: stream, crlfDelay: Infinity });
  const refuse = async (reason: string) => new CorruptStoreError(file, reason, await snapshotBackup(file));
  const intern = stringInterner();
  const contents: StoreContents = { seq: 0, collections: new Map(), docs: new Map() };
  let collection: { name: CollectionName | string; asObject: boolean; records: Map<string, unknown> } | null = null;
  let lineNo = 0;
  let ended = false;
  try {
    for await (const line of lines) {
      lineNo++;
      if (lineNo === 1) {
        if (!line.startsWith(`{"${SEQ_FIELD}":`)) return 'not-line-shaped';
        let header: Record<string, unknown>;
        try {
          header = JSON.parse(`${line}}`) as Record<string, unknown>;
        } catch {
          return 'not-line-shaped';
        }
        for (const [name, value] of Object.entries(header)) {
          if (name === SEQ_FIELD) contents.seq = typeof value === 'number' ? value : 0;
          else contents.docs.set(name, value);
        }
        const meta = contents.docs.get('meta') as { schema?: unknown } | null | undefined;
        if (meta === undefined || (meta !== null && (typeof meta !== 'object' || meta.schema !== 1))) throw await refuse('unexpected content: meta: not a meta record');
        continue;
      }
      if (ended) {
        if (line.trim() === '') continue;
        throw await refuse(`not valid JSON: content after the end, line ${lineNo}`);
      }
      if (!collection) {
        if (line === '}') {
          ended = true;
          continue;
        }
        const open = /^,("(?:[^"\\]|\\.)*"):([[{])$/.exec(line);
        if (!open) throw await refuse(`not valid JSON: line ${lineNo} is not a collection`);
        const name = JSON.parse(open[1]) as string;
        collection = { name, asObject: open[2] === '{', records: new Map() };
        continue;
      }
      if (line === (collection.asObject ? '}' : ']')) {
        const { name, records } = collection;
        if (isCollection(name)) contents.collections.set(name, records);
        else contents.docs.set(name, collection.asObject ? Object.fromEntries(records) : [...records.values()]);
        collection = null;
        continue;
      }
      const text = line.startsWith(',') && collection.records.size > 0 ? line.slice(1) : line;
      let parsed: unknown;
      try {
        parsed = JSON.parse(collection.asObject ? `{${text}}` : text);
      } catch (err) {
        throw await refuse(`not valid JSON: line ${lineNo}: ${(err as Error).message}`);
      }
      if (collection.asObject) {
        const [[key, value]] = Object.entries(parsed as Record<string, unknown>);
        collection.records.set(key, value);
        continue;
      }
      const problem = recordProblem(collection.name, parsed);
      if (problem) throw await refuse(`unexpected content: ${collection.name}.${collection.records.size}: ${problem}`);
      const keyOf = isCollection(collection.name) ? (COLLECTION_KEYS[collection.name] as ((r: unknown) => string) | null) : null;
      collection.records.set(keyOf ? keyOf(parsed) : String(collection.records.size), intern(parsed, ''));
      // A large store's load leaves its garbage (lines, parse temporaries) behind each record kept;
      // collected as it goes, it never becomes the daemon's high-water mark for the rest of its life.
      if (collection.records.size % 10_000 === 0) collectGarbage();
    }
  } finally {
    lines.close();
    stream.destroy();
  }
  if (!ended) throw await refuse('not valid JSON: the file ends early (cut off)');
  for (const name of requiredCollections) if (!contents.collections.has(name)) throw await refuse(`unexpected content: ${name}: missing`);
  return contents;
}

let gcFn: (() => void) | null | undefined;
/** A full garbage collection, where V8 lets us ask for one (it does once --expose-gc is set). */
function collectGarbage(): void {
  if (gcFn === undefined) {
    try {
      setFlagsFromString('--expose-gc');
      gcFn = runInNewContext('gc') as () => void;
    } catch {
      gcFn = null;
    }
  }
  gcFn?.();
}

export function recordsOf(name: CollectionName, value: unknown, intern: (v: unknown, key: string) => unknown): Map<string, unknown> {
  const key = COLLECTION_KEYS[name] as ((r: unknown) => string) | null;
  if (!key) return new Map(Object.entries((value ?? {}) as Record<string, unknown>));
  return new Map(((value ?? []) as unknown[]).map((r) => [key(r), intern(r, '')]));
}

/**
 * One copy of each repeated string value (client ids, URLs, roles, statuses) across the records
 * loaded: JSON.parse makes a new string for every occurrence, which for a large store is much of
 * its memory. Ids, timestamps, hashes and sealed values are unique and are left alone.
 */
export function stringInterner(): (v: unknown, key: string) => unknown {
  const table = new Map<string, string>();
  const unique = (key: string) => key === 'id' || key.endsWith('_hash') || key === 'payload' || key === 'csrf' || key === 'value';
  // Timestamps repeat within a record (updated_at is decided_at, revoked_at), rarely across records.
  let times = new Map<string, string>();
  const intern = (v: unknown, key: string): unknown => {
    if (key === '') times = new Map();
    if (typeof v === 'string') {
      if (key.endsWith('_at')) {
        const seen = times.get(v);
        if (seen !== undefined) return seen;
        times.set(v, v);
        return v;
      }
      if (v.length > 512 || unique(key)) return v;
      const seen = table.get(v);
      if (seen !== undefined) return seen;
      table.set(v, v);
      return v;
    }
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) v[i] = intern(v[i], key);
    } else if (v && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      for (const k of Object.keys(o)) o[k] = intern(o[k], k);
    }
    return v;
  };
  return intern;
}
