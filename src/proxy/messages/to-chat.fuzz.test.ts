import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { expectSameParse, mutated } from '../../../test/helpers/schema-properties.js';
import { compiledSchema } from '../../http/validate.js';
import { countTokensRequest, messagesRequest } from './schemas.js';
import { toChat } from './to-chat.js';

/** What an OpenAI chat completion request may hold, strictly: a translation producing anything else is a bug. */
const part = z.union([z.strictObject({ type: z.literal('text'), text: z.string() }), z.strictObject({ type: z.literal('image_url'), image_url: z.strictObject({ url: z.string().min(1) }) })]);
const toolCall = z.strictObject({ id: z.string().min(1), type: z.literal('function'), function: z.strictObject({ name: z.string().min(1), arguments: z.string() }) });
const chatMessage = z.union([
  z.strictObject({ role: z.literal('system'), content: z.string().min(1) }),
  z.strictObject({ role: z.literal('user'), content: z.union([z.string(), z.array(part).min(1)]) }),
  z.strictObject({ role: z.literal('assistant'), content: z.string().nullable(), tool_calls: z.array(toolCall).min(1).optional() }),
  z.strictObject({ role: z.literal('tool'), tool_call_id: z.string().min(1), content: z.string() }),
]);
const chatRequest = z.strictObject({
  model: z.string().min(1),
  messages: z.array(chatMessage),
  max_tokens: z.number().int().min(1),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().min(0).max(1).optional(),
  stop: z.array(z.string()).min(1).optional(),
  stream: z.literal(true).optional(),
  stream_options: z.strictObject({ include_usage: z.literal(true) }).optional(),
  tools: z
    .array(z.strictObject({ type: z.literal('function'), function: z.strictObject({ name: z.string().min(1), description: z.string().optional(), parameters: z.record(z.string(), z.unknown()) }) }))
    .min(1)
    .optional(),
  tool_choice: z.union([z.enum(['auto', 'required', 'none']), z.strictObject({ type: z.literal('function'), function: z.strictObject({ name: z.string().min(1) }) })]).optional(),
  parallel_tool_calls: z.literal(false).optional(),
});

