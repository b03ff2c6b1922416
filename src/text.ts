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
