import { createReadStream } from 'node:fs';
import { type FileHandle, open, rename, stat, truncate, unlink } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { Logger } from '../log.js';
import { FileWriteError, fsyncDir, writeAll } from '../store/durable-file.js';
import { eventLine } from './event-line.js';
import type { ActivityEvent, GrantUsage } from './schemas.js';
import { type ActivityBounds, type ActivityQuery, type ActivityStore, emptyTotals, type GrantTotals, localDay, usageFromTotals } from './store.js';

/**
 * What apps did with their grants, kept in `activity.jsonl` in the data dir: one JSON line per
 * call, appended in the order they happened, off the request path (a second's worth is written at
 * a time, so a crash may lose the last second, never more; a batch the disk refuses is kept and
 * tried again). It is not the store: no call waits for it, and it holds no secret and no content,
 * only names, counts, sizes and times. A damaged line costs that line alone, and is logged.
 *
 * Events are kept with a bound (days and a number); since they are in time order, what goes is
 * always a prefix, and dropping it is one copy of the rest to a new file. In memory there is only
 * an index: each event's byte offset and time, each grant's event numbers, and each grant's
 * totals. A grant's newest events are then read with one positioned read each, however many
 * events the file holds.
 */

export const ACTIVITY_FILE = 'activity.jsonl';
/** How often buffered events go to disk. */
const FLUSH_MS = 1000;
/**
 * A flush starts sooner once this many wait. At the proxy bench's load (about 11,000 calls a
 * second) batches of 500 left the daemon's peak RSS at 197 and 203 MiB in two runs, batches of 100
 * at 170 and 183 (the log before batching: 171 and 176), for the same CPU within the runs' noise;
 * 100 still writes far less often than once per few events.
 */
const FLUSH_EVENTS = 100;
/** The longest line read back; every field of an event is bounded, so a line is far shorter. */
const MAX_LINE = 16 * 1024;
/**
 * The most events kept in memory while the disk refuses them (full, read-only), tried again each
 * second: at about 0.5 KiB an event, some 5 MiB. Past it a new event is counted but not kept, and
 * the log says so at once, and again with how many once writes go through.
 */
const MAX_PENDING = 10_000;
/** After a cut that failed, the next one a write would queue waits this long (each copies the whole tail). */
const CUT_RETRY_MS = 60_000;
/** Damaged lines named one by one in the log at a start; past these, one line with their number. */
const DAMAGE_NAMED = 20;
/** The largest gap in ids a line may follow; a larger one is a damaged id, not events dropped. */
const MAX_ID_GAP = 100 * MAX_PENDING;

export { type ActivityBounds, type ActivityQuery, type GrantTotals, localDay } from './store.js';

/**
 * Writes `buf` at byte `at`, the end of the last whole line, with a handle opened for that write
 * only: a file held open for writing keeps a read-only remount (a disk gone bad) from happening,
 * and reads need no write access. A write can be short (a disk filling up takes part of it): the
 * rest is written until all is, or it throws, and then what it left is cut off again, so the next
 * append never follows a part of a line. Should that cut fail, the next append makes it first.
 */
async function appendAt(file: string, buf: Buffer, at: number): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(file, 'r+');
    const { size } = await handle.stat();
    if (size < at) throw new Error(`the file is ${size} bytes, shorter than the ${at} of its events: it was changed by something else than svc`);
    if (size > at) await handle.truncate(at);
    try {
      await writeAll(handle, buf, at);
      await handle.datasync();
    } catch (err) {
      await handle.truncate(at).catch(() => undefined);
      throw err;
    }
  } catch (err) {
    throw err instanceof FileWriteError ? err : new FileWriteError(file, err);
  } finally {
    await handle?.close().catch(() => undefined);
  }
}

/** A line as an event, or null when it is not one (torn, damaged, or not after `after`). */
function parseLine(line: string, after: number): ActivityEvent | null {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return null;
  }
  const e = value as ActivityEvent;
  if (!e || typeof e !== 'object' || typeof e.id !== 'string' || typeof e.access_request_id !== 'string' || typeof e.time !== 'string') return null;
  const id = Number(e.id);
  if (!Number.isSafeInteger(id) || id <= after || (after > 0 && id - after > MAX_ID_GAP) || Number.isNaN(Date.parse(e.time))) return null;
  return e;
}

