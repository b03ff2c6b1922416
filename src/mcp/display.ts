/**
 * A held call's arguments as the person reads them: indented JSON in which every invisible or
 * direction-changing character is written as its \u escape. It is still the same JSON value, but
 * nothing in it can hide text or make text pose as other text.
 */
const HIDDEN = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\u{E0000}-\u{E007F}\u034f\u115f\u1160\u3164\uffa0]/gu;

/**
 * A name the app chose (a held call's tool), as the person reads it: every invisible or
 * direction-changing character written as its \u escape, and a backslash as two, so a name that
 * spells out `\u200b` never looks like one that holds the character.
 */
export function visibleText(text: string): string {
  // a character outside the BMP (a tag character) is two code units, each escaped
  const escaped = (c: string) => Array.from({ length: c.length }, (_, i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`).join('');
  return text.replace(/\\/g, '\\\\').replace(HIDDEN, escaped);
}

export function argumentsText(value: unknown, indent = 2): string {
  let text: string;
  try {
    text = JSON.stringify(value ?? {}, null, indent) ?? 'null';
  } catch {
    text = '(arguments that cannot be shown)';
  }
  // JSON.stringify writes a string's own newlines as \n, so a raw one is the indentation's; a
  // character outside the BMP (a tag character) is two code units, each escaped
  return text.replace(HIDDEN, (c) => (c === '\n' ? c : Array.from({ length: c.length }, (_, i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`).join('')));
}
