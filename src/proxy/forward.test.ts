import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ResolvedModel } from '../models/catalog.js';
import { deeperThan } from './answers.js';
import { outgoingBody, withUsageAsked } from './forward.js';

const resolvedAs = (model: string) => ({ upstreamModel: model, defaults: undefined }) as unknown as ResolvedModel;
/** A body spelt as apps spell them: compact, pretty, or with spaces and newlines around the end. */
const spelt = fc.tuple(fc.dictionary(fc.string({ maxLength: 8 }).filter((k) => k !== 'stream_options'), fc.jsonValue({ maxDepth: 3 }), { minKeys: 1, maxKeys: 5 }), fc.constantFrom(undefined, 2, '\t'), fc.constantFrom('', ' ', '\n', '\r\n \t'));

describe('asking a stream for its usage', () => {
  it('adds stream_options as the one new key, leaving the rest of the text as it came', () => {
    fc.assert(
      fc.property(spelt, ([obj, space, tail]) => {
        const body = { ...obj, model: 'm', stream: true };
        const raw = JSON.stringify(body, null, space) + tail;
        const asked = outgoingBody(raw, JSON.parse(raw), resolvedAs('m'), true);
        expect(JSON.parse(asked)).toEqual({ ...JSON.parse(raw), stream_options: { include_usage: true } });
        // the app's own text is a prefix of what goes: nothing of it was re-serialised
        expect(asked.startsWith(raw.slice(0, raw.trimEnd().length - 1))).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('re-serialises as before when the body has stream_options, another model or is not an object with keys', () => {
    const raw = '{"model":"m","stream":true,"stream_options":{"other":1}}';
    expect(JSON.parse(outgoingBody(raw, JSON.parse(raw), resolvedAs('m'), true))).toEqual({ model: 'm', stream: true, stream_options: { other: 1, include_usage: true } });
    const escaped = '{"model":"m","stream":true,"stream\\u005foptions":null}';
    expect(JSON.parse(outgoingBody(escaped, JSON.parse(escaped), resolvedAs('m'), true))).toEqual({ model: 'm', stream: true, stream_options: { include_usage: true } });
    const other = '{"model":"alias","stream":true}';
    expect(JSON.parse(outgoingBody(other, JSON.parse(other), resolvedAs('real'), true))).toEqual({ model: 'real', stream: true, stream_options: { include_usage: true } });
    for (const text of ['{}', '{ \n}', '[1]', '"x"', '{"a":1} x']) expect(withUsageAsked(text)).toBeNull();
  });
});

describe('the depth check of a body svc re-serialises', () => {
  it('answers the same with its text as without (a text too short to nest past the limit is not walked)', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }).filter((v) => v !== null && typeof v === 'object'), fc.integer({ min: 0, max: 6 }), fc.constantFrom(undefined, 1), (value, limit, space) => {
        const text = JSON.stringify(value, null, space);
        expect(deeperThan(value, limit, text)).toBe(deeperThan(value, limit));
      }),
      { numRuns: 2000 },
    );
  });
});