/** What reading the file gives: the index of its events and every grant's totals over them. */
interface FileIndex {
  base: number;
  nextId: number;
  offsets: number[];
  times: number[];
  byGrant: Map<string, number[]>;
  totals: Map<string, GrantTotals>;
  size: number;
  /** the last event lacks its newline (one could not be added): the next append adds it first */
  unterminated: boolean;
}

export class ActivityLog implements ActivityStore {
  /** the id of the first event still indexed */
  private base = 1;
  /** byte offset and time (ms) of each indexed event, by id - base */
  private offsets: number[] = [];
  private times: number[] = [];
  /** each grant's event ids, oldest first */
  private byGrant = new Map<string, number[]>();
  private totals = new Map<string, GrantTotals>();
  /** events recorded but not yet written, in id order */
  private pending: ActivityEvent[] = [];
  /** each pending event's time (ms), read once when it was recorded */
  private pendingTimes: number[] = [];
  private size = 0;
  private unterminated = false;
  /** the disk refused the last write: the events wait, tried again each second */
  private failing = false;
  /** events not kept since the last write that went through (MAX_PENDING) */
  private dropped = 0;
  /** the time before which a write queues no cut (one failed) */
  private cutRetryAt = 0;
  private nextId = 1;
  private timer: NodeJS.Timeout | null = null;
  private fileWork: Promise<unknown> = Promise.resolve();
  private queuedWrite: Promise<boolean> | null = null;
  private closed = false;

  private constructor(
    private readonly file: string,
    private handle: FileHandle,
    private readonly bounds: ActivityBounds,
    private readonly clock: () => number,
    private readonly logger: Logger,
  ) {}

  /** Opens (or creates) the data dir's activity log and indexes it; a torn last line (a crash) is cut off. */
  static async open(dataDir: string, bounds: ActivityBounds, clock: () => number, logger: Logger): Promise<ActivityLog> {
    const file = path.join(dataDir, ACTIVITY_FILE);
    // created if missing, then read through a read-only handle (see appendDurably)
    await (await open(file, 'a', 0o600)).close();
    const handle = await open(file, 'r');
    const log = new ActivityLog(file, handle, bounds, clock, logger);
    await log.index();
    await log.dropOld();
    return log;
  }

  /** Reads the whole file once and installs the index and every grant's totals it gives. */
  private async index(): Promise<void> {
    this.install(await this.readIndex());
  }

  /**
   * The index of the file as it is, built aside: the one in use stays whole meanwhile (limits read
   * its totals, and events recorded during the read count into it), and is replaced in one step.
   */
  private async readIndex(): Promise<FileIndex> {
    const built: FileIndex = { base: this.nextId, nextId: this.nextId, offsets: [], times: [], byGrant: new Map(), totals: new Map(), size: 0, unterminated: false };
    let offset = 0;
    const lines = createInterface({ input: createReadStream(this.file, { encoding: 'utf8' }), crlfDelay: Infinity });
    let first = true;
    let lineNo = 0;
    let lastGood = 0;
    let last = 0;
    const damaged: { line: number; offset: number; bytes: number }[] = [];
    for await (const line of lines) {
      lineNo++;
      const length = Buffer.byteLength(line) + 1;
      const event = parseLine(line, last);
      if (event) {
        const id = Number(event.id);
        if (first) built.base = id;
        first = false;
        // ids are consecutive; a hole (a skipped line) keeps its slot so the arithmetic holds
        while (built.base + built.offsets.length < id) {
          built.offsets.push(offset);
          built.times.push(0);
        }
        this.addToIndex(built, event, offset);
        built.nextId = id + 1;
        built.size = offset + length;
        last = id;
        lastGood = lineNo;
      } else damaged.push({ line: lineNo, offset, bytes: length });
      offset += length;
    }
    const { size } = await stat(this.file);
    if (lastGood > 0 && built.size === size + 1) {
      built.size = size;
      built.unterminated = true;
      await this.terminate(built, lastGood);
    }
    this.reportDamage(damaged.filter((d) => d.offset < built.size));
    if (size > built.size) {
      // the end of the file is not a whole event: a write a crash cut short, or damage
      const cut = damaged.filter((d) => d.offset >= built.size).map((d) => d.line);
      await truncate(this.file, built.size);
      this.logger.warn({ file: this.file, line: cut[0], lines: cut, bytes: size - built.size }, `activity log: cut off ${cut.length === 1 ? `line ${cut[0]}` : `lines ${cut[0]} to ${cut.at(-1)}`}, not whole events, at the end`);
    }
    if (first) built.base = built.nextId;
    return built;
  }

