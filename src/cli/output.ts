import { inert, relativeTime, relativeWhen } from '../text.js';

export { relativeTime };

export interface Column<T> {
  header: string;
  value: (row: T) => string | number | boolean | null | undefined;
  /**
   * A value people copy into another command (an id, a URL): never cut on a narrow terminal.
   * The descriptive columns give up their width instead, and past that the line wraps.
   */
  copy?: boolean;
  /**
   * A value a person decides on (a held call's arguments): never cut piped. On a terminal, where
   * the table must cut it, `more` says how many characters are hidden and how to see them.
   */
  more?: (row: T, hidden: string) => string;
}

/**
 * What a command reads and writes, passed in (as gh's IOStreams): the process's own by default,
 * captured in tests, which then run commands in-process.
 */
export interface Output {
  out: (text: string) => void;
  err: (text: string) => void;
  isTTY: boolean;
  /** the terminal's width, when it is one */
  columns?: number;
  /** the environment commands read (SVC_*, HOME, XDG_*); default process.env */
  env?: NodeJS.ProcessEnv;
  /** all of standard input (for --password-stdin and the like); default process.stdin */
  stdin?: () => Promise<string>;
  /** runs a program to its end (the service manager, the browser opener); default: execFile */
  run?: ProcessRunner;
  /** the operating system the commands act for; default process.platform */
  platform?: NodeJS.Platform;
}

/** A program's exit code and output; a program that is not there rejects with code ENOENT. */
export type ProcessRunner = (file: string, args: string[]) => Promise<{ code: number; stdout: string; stderr: string }>;

export const processOutput = (): Output => ({
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
  isTTY: Boolean(process.stdout.isTTY),
  columns: process.stdout.isTTY ? process.stdout.columns : undefined,
});

let onOutputClosed: (() => void) | null = null;

/**
 * Who handles a closed stdout or stderr (EPIPE, as when `svc ... | head` or a `| tee` that died
 * with Ctrl-C). By default bin/svc.js just ends the process; `svc serve` stops cleanly instead.
 */
export function setOutputClosedHandler(fn: (() => void) | null): void {
  onOutputClosed = fn;
}

/** Called by bin/svc.js on EPIPE: true when a handler took it (the process must not exit yet). */
export function outputClosed(): boolean {
  if (!onOutputClosed) return false;
  onOutputClosed();
  return true;
}

/**
 * Control characters out, so an app's client id cannot drive the terminal or split a TSV row;
 * capped at 500 characters, but for a value a person decides on, which is never cut here.
 */
const cell = (v: unknown, max = 500) => inert(v === null || v === undefined ? '' : String(v), max).replace(/\t/g, ' ');

/** At least this much of a value a person decides on is shown before its "… (N more characters: ...)". */
const MORE_KEEP = 12;

/** `v` in `w` characters; a value with `more` keeps its start and says what is hidden, and how to see it. */
function clipCell(v: string, w: number, more?: (hidden: string) => string): string {
  if (v.length <= w) return v;
  if (!more) return `${v.slice(0, Math.max(0, w - 1))}…`;
  // the note's own length, with room for the count
  const keep = Math.min(v.length, Math.max(MORE_KEEP, w - more('0').length - 6));
  return `${v.slice(0, keep)}${more((v.length - keep).toLocaleString('en-US'))}`;
}

/** A table on a TTY, tab-separated rows (no header) when piped, like gh. */
export function printRows<T>(o: Output, rows: T[], columns: Column<T>[]): void {
  const cells = rows.map((r) => columns.map((c) => cell(c.value(r), c.more ? Infinity : 500)));
  if (!o.isTTY) {
    for (const row of cells) o.out(`${row.join('\t')}\n`);
    return;
  }
  if (rows.length === 0) {
    o.err('Nothing to show.\n');
    return;
  }
  const headers = columns.map((c) => c.header.toUpperCase());
  const widths = fitWidths(
    headers.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i].length))),
    o.columns,
    columns.map((c) => Boolean(c.copy)),
  );
  const line = (r: string[], row?: T) =>
    r
      .map((v, i) => {
        const { more } = columns[i];
        // a header is cut as any value is
        const clipped = clipCell(v, widths[i], row !== undefined && more ? (hidden) => more(row, hidden) : undefined);
        return i === r.length - 1 ? clipped : clipped.padEnd(widths[i]);
      })
      .join('  ')
      .trimEnd();
  o.out(`${line(headers)}\n`);
  cells.forEach((cellsOfRow, i) => o.out(`${line(cellsOfRow, rows[i])}\n`));
}

/**
 * Column widths that fit a terminal of `total` columns, as gh does: the widest column gives up
 * characters first, and no column goes below 6 (or its own width). Columns marked in `keep` (ids
 * and URLs to copy) are never cut: a value cut short is worse than a wrapped line. Piped output
 * is never cut.
 */
export function fitWidths(widths: number[], total: number | undefined, keep: boolean[] = []): number[] {
  const out = [...widths];
  if (!total || total <= 0) return out;
  const gaps = 2 * (out.length - 1);
  const floor = (i: number) => (keep[i] ? widths[i] : Math.min(widths[i], 6));
  let over = out.reduce((a, b) => a + b, 0) + gaps - total;
  while (over > 0) {
    let widest = -1;
    for (let i = 0; i < out.length; i++) if (out[i] > floor(i) && (widest === -1 || out[i] > out[widest])) widest = i;
    if (widest === -1) break;
    out[widest]--;
    over--;
  }
  return out;
}

/** `key: value` lines for one record on a TTY; `key<TAB>value` when piped. */
export function printFields(o: Output, fields: [string, unknown][]): void {
  const width = Math.max(...fields.map(([k]) => k.length));
  for (const [k, v] of fields) o.out(o.isTTY ? `${k.padEnd(width)}  ${cell(v)}\n` : `${k}\t${cell(v)}\n`);
}

/**
 * A time as people read it on a terminal ("5 min ago", "in 9 min"); ISO 8601 as it came for
 * pipes, which scripts parse. `now` is the CLI's clock.
 */
export function when(o: Output, iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return '';
  if (!o.isTTY) return iso;
  return relativeWhen(iso, now);
}

export function printJson(o: Output, value: unknown): void {
  o.out(`${JSON.stringify(value, null, 2)}\n`);
}
