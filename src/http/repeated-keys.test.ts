import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { repeatedKey } from './repeated-keys.js';

/** A key's JSON text: plain, or with its characters written as \u escapes, which JSON.parse reads as the same key. */
const spelled = (key: string, escaped: boolean) =>
  escaped ? `"${[...key].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}"` : JSON.stringify(key);

/** Entries written by hand, so a key can be given twice, with JSON's optional spaces between tokens. */
const objectText = (entries: [string, string, boolean][], gap: string) =>
  `{${gap}${entries.map(([k, v, esc]) => `${spelled(k, esc)}${gap}:${gap}${v}`).join(`${gap},${gap}`)}${gap}}`;

const keyArb = fc.constantFrom('model', 'stream', 'max_tokens', 'stream_options', 'a', 'A', '', 'x"y', 'b\\\\', 'é');
const valueArb = fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v));
const entriesArb = fc.array(fc.tuple(keyArb, valueArb, fc.boolean()), { maxLength: 8 });
const gapArb = fc.constantFrom('', ' ', '\n\t ');

/** The first key met a second time, reading entries in order: what the scan must report. */
function firstRepeat(entries: [string, string, boolean][]): string | undefined {
  const seen = new Set<string>();
  for (const [k] of entries) {
    if (seen.has(k)) return k;
    seen.add(k);
  }
  return undefined;
}

describe('repeatedKey', () => {
  it('reports the first top-level key given twice, however it is spelled, and nothing for JSON.stringify output', () => {
    fc.assert(
      fc.property(entriesArb, gapArb, (entries, gap) => {
        const text = objectText(entries, gap);
        expect(() => JSON.parse(text)).not.toThrow();
        expect(repeatedKey(text)).toBe(firstRepeat(entries));
        expect(repeatedKey(JSON.stringify(JSON.parse(text)))).toBeUndefined();
      }),
      { numRuns: 500 },
    );
  });

  it("reports a key given twice in the named inner object, and ignores repeats in any other nested object", () => {
    fc.assert(
      fc.property(entriesArb, gapArb, fc.boolean(), (inner, gap, named) => {
        const innerText = objectText(inner, gap);
        const text = objectText([['model', '"m"', false], [named ? 'stream_options' : 'other', innerText, false], ['messages', `[${innerText}]`, false]], gap);
        expect(repeatedKey(text, 'stream_options')).toBe(named ? firstRepeat(inner) : undefined);
      }),
      { numRuns: 500 },
    );
  });

  it('skips strings whatever they hold', () => {
    expect(repeatedKey('{"a":"{\\"a\\":1}","b":"\\\\","c":"\\\\\\"a\\":"}')).toBeUndefined();
    expect(repeatedKey('{"a":"\\\\","a":2}')).toBe('a');
    expect(repeatedKey('{"s":{"k":1},"s2":{"k":2,"k":3}}', 's')).toBeUndefined();
    expect(repeatedKey('{"s":{"k":1,"k":3}}', 's')).toBe('k');
    expect(repeatedKey('[1,2]')).toBeUndefined();
  });
});