  /** Completes a last line that lacks only its newline, before anything follows it. */
  private async terminate(built: FileIndex, line: number): Promise<void> {
    try {
      await appendAt(this.file, Buffer.from('\n'), built.size);
      built.size++;
      built.unterminated = false;
      this.logger.warn({ file: this.file, line }, `activity log: line ${line}, the last, lacked its newline; it was added`);
    } catch (err) {
      this.logger.warn({ file: this.file, line, err: (err as Error).message }, `activity log: line ${line}, the last, lacks its newline; the next write adds it first`);
    }
  }

  /** Each damaged line, skipped, named in the log: it costs that line alone. */
  private reportDamage(damaged: { line: number; bytes: number }[]): void {
    for (const d of damaged.slice(0, DAMAGE_NAMED)) this.logger.warn({ file: this.file, line: d.line, bytes: d.bytes }, `activity log: line ${d.line} is not a whole event; it is skipped`);
    if (damaged.length > DAMAGE_NAMED) this.logger.warn({ file: this.file, lines: damaged.length }, `activity log: ${damaged.length} lines in all are not whole events; they are skipped`);
  }

  private install(built: FileIndex): void {
    this.base = built.base;
    this.nextId = built.nextId;
    this.offsets = built.offsets;
    this.times = built.times;
    this.byGrant = built.byGrant;
    this.totals = built.totals;
    this.size = built.size;
    this.unterminated = built.unterminated;
  }

  private addToIndex(built: FileIndex, event: ActivityEvent, offset: number): void {
    const id = Number(event.id);
    built.offsets[id - built.base] = offset;
    const time = Date.parse(event.time);
    built.times[id - built.base] = time;
    const ids = built.byGrant.get(event.access_request_id);
    if (ids) ids.push(id);
    else built.byGrant.set(event.access_request_id, [id]);
    this.count(event, time, built.totals);
  }

  private count(event: ActivityEvent, time: number, totals = this.totals): void {
    const today = localDay(this.clock());
    const t = totals.get(event.access_request_id) ?? emptyTotals(today);
    t.calls++;
    if (event.outcome === 'refused') t.refused++;
    t.tokens_in += event.tokens_in ?? 0;
    t.tokens_out += event.tokens_out ?? 0;
    if (!t.last_used_at || t.last_used_at < event.time) t.last_used_at = event.time;
    if (localDay(time) === today) {
      if (t.day !== today) Object.assign(t, { day: today, today_calls: 0, today_tokens: 0 });
      t.today_calls++;
      t.today_tokens += (event.tokens_in ?? 0) + (event.tokens_out ?? 0);
    }
    totals.set(event.access_request_id, t);
  }

  /** Records one event; it is written within a second. Answers its id. */
  record(event: Omit<ActivityEvent, 'id'>): ActivityEvent {
    // the recorder's events come with a slot for the id, first (callEvent): filled, not copied
    let full: ActivityEvent;
    if ('id' in event) {
      full = event as ActivityEvent;
      full.id = String(this.nextId++);
    } else full = { id: String(this.nextId++), ...event };
    const time = Date.parse(full.time);
    if (this.pending.length < MAX_PENDING) {
      this.pending.push(full);
      this.pendingTimes.push(time);
    } else this.drop();
    this.count(full, time);
    // while the disk refuses writes, only the timer tries again (each try is the whole backlog)
    if (this.pending.length >= FLUSH_EVENTS && !this.failing) void this.writeBatch();
    else this.timer ??= setTimeout(() => void this.writeBatch(), FLUSH_MS).unref();
    return full;
  }

