/**
 * Property-test helpers for a schema and its compiled copy (`compiledSchema`): the copy must
 * answer every value exactly as the schema does, the data of a valid one and the issues of an
 * invalid one alike.
 */
import fc from 'fast-check';
import { expect } from 'vitest';
import type { z } from 'zod';

/** Every place in a JSON value (its own root too), as the keys and indexes leading to it. */
function places(value: unknown, at: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  out.push(at);
  if (Array.isArray(value)) value.forEach((v, i) => places(v, [...at, i], out));
  else if (value !== null && typeof value === 'object') for (const [k, v] of Object.entries(value)) places(v, [...at, k], out);
  return out;
}

/** A value of `valid` with one place in it (any depth, the root too) replaced by any JSON value, or deleted. */
export function mutated<T>(valid: fc.Arbitrary<T>): fc.Arbitrary<unknown> {
  return fc.tuple(valid, fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constant(undefined)), fc.nat()).map(([value, junk, pick]) => {
    const copy = structuredClone(value) as unknown;
    const all = places(copy);
    const path = all[pick % all.length];
    if (path.length === 0) return junk;
    const parent = path.slice(0, -1).reduce<unknown>((v, k) => (v as Record<string | number, unknown>)[k], copy) as Record<string | number, unknown>;
    const last = path[path.length - 1];
    if (junk === undefined && !Array.isArray(parent)) delete parent[last];
    else parent[last] = junk;
    return copy;
  });
}

/** The schema's answer and the compiled copy's for `value` are the same. */
export function expectSameParse(schema: z.ZodType, compiled: z.ZodType, value: unknown): void {
  const want = schema.safeParse(value);
  const got = compiled.safeParse(value);
  expect(got.success).toBe(want.success);
  if (want.success) expect(got.data).toStrictEqual(want.data);
  else expect(got.error?.issues).toEqual(want.error.issues);
}
