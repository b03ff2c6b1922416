import { inert } from '../text.js';

export interface Column<T> {
  header: string;
  value: (row: T) => string | number | boolean | null | undefined;
  /**
   * A value people copy into another command (an id, a URL): never cut on a narrow terminal.
   * The descriptive columns give up their width instead, and past that the line wraps.
   */
  copy?: boolean;
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

/** Control characters out, so an app's client id cannot drive the terminal or split a TSV row. */
const cell = (v: unknown) => inert(v === null || v === undefined ? '' : String(v), 500).replace(/\t/g, ' ');

/** A table on a TTY, tab-separated rows (no header) when piped, like gh. */
export function printRows<T>(o: Output, rows: T[], columns: Column<T>[]): void {
  const cells = rows.map((r) => columns.map((c) => cell(c.value(r))));
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
  const clip = (v: string, w: number) => (v.length > w ? `${v.slice(0, Math.max(0, w - 1))}…` : v);
  const line = (r: string[]) => r.map((v, i) => (i === r.length - 1 ? clip(v, widths[i]) : clip(v, widths[i]).padEnd(widths[i]))).join('  ').trimEnd();
  o.out(`${line(headers)}\n`);
  for (const row of cells) o.out(`${line(row)}\n`);
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
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  return relativeTime(t - now);
}

/** Up to each bound (seconds), a span is said in this unit (seconds each). */
const SPANS: [number, number, string][] = [
  [60, 1, 's'],
  [90 * 60, 60, 'min'],
  [36 * 3600, 3600, 'h'],
  [60 * 86_400, 86_400, 'days'],
  [730 * 86_400, 30 * 86_400, 'months'],
  [Infinity, 365 * 86_400, 'years'],
];

/** A signed span of milliseconds as "just now", "5 min ago", "in 2 h", "3 days ago". */
export function relativeTime(ms: number): string {
  const s = Math.round(Math.abs(ms) / 1000);
  if (s < 5) return 'just now';
  const [, unit, name] = SPANS.find(([bound]) => s < bound)!;
  const span = `${Math.max(1, Math.round(s / unit))} ${name}`;
  return ms < 0 ? `${span} ago` : `in ${span}`;
}

export function printJson(o: Output, value: unknown): void {
  o.out(`${JSON.stringify(value, null, 2)}\n`);
}
