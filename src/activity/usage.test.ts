import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { usageInAnswer } from './usage.js';

const of = (value: unknown, space?: number) => usageInAnswer(Buffer.from(JSON.stringify(value, null, space)));

describe('usageInAnswer', () => {
  const usage = { prompt_tokens: 3, completion_tokens: 4 };
  it('reads the top-level usage, last or not, compact or pretty-printed', () => {
    expect(of({ id: 'x', choices: [], usage })).toEqual({ tokens_in: 3, tokens_out: 4 });
    expect(of({ usage, choices: [{ message: { content: 'x' } }] }, 2)).toEqual({ tokens_in: 3, tokens_out: 4 });
    expect(of({ usage: { input_tokens: 1, output_tokens: 2 }, user: 'usage', metadata: { usage: 'x' } })).toEqual({ tokens_in: 1, tokens_out: 2 });
  });
  it('is not fooled by a "usage" in a string, a nested object or a value after it', () => {
    const after = { usage, echo: { usage: { prompt_tokens: 0, completion_tokens: 0 } }, list: ['usage', '"usage":{"prompt_tokens":0}'], tail: 'a\\"usage\\":{}\\' };
    expect(of(after)).toEqual({ tokens_in: 3, tokens_out: 4 });
    expect(of({ choices: [{ message: { content: '"usage": {"prompt_tokens": 0}' } }] })).toBeNull();
    expect(of({ echo: { usage } })).toBeNull();
    expect(of({ usage: null, metadata: { prompt_tokens: 1 } })).toBeNull();
  });
  it('answers null for what is not a JSON object', () => {
    for (const text of ['', '"', '"usage"', '[]', 'not json "usage": {"prompt_tokens": 1}', '\\"usage\\":{"prompt_tokens":1}}']) expect(usageInAnswer(Buffer.from(text))).toBeNull();
  });
});

describe('usageInAnswer on a large answer that puts its usage first', () => {
  it('still finds it (by its last spelling, past the walk back from the end)', () => {
    const big = { usage: { prompt_tokens: 7, completion_tokens: 0 }, data: Array.from({ length: 60_000 }, (_, i) => ({ index: i, embedding: [0.125, 0.25, 0.5, 0.75] })) };
    const body = Buffer.from(JSON.stringify(big));
    expect(body.length).toBeGreaterThan(2 * 1024 * 1024);
    expect(usageInAnswer(body)).toEqual({ tokens_in: 7, tokens_out: 0 });
  });
});

// The reading before it counted braces over the bytes rather than a decoded 4 KiB copy, and built
// its counts without spreads: the one now must read every answer as it did.
function oldTokensOf(usage: unknown): { tokens_in?: number; tokens_out?: number } | null {
  if (!usage || typeof usage !== 'object') return null;
  const u = usage as Record<string, unknown>;
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : undefined);
  const tokensIn = num(u.prompt_tokens) ?? num(u.input_tokens);
  const tokensOut = num(u.completion_tokens) ?? num(u.output_tokens);
  if (tokensIn === undefined && tokensOut === undefined) return null;
  return { ...(tokensIn !== undefined ? { tokens_in: tokensIn } : {}), ...(tokensOut !== undefined ? { tokens_out: tokensOut } : {}) };
}

function oldUsageInAnswer(body: Buffer): { tokens_in?: number; tokens_out?: number } | null {
  let at = topLevelUsage(body);
  if (at === FAR) {
    // usage far from the end (an answer that puts it first): its last spelling, found natively
    const key = body.lastIndexOf(USAGE_KEY);
    at = key === -1 ? -1 : body.indexOf(0x7b, key);
  }
  if (at === -1) return null;
  const tail = body.subarray(at, at + 4096).toString('utf8');
  let depth = 0;
  for (let i = 0; i < tail.length; i++) {
    if (tail[i] === '{') depth++;
    else if (tail[i] === '}' && --depth === 0) {
      try {
        return oldTokensOf(JSON.parse(tail.slice(0, i + 1)));
      } catch {
        return null;
      }
    }
  }
  return null;
}

