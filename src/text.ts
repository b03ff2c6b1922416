/**
 * What never reaches a log line or a terminal from an app-supplied string: control characters
 * (C0, DEL, C1), line and paragraph separators, and invisible format characters that let text
 * pose as other text: bidi overrides and isolates, zero-width spaces and joiners, the BOM, Unicode
 * tag characters (U+E0000-U+E007F), lone surrogates and the invisible Hangul fillers.
 */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\u{E0000}-\u{E007F}\u034f\u115f\u1160\u3164\uffa0]/gu;

/** Strips control and invisible characters so app-supplied strings cannot forge log lines or drive a terminal. */
export function inert(value: string, max = 200): string {
  const clean = value.replace(UNSAFE, '\uFFFD');
  if (clean.length <= max) return clean;
  // never cut a surrogate pair in half (that would be a lone surrogate again)
  const cut = /[\ud800-\udbff]/.test(clean[max - 1] ?? '') ? max - 1 : max;
  return `${clean.slice(0, cut)}…`;
}

/**
 * A signed span of milliseconds as "just now", "5 min ago", "in 2 h", "3 days ago". Whole in
 * itself (no outside name), so the pages that refresh in the browser run this very function.
 */
export function relativeTime(ms: number): string {
  // up to each bound (seconds), a span is said in this unit (seconds each)
  const spans: [number, number, string][] = [
    [60, 1, 's'],
    [90 * 60, 60, 'min'],
    [36 * 3600, 3600, 'h'],
    [60 * 86_400, 86_400, 'days'],
    [730 * 86_400, 30 * 86_400, 'months'],
    [Infinity, 365 * 86_400, 'years'],
  ];
  const s = Math.round(Math.abs(ms) / 1000);
  if (s < 5) return 'just now';
  const [, unit, name] = spans.find(([bound]) => s < bound)!;
  const span = `${Math.max(1, Math.round(s / unit))} ${name}`;
  return ms < 0 ? `${span} ago` : `in ${span}`;
}

/**
 * The one way a time is said to a person, on a terminal, in `svc review` and on the pages: "5 min
 * ago", "in 2 h". An ISO time that does not parse stays as it came. Scripts get the ISO time itself.
 */
export function relativeWhen(iso: string, now: number): string {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? iso : relativeTime(t - now);
}

/** A time as the local clock said it (`14:05:09`), for a log followed as it happens; ISO if it does not parse. */
export function clockTime(iso: string): string {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? iso : new Date(t).toLocaleTimeString('en-GB', { hour12: false });
}
