/**
 * What to do with a line longer than the limit: `fail` ends the reading (a command server's
 * stdout, where such a line is a fault), `truncate` keeps its start and drops the rest (its stderr).
 */
export type LineOverflow = 'fail' | 'truncate';

/** A line as read, without its newline (nor a `\r` before it); `cut` when it was longer than the limit and truncated. */
export type OnLine = (line: Buffer, cut: boolean) => void;

/**
 * Cuts a byte stream into lines, holding at most `maxLineBytes` of an unfinished line whatever
 * arrives: the memory a child's output can take in svc is that bound (and the chunk being read),
 * never the length of what it writes. `highWater` is the most it ever held, for the tests.
 */
export class LineReader {
  private parts: Buffer[] = [];
  private held = 0;
  /** dropping the rest of a line that went over the limit (truncate) */
  private skipping = false;
  private failed = false;
  highWater = 0;

  constructor(
    readonly maxLineBytes: number,
    private readonly overflow: LineOverflow,
  ) {}

  /** Bytes of an unfinished line held now. */
  get holding(): number {
    return this.held;
  }

  /** Reads a chunk, calling `onLine` for each whole line. False once a line went over the limit in `fail` mode: the reader then holds nothing and reads no more. */
  push(chunk: Buffer, onLine: OnLine): boolean {
    if (this.failed) return false;
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl !== -1; nl = chunk.indexOf(10, start)) {
      if (!this.finishLine(chunk.subarray(start, nl), onLine)) return false;
      start = nl + 1;
    }
    return start < chunk.length ? this.keep(chunk.subarray(start), onLine) : true;
  }

  /** The end of the stream: an unfinished last line is a line too. */
  end(onLine: OnLine): void {
    if (this.failed || this.skipping || this.held === 0) return this.reset();
    const line = Buffer.concat(this.parts, this.held);
    this.reset();
    onLine(trimCr(line), false);
  }

  private finishLine(segment: Buffer, onLine: OnLine): boolean {
    if (this.skipping) {
      this.skipping = false;
      return true;
    }
    if (this.held + segment.length > this.maxLineBytes) return this.over(segment, onLine, true);
    const line = this.held === 0 ? segment : Buffer.concat([...this.parts, segment], this.held + segment.length);
    this.note(this.held + segment.length);
    this.reset();
    onLine(trimCr(line), false);
    return true;
  }

  /** Holds the start of a line whose newline has not come yet. */
  private keep(segment: Buffer, onLine: OnLine): boolean {
    if (this.skipping) return true;
    if (this.held + segment.length > this.maxLineBytes) return this.over(segment, onLine, false);
    // a copy, so a small tail does not keep the whole chunk it came in alive
    this.parts.push(this.held === 0 && segment.length < segment.buffer.byteLength / 2 ? Buffer.from(segment) : segment);
    this.held += segment.length;
    this.note(this.held);
    return true;
  }

  /** A line past the limit: the reading fails, or the line's start is given and the rest skipped. */
  private over(segment: Buffer, onLine: OnLine, complete: boolean): boolean {
    if (this.overflow === 'fail') {
      this.reset();
      this.failed = true;
      return false;
    }
    const room = this.maxLineBytes - this.held;
    const line = Buffer.concat([...this.parts, segment.subarray(0, room)], this.maxLineBytes);
    this.note(this.maxLineBytes);
    this.reset();
    this.skipping = !complete;
    onLine(line, true);
    return true;
  }

  private note(bytes: number) {
    if (bytes > this.highWater) this.highWater = bytes;
  }

  private reset() {
    this.parts = [];
    this.held = 0;
  }
}

const trimCr = (line: Buffer) => (line.length > 0 && line[line.length - 1] === 13 ? line.subarray(0, -1) : line);
