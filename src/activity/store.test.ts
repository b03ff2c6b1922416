import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { localDay } from './store.js';

// localDay keeps the span of the last day it worked out; it must answer what the plain formula does.
const plain = (ms: number) => {
  const d = new Date(ms);
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
};

describe('localDay', () => {
  it('answers the plain formula for times in any order, midnights and their neighbours included', () => {
    const midnight = new Date(2026, 2, 29).getTime();
    const near = fc.integer({ min: -2, max: 2 }).map((k) => midnight + k * 86_400_000);
    const time = fc.oneof(fc.integer({ min: 0, max: 4_102_444_800_000 }), near, near.chain((m) => fc.integer({ min: m - 2, max: m + 1 })));
    fc.assert(fc.property(fc.array(time, { minLength: 1, maxLength: 20 }), (times) => {
      for (const t of times) expect(localDay(t)).toBe(plain(t));
    }), { numRuns: 300 });
  });

  it('gives no day for a time that is none', () => {
    expect(localDay(Number.NaN)).toBe(plain(Number.NaN));
    expect(localDay(Date.now())).toBe(plain(Date.now()));
  });
});