const QUOTE = 0x22;
const WALK_LIMIT = 1024 * 1024;
const FAR = -2;
const USAGE_KEY = Buffer.from('"usage"');
const BACKSLASH = 0x5c;

function topLevelUsage(body: Buffer): number {
  let depth = 0;
  const stop = body.length - WALK_LIMIT;
  for (let i = body.length - 1; i >= 0; i--) {
    if (i < stop) return FAR;
    const c = body[i];
    if (c === 0x7d || c === 0x5d) depth++; // } ]
    else if (c === 0x7b || c === 0x5b) depth--; // { [
    else if (c === QUOTE) {
      const start = openingQuote(body, i);
      if (start === -1) return -1;
      // at the top level, the key (a colon follows, not so a value "usage"), then its object
      const colon = depth === 1 && i - start === 6 && body.toString('latin1', start + 1, i) === 'usage' ? skipSpace(body, i + 1) : -1;
      if (colon !== -1 && body[colon] === 0x3a) {
        const value = skipSpace(body, colon + 1);
        return body[value] === 0x7b ? value : -1;
      }
      i = start;
    }
  }
  return -1;
}

function openingQuote(body: Buffer, end: number): number {
  // (a negative offset would count from the end)
  for (let at = end > 0 ? body.lastIndexOf(QUOTE, end - 1) : -1; at !== -1; at = at > 0 ? body.lastIndexOf(QUOTE, at - 1) : -1) {
    let slashes = 0;
    while (at - slashes - 1 >= 0 && body[at - slashes - 1] === BACKSLASH) slashes++;
    if (slashes % 2 === 0) return at;
  }
  return -1;
}

function skipSpace(body: Buffer, at: number): number {
  let i = at;
  while (i < body.length && (body[i] === 0x20 || body[i] === 0x0a || body[i] === 0x0d || body[i] === 0x09)) i++;
  return i;
}

describe('usageInAnswer against the reading it replaced', () => {
  const counts = fc.record({ prompt_tokens: fc.oneof(fc.nat(), fc.double(), fc.constant(-1)), completion_tokens: fc.nat(), input_tokens: fc.nat(), output_tokens: fc.nat() }, { requiredKeys: [] });
  const text = fc.oneof(fc.string(), fc.constantFrom('usage', '"usage":{"prompt_tokens":1}', '}{', '\\', 'é€😀', '{"usage":'));
  const leaf = fc.oneof(text, fc.integer(), fc.constant(null), fc.boolean());
  const value = fc.letrec((tie) => ({
    node: fc.oneof({ depthSize: 'small' }, leaf, fc.array(tie('node'), { maxLength: 3 }), fc.dictionary(fc.oneof(fc.string({ maxLength: 6 }), fc.constant('usage')), tie('node'), { maxKeys: 3 })),
  })).node;
  const answer = fc.tuple(fc.dictionary(fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom('usage', 'choices', 'metadata')), value, { maxKeys: 5 }), fc.option(counts, { nil: undefined }), fc.nat(6), fc.constantFrom(undefined, 2)).map(([rest, usage, at, space]) => {
    const entries = Object.entries(rest).filter(([k]) => k !== 'usage');
    if (usage) entries.splice(Math.min(at, entries.length), 0, ['usage', usage]);
    return Buffer.from(JSON.stringify(Object.fromEntries(entries), null, space));
  });
  it('reads the same usage from any answer, whole or cut anywhere', () => {
    fc.assert(fc.property(answer, fc.nat(), (body, cut) => {
      expect(usageInAnswer(body)).toEqual(oldUsageInAnswer(body));
      const part = body.subarray(0, cut % (body.length + 1));
      expect(usageInAnswer(part)).toEqual(oldUsageInAnswer(part));
    }), { numRuns: 2000 });
  });
});