  private drop(): void {
    if (this.dropped++ === 0) {
      this.logger.error({ file: this.file, kept: this.pending.length }, `activity log: ${MAX_PENDING} events wait for the disk; new events are counted but no longer kept, until a write goes through`);
    }
  }

  /** A grant's totals over the events kept; today's counts are for the daemon's local day now. */
  totalsFor(grantId: string): GrantTotals {
    const today = localDay(this.clock());
    const t = this.totals.get(grantId);
    if (!t) return emptyTotals(today);
    return t.day === today ? { ...t } : { ...t, day: today, today_calls: 0, today_tokens: 0 };
  }

  async grantTotals(grantId: string): Promise<GrantTotals> {
    return this.totalsFor(grantId);
  }

  /** A grant's usage as the API shows it. */
  async usageOf(grantId: string): Promise<GrantUsage> {
    return usageFromTotals(this.totalsFor(grantId));
  }

  async usagesOf(grantIds: string[]): Promise<Map<string, GrantUsage>> {
    return new Map(grantIds.map((id) => [id, usageFromTotals(this.totalsFor(id))]));
  }

  /** Writes everything buffered, the events recorded while it writes too (for a stop, and tests). */
  async flush(): Promise<void> {
    while ((await this.writeBatch()) && this.pending.length > 0);
  }

  /**
   * Every write to the file and every cut of it, one at a time, in the order asked: a cut copies
   * the file's tail and renames the copy over it, so a write during it would land in the file
   * that goes.
   */
  private exclusive<T>(job: () => Promise<T>): Promise<T> {
    const run = this.fileWork.then(job, job);
    this.fileWork = run.catch(() => undefined);
    return run;
  }

