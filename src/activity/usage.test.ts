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
