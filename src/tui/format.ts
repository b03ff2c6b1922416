import { inert } from '../text.js';

/** App-supplied text made safe for the terminal: control characters out, length capped. */
export const safe = (value: string | null | undefined, max = 200): string => inert(value ?? '', max);

/** Whole seconds from `now` until `isoTime`, never negative (an unparsable time counts as past). */
export function secondsUntil(isoTime: string, now: number): number {
  const at = Date.parse(isoTime);
  return Number.isFinite(at) ? Math.max(0, Math.floor((at - now) / 1000)) : 0;
}

/** `9:05` for 545 seconds; `expired` at zero. */
export function countdown(seconds: number): string {
  if (seconds <= 0) return 'expired';
  return `${Math.floor(seconds / 60)}:${String(Math.floor(seconds % 60)).padStart(2, '0')}`;
}

/** The slice [start, end) of `count` rows, at most `size` long, that keeps `cursor` in view. */
export function windowFor(count: number, cursor: number, size: number): { start: number; end: number } {
  const rows = Math.max(1, size);
  if (count <= rows) return { start: 0, end: count };
  const start = Math.min(Math.max(0, cursor - Math.floor(rows / 2)), count - rows);
  return { start, end: start + rows };
}

/** A daemon error as one line: its message and code (`already_processed`), made inert. */
export function describeError(err: unknown): string {
  const e = err as { message?: unknown; code?: unknown } | null;
  const message = typeof e?.message === 'string' && e.message ? e.message : String(err);
  const code = typeof e?.code === 'string' && /^[a-z_]+$/.test(e.code) ? e.code : '';
  return safe(code && !message.endsWith(`(${code})`) ? `${message} (${code})` : message, 300);
}

/**
 * Colour is opt-in per element: with `color` off, no SGR attribute at all reaches the terminal
 * (NO_COLOR, or not a TTY), and the UI still reads through markers (`›`, `[x]`, `error:`).
 */
export type Tone = 'accent' | 'muted' | 'error' | 'success' | 'warning' | 'title';

const TONES: Record<Tone, { color?: string; bold?: boolean; dimColor?: boolean }> = {
  accent: { color: 'cyan', bold: true },
  muted: { dimColor: true },
  error: { color: 'red', bold: true },
  success: { color: 'green' },
  warning: { color: 'yellow' },
  title: { bold: true },
};

export const tone = (color: boolean, t: Tone) => (color ? TONES[t] : {});