const junk = fc.dictionary(fc.constantFrom('cache_control', 'citations', 'x_beta', 'context'), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 2 });
const name = fc.stringMatching(/^[a-zA-Z_][a-zA-Z0-9_-]{0,20}$/);
const id = fc.stringMatching(/^[a-z]{1,4}_[A-Za-z0-9]{1,10}$/);
const textBlock = fc.tuple(fc.string(), junk).map(([text, j]) => ({ ...j, type: 'text', text }));
const image = fc.oneof(
  fc.record({ type: fc.constant('image'), source: fc.record({ type: fc.constant('base64'), media_type: fc.constantFrom('image/png', 'image/jpeg'), data: fc.base64String() }) }),
  fc.record({ type: fc.constant('image'), source: fc.record({ type: fc.constant('url'), url: fc.webUrl() }) }),
);
const documentBlock = fc.oneof(
  fc.record({ type: fc.constant('document'), source: fc.record({ type: fc.constant('text'), media_type: fc.constant('text/plain'), data: fc.string() }), title: fc.option(fc.string(), { nil: undefined }) }),
  fc.record({ type: fc.constant('document'), source: fc.record({ type: fc.constant('content'), content: fc.oneof(fc.string(), fc.array(textBlock, { maxLength: 2 })) }) }),
);
const dropped = fc.record({ type: fc.constantFrom('thinking', 'redacted_thinking', 'server_tool_use', 'web_search_tool_result'), data: fc.string() });
const toolResult = fc.record({
  type: fc.constant('tool_result'),
  tool_use_id: id,
  content: fc.option(fc.oneof(fc.string(), fc.array(fc.oneof(textBlock, image), { maxLength: 3 })), { nil: undefined }),
  is_error: fc.option(fc.boolean(), { nil: undefined }),
});
const toolUse = fc.record({ type: fc.constant('tool_use'), id, name, input: fc.dictionary(fc.string({ maxLength: 4 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }) });
const userMessage = fc.record({ role: fc.constant('user'), content: fc.oneof(fc.string(), fc.array(fc.oneof(textBlock, image, documentBlock, toolResult, dropped), { maxLength: 5 })) });
const assistantMessage = fc.record({ role: fc.constant('assistant'), content: fc.oneof(fc.string(), fc.array(fc.oneof(textBlock, toolUse, dropped), { maxLength: 4 })) });
const tool = fc.record({
  name,
  description: fc.option(fc.string(), { nil: undefined }),
  input_schema: fc.constant({ type: 'object', properties: { q: { type: 'string' } } }),
  type: fc.option(fc.constantFrom('custom', 'web_search_20250305', null), { nil: undefined }),
});
const request = fc.record(
  {
    model: fc.string({ minLength: 1, maxLength: 30 }),
    max_tokens: fc.integer({ min: 1, max: 1_000_000 }),
    messages: fc.array(fc.oneof(userMessage, assistantMessage), { minLength: 1, maxLength: 6 }),
    system: fc.oneof(fc.string(), fc.array(fc.oneof(textBlock, dropped), { maxLength: 3 })),
    tools: fc.array(tool, { maxLength: 3 }),
    tool_choice: fc.oneof(fc.constant({ type: 'auto' }), fc.constant({ type: 'any', disable_parallel_tool_use: true }), fc.constant({ type: 'none' }), name.map((n) => ({ type: 'tool', name: n }))),
    stop_sequences: fc.array(fc.string(), { maxLength: 3 }),
    temperature: fc.double({ min: 0, max: 1, noNaN: true }),
    top_p: fc.double({ min: 0, max: 1, noNaN: true }),
    top_k: fc.nat(500),
    stream: fc.boolean(),
    metadata: fc.record({ user_id: fc.string() }),
    thinking: fc.record({ type: fc.constant('enabled'), budget_tokens: fc.nat() }),
    context_management: fc.jsonValue({ maxDepth: 2 }),
  },
  { requiredKeys: ['model', 'max_tokens', 'messages'] },
);

describe('Messages request to chat request, fuzzed', () => {
  it('any valid Messages request turns into a valid chat request, tool results in order and before the rest of their turn', () => {
    fc.assert(
      fc.property(request, (body) => {
        const parsed = messagesRequest.parse(body);
        const chat = toChat(parsed);
        chatRequest.parse(chat);
        // every tool result, in order, as a tool message; none after the user content of its turn
        const wantedResults = parsed.messages.flatMap((m) => (typeof m.content === 'string' ? [] : m.content.filter((b) => b.type === 'tool_result').map((b) => (b as { tool_use_id: string }).tool_use_id)));
        expect(chat.messages.filter((m) => m.role === 'tool').map((m) => (m as { tool_call_id: string }).tool_call_id)).toEqual(wantedResults);
        for (const m of parsed.messages) {
          if (m.role !== 'user') continue;
          const turn = toChat({ ...parsed, system: undefined, messages: [m] }).messages.map((x) => x.role).join(' ');
          expect(turn).toMatch(/^(tool ?)*(user)?$/);
        }
        if (chat.messages.some((m) => m.role === 'system')) expect(chat.messages[0].role).toBe('system');
        expect(chat.messages.filter((m) => m.role === 'system').length).toBeLessThanOrEqual(1);
      }),
      { numRuns: 400 },
    );
  });
});

describe('the Messages schemas, compiled as the daemon runs them', () => {
  it('answer every request as the schemas do: valid ones, ones with a place in them changed to any JSON, and any JSON', () => {
    const messages = compiledSchema(messagesRequest);
    const counting = compiledSchema(countTokensRequest);
    fc.assert(
      fc.property(fc.oneof(request, mutated(request), fc.jsonValue({ maxDepth: 3 })), (body) => {
        expectSameParse(messagesRequest, messages, body);
        expectSameParse(countTokensRequest, counting, body);
      }),
      { numRuns: 600 },
    );
  });
});
