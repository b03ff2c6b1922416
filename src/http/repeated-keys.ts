/**
 * Finds a key given twice in a JSON object's text. JSON.parse keeps the last of a repeated key;
 * some parsers keep the first (simdjson's lookups) and some refuse the body. A body svc forwards
 * as its text must mean to the upstream what it meant to svc, so a key svc reads must not be
 * there twice. The scan looks at the top-level object's keys and at those of one named object
 * inside it (`inner`); everything else is skipped over, strings by their closing quote.
 *
 * It trusts that `text` is valid JSON (JSON.parse read it first), so it only tracks nesting and
 * string ends. A key written with escapes (`"m\u006fdel"`) is compared as JSON reads it.
 */
export function repeatedKey(text: string, inner?: string): string | undefined {
  const structural = /["{}[\]]/g;
  let depth = 0;
  let top: Set<string> | undefined;
  let inside: Set<string> | undefined;
  let insideDepth = -1;
  let m: RegExpExecArray | null;
  while ((m = structural.exec(text)) !== null) {
    const at = m.index;
    const c = text[at];
    if (c === '"') {
      const end = stringEnd(text, at);
      structural.lastIndex = end + 1;
      const keys = depth === 1 ? top : depth === insideDepth ? inside : undefined;
      if (keys && isKey(text, end + 1)) {
        const key = keyOf(text, at, end);
        if (keys.has(key)) return key;
        keys.add(key);
        if (depth === 1 && key === inner && nextNonSpace(text, text.indexOf(':', end + 1) + 1) === '{') insideDepth = 2;
      }
    } else if (c === '{' || c === '[') {
      depth++;
      if (depth === 1 && c === '{') top = new Set();
      else if (depth === insideDepth && c === '{' && !inside) inside = new Set();
    } else {
      if (depth === insideDepth) insideDepth = -1;
      depth--;
    }
  }
  return undefined;
}

/** The index of the quote that closes the string opened at `open` (a quote after an even run of backslashes). */
function stringEnd(text: string, open: number): number {
  let end = text.indexOf('"', open + 1);
  while (end > 0) {
    let slashes = 0;
    for (let i = end - 1; text.charCodeAt(i) === 92; i--) slashes++;
    if (slashes % 2 === 0) return end;
    end = text.indexOf('"', end + 1);
  }
  return text.length;
}

/** Whether the string that ends just before `from` is an object key (a colon follows it). */
const isKey = (text: string, from: number) => nextNonSpace(text, from) === ':';

function nextNonSpace(text: string, from: number): string | undefined {
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c !== 32 && c !== 10 && c !== 13 && c !== 9) return text[i];
  }
  return undefined;
}

/** The key as JSON reads it: its text, unescaped only when it has escapes. */
function keyOf(text: string, open: number, close: number): string {
  const raw = text.slice(open + 1, close);
  return raw.includes('\\') ? (JSON.parse(`"${raw}"`) as string) : raw;
}
