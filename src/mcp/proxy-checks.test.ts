import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AppError } from '../errors.js';
import { jsonValue, MAX_JSON_DEPTH, nestedAtMost, parseOrThrow } from '../http/validate.js';
import { mediaTypeOf } from '../upstream/media-type.js';
import { relayedMediaType } from './proxy.js';
import { nestedTooDeep, requireJsonUtf8, tooDeep } from './request-body.js';

// The proxy once checked a body's depth with the zod schema every kept JSON value goes through,
// and took its Content-Type apart every time. The checks it does now must refuse exactly what
// those refused, with the same error.

/** A value nested `depth` deep around `inner`, in arrays and objects by turns of `shape`. */
const nestedAround = (inner: unknown, depth: number, shape: boolean[]) => {
  let v = inner;
  for (let i = 0; i < depth; i++) v = shape[i % shape.length] ? [v] : { k: v };
  return v;
};

const nearTheLimit = fc
  .tuple(fc.jsonValue({ maxDepth: 3 }), fc.integer({ min: MAX_JSON_DEPTH - 4, max: MAX_JSON_DEPTH + 3 }), fc.array(fc.boolean(), { minLength: 1, maxLength: 4 }))
  .map(([inner, depth, shape]) => nestedAround(inner, depth, shape));

const anyJson = fc.oneof(fc.jsonValue(), nearTheLimit, fc.array(nearTheLimit, { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 3 }), nearTheLimit, { maxKeys: 3 }));

/** What the zod check threw for a parsed body, or null. */
function schemaVerdict(value: unknown): { code: string; message: string } | null {
  try {
    parseOrThrow(jsonValue, value, 'body');
    return null;
  } catch (err) {
    return { code: (err as AppError).code, message: (err as AppError).message };
  }
}

describe('nestedTooDeep', () => {
  it('refuses what the schema refused, with its error, the text compact or spaced', () => {
    fc.assert(
      fc.property(anyJson, fc.boolean(), (value, spaced) => {
        const text = JSON.stringify(value, null, spaced ? 1 : undefined);
        const parsed = JSON.parse(text) as unknown;
        const before = schemaVerdict(parsed);
        const now = nestedTooDeep(text, parsed) ? { code: tooDeep().code, message: tooDeep().message } : null;
        expect(now).toEqual(before);
        expect(nestedTooDeep(text, parsed)).toBe(!nestedAtMost(parsed, MAX_JSON_DEPTH));
      }),
      { numRuns: 2000 },
    );
  });

  it('walks a key named __proto__ as the own key JSON.parse makes it', () => {
    for (const depth of [MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1]) {
      const text = `${'{"__proto__":'.repeat(depth)}1${'}'.repeat(depth)}`;
      const parsed = JSON.parse(text) as unknown;
      expect(nestedTooDeep(text, parsed)).toBe(depth > MAX_JSON_DEPTH);
      expect(nestedTooDeep(text, parsed)).toBe(schemaVerdict(parsed) !== null);
    }
  });

  it('measures the value at the limit exactly', () => {
    for (const depth of [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1]) {
      const value = nestedAround(1, depth, [true, false]);
      const text = JSON.stringify(value);
      expect(nestedTooDeep(text, value)).toBe(depth > MAX_JSON_DEPTH);
    }
  });
});

/** The check as it was: the media type taken apart every time. */
function requireJsonUtf8Before(contentType: string): void {
  const [type, ...params] = contentType.split(';').map((p) => p.trim().toLowerCase());
  const charset = params.find((p) => p.startsWith('charset='))?.slice('charset='.length).replace(/^"|"$/g, '');
  if (type !== 'application/json' || (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8')) {
    throw new AppError('unsupported_media_type', 'The MCP endpoint takes Content-Type: application/json in UTF-8.');
  }
}

const verdict = (check: (v: string) => void, value: string) => {
  try {
    check(value);
    return 'taken';
  } catch (err) {
    return (err as AppError).code;
  }
};

describe('requireJsonUtf8', () => {
  const part = fc.constantFrom('application/json', 'Application/JSON', 'text/plain', 'charset=utf-8', 'charset="UTF8"', 'charset=utf-7', 'charset=', ' ', '', 'x=1');
  const contentType = fc.oneof(fc.array(part, { maxLength: 4 }).map((ps) => ps.join(';')), fc.string({ maxLength: 30 }));

  it('takes and refuses what it did before', () => {
    fc.assert(
      fc.property(contentType, (value) => {
        expect(verdict(requireJsonUtf8, value)).toBe(verdict(requireJsonUtf8Before, value));
      }),
      { numRuns: 2000 },
    );
    expect(verdict(requireJsonUtf8, 'application/json')).toBe('taken');
  });
});

describe('relayedMediaType', () => {
  const typed = fc.constantFrom('application/json', 'text/event-stream', 'application/json; charset=utf-8', 'text/html; a=b; charset="x"', 'bad type', '');
  it('answers what mediaTypeOf does, remembered or not, past its bound too', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(typed, fc.string({ maxLength: 40 })), { maxLength: 150 }), (values) => {
        for (const v of [...values, ...values]) expect(relayedMediaType(v)).toBe(mediaTypeOf(v));
      }),
      { numRuns: 300 },
    );
  });
});