  /**
   * Writes what is buffered now: one append and one fdatasync. The events recorded meanwhile wait
   * for the next timer (or the next full batch) rather than follow at once: under steady traffic an
   * immediate follow-up would open, write and sync the file every few milliseconds, a few events
   * at a time, and cost the requests more than all the rest of their recording. Asks made before
   * the write begins join it. Answers false when the write failed.
   */
  private writeBatch(): Promise<boolean> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.queuedWrite ??= this.exclusive(async () => {
      this.queuedWrite = null;
      return this.writePending();
    });
    return this.queuedWrite;
  }

  private async writePending(): Promise<boolean> {
    if (this.pending.length > 0) {
      // a copy: events recorded while this one is written join the next batch
      const batch = this.pending.slice();
      const lines = batch.map((e) => `${eventLine(e)}\n`);
      const lead = this.unterminated ? '\n' : '';
      try {
        await appendAt(this.file, Buffer.from(lead + lines.join('')), this.size);
      } catch (err) {
        // a full disk: the events stay in memory and are tried again in a second
        if (!this.failing) this.logger.error({ file: this.file, err: (err as Error).message, kept: batch.length }, 'activity log: could not write events; they are kept and tried again each second');
        this.failing = true;
        this.timer ??= setTimeout(() => void this.writeBatch(), FLUSH_MS).unref();
        return false;
      }
      if (this.failing || this.dropped > 0) this.logger[this.dropped > 0 ? 'error' : 'info']({ file: this.file, written: batch.length, lost: this.dropped }, `activity log: writing again; ${this.dropped} events were lost while the disk refused them`);
      this.failing = false;
      this.dropped = 0;
      this.unterminated = false;
      this.indexWritten(batch, this.pendingTimes, lines, this.size + lead.length);
      this.pending = this.pending.slice(batch.length);
      this.pendingTimes = this.pendingTimes.slice(batch.length);
    }
    // queued after this write, not awaited in it: the cut waits for the queue this write holds
    if (this.offsets.length > this.bounds.maxEvents * 1.1 + 100 && this.clock() >= this.cutRetryAt) void this.dropOld().catch((err: Error) => this.logger.warn({ file: this.file, err: err.message }, 'activity log: could not remove old events'));
    return true;
  }

  /** Indexes a batch just written from byte `offset`; the ids of events not kept keep empty slots. */
  private indexWritten(batch: ActivityEvent[], times: number[], lines: string[], offset: number): void {
    for (let i = 0; i < batch.length; i++) {
      const e = batch[i];
      const id = Number(e.id);
      while (this.base + this.offsets.length < id) {
        this.offsets.push(offset);
        this.times.push(0);
      }
      this.offsets[id - this.base] = offset;
      this.times[id - this.base] = times[i];
      const ids = this.byGrant.get(e.access_request_id);
      if (ids) ids.push(id);
      else this.byGrant.set(e.access_request_id, [id]);
      offset += Buffer.byteLength(lines[i]);
    }
    this.size = offset;
  }

  /**
   * Events newest first. What is still buffered counts too, so a call shows at once. Past the
   * bound, events read as gone even before the file is cut. Read in the file's queue, so never
   * across a cut (which moves every offset).
   */
  list(q: ActivityQuery): Promise<ActivityEvent[]> {
    return this.exclusive(() => this.listNow(q));
  }

  private async listNow(q: ActivityQuery): Promise<ActivityEvent[]> {
    const out: ActivityEvent[] = [];
    const oldest = this.oldestVisible();
    const wanted = (e: { id: number; time: number; grant: string }) =>
      e.id >= oldest && (!q.grants || q.grants.has(e.grant)) && (q.since === undefined || e.time >= q.since) && (q.after === undefined || e.id > q.after);
    for (let i = this.pending.length - 1; i >= 0 && out.length < q.limit; i--) {
      const e = this.pending[i];
      if (wanted({ id: Number(e.id), time: Date.parse(e.time), grant: e.access_request_id })) out.push(e);
    }
    for (const id of this.idsNewestFirst(q.grants)) {
      if (out.length >= q.limit) break;
      const time = this.times[id - this.base];
      if (id < oldest || (q.after !== undefined && id <= q.after) || (q.since !== undefined && time < q.since)) break;
      const event = await this.read(id);
      if (event) out.push(event);
    }
    return out;
  }

  /** The ids of the written events of `grants` (or all), newest first. */
  private *idsNewestFirst(grants?: Set<string>): Generator<number> {
    if (!grants) {
      for (let id = this.base + this.offsets.length - 1; id >= this.base; id--) yield id;
      return;
    }
    // a k-way merge of the grants' id lists, newest first
    const lists = [...grants].map((g) => this.byGrant.get(g) ?? []).filter((l) => l.length > 0);
    const at = lists.map((l) => l.length - 1);
    for (;;) {
      let best = -1;
      for (let i = 0; i < lists.length; i++) if (at[i] >= 0 && (best === -1 || lists[i][at[i]] > lists[best][at[best]])) best = i;
      if (best === -1) return;
      const id = lists[best][at[best]--];
      if (id >= this.base) yield id;
    }
  }

  private oldestVisible(): number {
    const newest = this.nextId - 1;
    const byCount = newest - this.bounds.maxEvents + 1;
    return Math.max(this.base, byCount);
  }

  private async read(id: number): Promise<ActivityEvent | null> {
    const offset = this.offsets[id - this.base];
    const end = id - this.base + 1 < this.offsets.length ? this.offsets[id - this.base + 1] : this.size;
    const length = Math.min(end - offset, MAX_LINE);
    if (length <= 0) return null;
    const buf = Buffer.alloc(length);
    await this.handle.read(buf, 0, length, offset);
    const text = buf.toString('utf8');
    const nl = text.indexOf('\n');
    try {
      // up to its own newline: a damaged line after it (skipped) is within the span too
      return JSON.parse(nl >= 0 ? text.slice(0, nl) : text) as ActivityEvent;
    } catch {
      return null;
    }
  }

  /**
   * Drops the events past the bounds: a prefix of the file, so the rest is copied to a new file
   * that replaces it, and the index is built again from it. Runs at start, when the file holds a
   * tenth more than the bound, and from the daemon's hourly sweep.
   */
  dropOld(): Promise<number> {
    return this.exclusive(() => this.cutOld());
  }

  /** The file without the events past the bounds: the rest copied to a new file that replaces it. */
  private async cutOld(): Promise<number> {
    const now = this.clock();
    let cut = this.oldestVisible() - this.base;
    if (this.bounds.retentionDays > 0) {
      const before = now - this.bounds.retentionDays * 24 * 60 * 60 * 1000;
      while (cut < this.times.length && this.times[cut] < before) cut++;
    }
    if (cut <= 0) return 0;
    const from = cut < this.offsets.length ? this.offsets[cut] : this.size;
    try {
      await this.copyTail(from);
    } catch (err) {
      this.cutRetryAt = this.clock() + CUT_RETRY_MS;
      this.logger.error({ file: this.file, err: (err as Error).message }, 'activity log: could not remove old events; the log is as it was, and the cut is tried again later');
      return 0;
    }
    await this.handle.close();
    this.handle = await open(this.file, 'r');
    const built = await this.readIndex();
    // Installed with what happened during the read in one step, so no call sees the counts part
    // built. Today's counts are what the tokens-a-day limit reads: an event dropped by the count
    // bound was still spent today, so they stay as they were (they hold every event recorded so
    // far), or an app could flood cheap calls to free its own budget.
    const today = localDay(this.clock());
    const spentToday = [...this.totals].filter(([, t]) => t.day === today).map(([id, t]) => [id, t.today_calls, t.today_tokens] as const);
    const keptNext = this.nextId;
    this.install(built);
    // the buffered events keep their ids, and the counters the buffered events had added
    this.nextId = keptNext;
    if (this.offsets.length === 0) this.base = this.pending.length > 0 ? Number(this.pending[0].id) : keptNext;
    for (const e of this.pending) this.count(e, Date.parse(e.time));
    for (const [id, calls, tokens] of spentToday) {
      const t = this.totals.get(id) ?? emptyTotals(today);
      if (t.day !== today) Object.assign(t, { day: today, today_calls: 0, today_tokens: 0 });
      t.today_calls = Math.max(t.today_calls, calls);
      t.today_tokens = Math.max(t.today_tokens, tokens);
      this.totals.set(id, t);
    }
    return cut;
  }

  /**
   * Copies the file from byte `from` to a new file and renames it over the log, only once the
   * copy is whole and on disk; otherwise the copy goes and the log stays as it was (it throws).
   */
  private async copyTail(from: number): Promise<void> {
    const tmp = `${this.file}.tmp`;
    try {
      const out = await open(tmp, 'w', 0o600);
      try {
        const buf = Buffer.alloc(1024 * 1024);
        for (let pos = from; pos < this.size; ) {
          const { bytesRead } = await this.handle.read(buf, 0, Math.min(buf.length, this.size - pos), pos);
          if (bytesRead === 0) throw new Error(`the log ends at byte ${pos}, before the ${this.size} bytes of its events`);
          await writeAll(out, buf.subarray(0, bytesRead), null);
          pos += bytesRead;
        }
        if (this.unterminated) await writeAll(out, Buffer.from('\n'), null);
        await out.sync();
      } finally {
        await out.close();
      }
      await rename(tmp, this.file);
    } catch (err) {
      await unlink(tmp).catch(() => undefined);
      throw err instanceof FileWriteError ? err : new FileWriteError(tmp, err);
    }
    await fsyncDir(path.dirname(this.file)).catch((err: Error) => this.logger.warn({ file: this.file, err: err.message }, 'activity log: the cut is made, but its directory could not be synced'));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.flush();
    if (this.pending.length > 0) this.logger.error({ file: this.file, lost: this.pending.length }, `activity log: stopping with ${this.pending.length} events the disk refused; they are lost`);
    await this.handle.close();
  }
}
