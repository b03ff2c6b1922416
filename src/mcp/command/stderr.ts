import type { Logger } from '../../log.js';
import { inert } from '../../text.js';
import { REDACTED, scrubTextOfAll } from '../../upstream/scrub.js';
import { LineReader } from './lines.js';

/** A stderr line is logged up to this many bytes; the rest of it is dropped. */
export const STDERR_LINE_BYTES = 4096;
/** At most this many stderr lines a second of one child reach the log; the count of those dropped follows. */
export const STDERR_LINES_PER_SECOND = 20;
/** The last line kept to say why a child failed at its start. */
const LAST_LINE_CHARS = 200;

/**
 * A child's stderr in svc's log, a line at a time: each line capped, the lines a second counted
 * (a flood costs a line saying how many were dropped), the instance's secrets scrubbed and
 * control characters made inert, so a child can neither flood the log nor forge its lines.
 */
export class StderrLog {
  private readonly reader = new LineReader(STDERR_LINE_BYTES, 'truncate');
  private windowStart = 0;
  private inWindow = 0;
  private dropped = 0;
  /** the last line written, scrubbed, for a message about a failed start */
  last = '';

  constructor(
    private readonly logger: Logger,
    private readonly fields: Record<string, unknown>,
    private readonly secrets: string[],
    private readonly clock: () => number,
  ) {}

  push(chunk: Buffer): void {
    this.reader.push(chunk, (line, cut) => this.line(line, cut));
  }

  end(): void {
    this.reader.end((line, cut) => this.line(line, cut));
    this.reportDropped();
  }

  private line(raw: Buffer, cut: boolean) {
    const text = scrubbed(raw.toString('utf8'), this.secrets, cut);
    if (text.trim() === '') return;
    this.last = inert(text, LAST_LINE_CHARS);
    const now = this.clock();
    if (now - this.windowStart >= 1000) {
      this.reportDropped();
      this.windowStart = now;
      this.inWindow = 0;
    }
    if (this.inWindow >= STDERR_LINES_PER_SECOND) {
      this.dropped++;
      return;
    }
    this.inWindow++;
    this.logger.info({ ...this.fields, stderr: inert(text, STDERR_LINE_BYTES), ...(cut ? { cut: true } : {}) }, 'command server stderr');
  }

  private reportDropped() {
    if (this.dropped === 0) return;
    this.logger.warn({ ...this.fields, dropped: this.dropped }, 'command server stderr lines dropped (too many a second)');
    this.dropped = 0;
  }
}

/**
 * A line with every secret replaced. A line cut at the cap may end in the first characters of a
 * secret whose rest was dropped: that start is replaced too.
 */
export function scrubbed(text: string, secrets: string[], cut: boolean): string {
  const clean = scrubTextOfAll(text, secrets);
  if (!cut) return clean;
  for (const secret of secrets) {
    for (let n = Math.min(secret.length - 1, clean.length); n >= 1; n--) {
      if (clean.endsWith(secret.slice(0, n))) return clean.slice(0, clean.length - n) + REDACTED;
    }
  }
  return clean;
}
