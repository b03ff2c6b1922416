import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { expectSameParse, mutated } from '../../test/helpers/schema-properties.js';
import { compiledSchema } from '../http/validate.js';
import { countTokensRequest, messagesRequest } from './messages/index.js';
import { chatCompletionBody, completionsBody, embeddingsBody, responsesBody } from './routes.js';

const model = fc.oneof(fc.string({ minLength: 1, maxLength: 40 }), fc.constant(''), fc.string({ minLength: 199, maxLength: 202 }));
const extra = fc.dictionary(fc.constantFrom('temperature', 'user', 'stream_options', 'tools', 'x_vendor'), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 });
const message = fc.record({ role: fc.oneof(fc.constantFrom('system', 'user', 'assistant', 'tool'), fc.string({ maxLength: 70 })), content: fc.oneof(fc.string(), fc.constant(null), fc.array(fc.record({ type: fc.constant('text'), text: fc.string() }), { maxLength: 2 })) }, { requiredKeys: ['role'] });
const promptLike = fc.oneof(fc.string(), fc.array(fc.string(), { maxLength: 3 }), fc.array(fc.integer(), { maxLength: 3 }), fc.array(fc.array(fc.integer(), { maxLength: 2 }), { maxLength: 2 }));
const withExtra = <T extends object>(arb: fc.Arbitrary<T>) => fc.tuple(arb, extra).map(([body, more]) => ({ ...more, ...body }));

const bodies: Record<string, [z.ZodType, fc.Arbitrary<unknown>]> = {
  chat: [chatCompletionBody, withExtra(fc.record({ model, messages: fc.array(message, { minLength: 1, maxLength: 4 }), stream: fc.boolean() }, { requiredKeys: ['model', 'messages'] }))],
  embeddings: [embeddingsBody, withExtra(fc.record({ model, input: promptLike }))],
  completions: [completionsBody, withExtra(fc.record({ model, prompt: promptLike, stream: fc.boolean() }, { requiredKeys: ['model', 'prompt'] }))],
  responses: [responsesBody, withExtra(fc.record({ model, input: fc.oneof(fc.string(), fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 })), stream: fc.boolean() }, { requiredKeys: ['model'] }))],
};

describe('the data plane body schemas, compiled', () => {
  it('all six compile (none is left on the runtime parser)', () => {
    for (const schema of [chatCompletionBody, embeddingsBody, completionsBody, responsesBody, messagesRequest, countTokensRequest]) {
      expect(() => z.compile(schema, { strict: true })).not.toThrow();
    }
  });

  for (const [name, [schema, valid]] of Object.entries(bodies)) {
    it(`${name}: the compiled copy answers every body as the schema does, valid or not`, () => {
      const compiled = compiledSchema(schema);
      expect(compiled).not.toBe(schema);
      fc.assert(fc.property(fc.oneof(valid, mutated(valid), fc.jsonValue({ maxDepth: 3 })), (body) => expectSameParse(schema, compiled, body)), { numRuns: 600 });
    });
  }
});
