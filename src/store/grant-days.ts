import path from 'node:path';
import { nodeFs, type StoreFs, writeFileDurably } from './durable-file.js';
import type { GrantUsageRepository } from './repositories.js';

/** Each limited grant's tokens on its last day, beside the store (not in the activity log). */
export const GRANT_DAYS_FILE = 'grant-days.json';

interface Day {
  day: string;
  /** tokens spent on `day` */
  tokens: number;
  /** tokens reserved by calls in flight (this process's; never written) */
  held: number;
}

/** More windows than this and the ended ones are forgotten as the next one starts. */
const MAX_WINDOWS = 10_000;

/**
 * One svc's per-grant usage, for the limits a person set: calls a minute in memory, and each
 * limited grant's tokens on its day kept in `grant-days.json`, apart from the activity log. That
 * log is bounded, and refused calls are events too, so a flood pushes a day's spending out of it;
 * read back from it after a restart, a spent day would start again. This file holds one small
 * line per grant with a tokens-a-day limit that spent something, forgotten once its day is over.
 *
 * It is written whole (a temporary file, fsync, rename) after each change, off the request path:
 * changes made while a write runs go in the next one, so under load the writes follow each other
 * rather than one per call. What calls in flight reserved is not written: a process that stops
 * ends its calls too.
 */
export class LocalGrantUsage implements GrantUsageRepository {
  private readonly windows = new Map<string, { start: number; calls: number }>();
  private readonly days = new Map<string, Day>();
  private writing: Promise<void> | null = null;
  private dirty = false;

  private constructor(
    private readonly file: string | null,
    private readonly onError: (err: Error) => void,
    private readonly fs: StoreFs,
  ) {}

  /** Counts kept in memory only (an app built without a data dir). */
  static inMemory(): LocalGrantUsage {
    return new LocalGrantUsage(null, () => undefined, nodeFs);
  }

  /** The data dir's counts; a file that cannot be read is said so (`onError`) and the counts start empty. */
  static async open(dataDir: string, onError: (err: Error) => void, fs: StoreFs = nodeFs): Promise<LocalGrantUsage> {
    const usage = new LocalGrantUsage(path.join(dataDir, GRANT_DAYS_FILE), onError, fs);
    let text: string | null = null;
    try {
      text = (await fs.readFile(usage.file!)).toString('utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') onError(new Error(`cannot read ${usage.file}: ${(err as Error).message}`));
    }
    if (text !== null) usage.load(text);
    return usage;
  }

  private load(text: string): void {
    try {
      const parsed = JSON.parse(text) as { days?: Record<string, { day?: unknown; tokens?: unknown }> };
      for (const [grant, d] of Object.entries(parsed.days ?? {})) {
        if (typeof d?.day === 'string' && typeof d.tokens === 'number' && Number.isFinite(d.tokens) && d.tokens >= 0) this.days.set(grant, { day: d.day, tokens: d.tokens, held: 0 });
      }
    } catch (err) {
      this.onError(new Error(`${this.file} is damaged (${(err as Error).message}); the grants' tokens for today start again from 0`));
    }
  }

  async takeCall(grantId: string, now: number, windowMs: number, max: number) {
    let w = this.windows.get(grantId);
    if (!w || now - w.start >= windowMs) {
      if (this.windows.size > MAX_WINDOWS) for (const [k, v] of this.windows) if (now - v.start >= windowMs) this.windows.delete(k);
      w = { start: now, calls: 0 };
      this.windows.set(grantId, w);
    }
    if (w.calls >= max) return { allowed: false, windowStart: w.start };
    w.calls++;
    return { allowed: true, windowStart: w.start };
  }

  /** The grant's row for `day`: a new day starts it again. */
  private dayOf(grantId: string, day: string): Day {
    let d = this.days.get(grantId);
    if (!d || d.day !== day) {
      d = { day, tokens: 0, held: 0 };
      this.days.set(grantId, d);
    }
    return d;
  }

  async addTokens(grantId: string, day: string, tokens: number) {
    if (tokens <= 0) return;
    this.dayOf(grantId, day).tokens += tokens;
    this.persist();
  }

  async tokensOn(grantId: string, day: string) {
    const d = this.days.get(grantId);
    return d?.day === day ? d.tokens : 0;
  }

  async reserveTokens(grantId: string, day: string, tokens: number, budget: number) {
    const d = this.dayOf(grantId, day);
    if (d.tokens + d.held >= budget) return false;
    d.held += tokens;
    return true;
  }

  async settleTokens(grantId: string, day: string, held: number, spent: number) {
    const d = this.days.get(grantId);
    if (d?.day === day) d.held = Math.max(0, d.held - held);
    await this.addTokens(grantId, day, spent);
  }

  async forgetIdle(before: number, today: string) {
    let n = 0;
    for (const [k, w] of this.windows) if (w.start < before) this.windows.delete(k);
    for (const [k, d] of this.days) {
      if (d.day !== today && d.held === 0) {
        this.days.delete(k);
        n++;
      }
    }
    if (n) this.persist();
    return n;
  }

  /** Each grant's spent tokens on its day, as the file keeps them (what `svc store copy` carries to a team). */
  spentDays(): { grantId: string; day: string; tokens: number }[] {
    return [...this.days].filter(([, d]) => d.tokens > 0).map(([grantId, d]) => ({ grantId, day: d.day, tokens: d.tokens }));
  }

  /** Writes the counts soon, after the write that runs now (if any). */
  private persist(): void {
    if (!this.file) return;
    this.dirty = true;
    this.writing ??= this.writeAll().finally(() => {
      this.writing = null;
    });
  }

  private async writeAll(): Promise<void> {
    while (this.dirty) {
      this.dirty = false;
      const days: Record<string, { day: string; tokens: number }> = {};
      for (const [grant, d] of this.days) if (d.tokens > 0) days[grant] = { day: d.day, tokens: d.tokens };
      try {
        await writeFileDurably(this.file!, `${JSON.stringify({ version: 1, days })}\n`, 0o600, this.fs);
      } catch (err) {
        // kept in memory; the next change tries again
        this.onError(err as Error);
        return;
      }
    }
  }

  /** Writes the counts as they are now and waits for it (for a stop; a write that failed earlier is tried again). */
  async flush(): Promise<void> {
    if (this.file && this.days.size > 0) this.persist();
    while (this.writing) await this.writing;
  }
}
