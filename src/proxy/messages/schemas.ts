/**
 * The Anthropic Messages request as svc reads it to translate it onto a provider's
 * `/chat/completions`. Loose on purpose: Claude Code and the SDKs send many fields an
 * OpenAI-format upstream cannot honour (thinking, cache_control, metadata, context_management,
 * betas of the day); they are accepted here and dropped by the translation, never an error.
 * Only what the translation reads is checked, so a malformed value of it is a 400, not a 500.
 */
import { z } from 'zod';

const text = z.looseObject({ type: z.literal('text'), text: z.string() });
const base64Source = z.looseObject({ type: z.literal('base64'), media_type: z.string().min(1).max(200), data: z.string() });
const urlSource = z.looseObject({ type: z.literal('url'), url: z.string().min(1) });
/** Any other source (a file id, a source type of the future): kept loose, dropped on translation. */
const otherSource = z.looseObject({ type: z.string() });
const image = z.looseObject({ type: z.literal('image'), source: z.union([base64Source, urlSource, otherSource]) });
const textSource = z.looseObject({ type: z.literal('text'), data: z.string() });
const contentSource = z.looseObject({ type: z.literal('content'), content: z.union([z.string(), z.array(z.looseObject({ type: z.string() }))]) });
const document = z.looseObject({
  type: z.literal('document'),
  source: z.union([textSource, contentSource, otherSource]),
  title: z.string().nullish(),
  context: z.string().nullish(),
});
const KNOWN = new Set(['text', 'image', 'document', 'tool_use', 'tool_result']);
/**
 * A block of a type svc does not translate (thinking, redacted_thinking, server tools' blocks):
 * dropped. A block of a known type that does not fit its schema is not one of these, so it is a 400.
 */
const otherBlock = z.looseObject({ type: z.string().min(1).max(100).refine((t) => !KNOWN.has(t), 'a known block type with the wrong fields') });

const toolUse = z.looseObject({ type: z.literal('tool_use'), id: z.string().min(1).max(400), name: z.string().min(1).max(200), input: z.unknown() });
const toolResult = z.looseObject({
  type: z.literal('tool_result'),
  tool_use_id: z.string().min(1).max(400),
  content: z.union([z.string(), z.array(z.union([text, image, document, otherBlock]))]).optional(),
  is_error: z.boolean().optional(),
});
export const contentBlock = z.union([text, image, document, toolUse, toolResult, otherBlock]);
export const messageParam = z.looseObject({
  role: z.enum(['user', 'assistant']),
  content: z.union([z.string(), z.array(contentBlock).max(10_000)]),
});
const tool = z.looseObject({
  name: z.string().min(1).max(200),
  description: z.string().optional(),
  input_schema: z.record(z.string(), z.unknown()).optional(),
  /** custom, or absent; a server tool (web_search_..., bash_...) has another type and is dropped */
  type: z.string().nullish(),
});
export const toolChoice = z.union([
  z.looseObject({ type: z.literal('auto'), disable_parallel_tool_use: z.boolean().optional() }),
  z.looseObject({ type: z.literal('any'), disable_parallel_tool_use: z.boolean().optional() }),
  z.looseObject({ type: z.literal('tool'), name: z.string().min(1).max(200), disable_parallel_tool_use: z.boolean().optional() }),
  z.looseObject({ type: z.literal('none') }),
]);

export const messagesRequest = z
  .looseObject({
    model: z.string().min(1).max(200),
    max_tokens: z.number().int().min(1),
    messages: z.array(messageParam).min(1).max(10_000),
    system: z.union([z.string(), z.array(z.union([text, otherBlock]))]).optional(),
    tools: z.array(tool).max(10_000).optional(),
    tool_choice: toolChoice.optional(),
    stop_sequences: z.array(z.string()).max(1000).optional(),
    temperature: z.number().min(0).max(2).optional(),
    top_p: z.number().min(0).max(1).optional(),
    top_k: z.number().int().min(0).optional(),
    stream: z.boolean().optional(),
    metadata: z.unknown().optional(),
  })
  .meta({
    id: 'MessagesRequest',
    description: 'Anthropic Messages request; translated onto the provider\'s /chat/completions, fields an OpenAI-format upstream cannot honour are dropped',
  });

export type MessagesRequest = z.infer<typeof messagesRequest>;
export type ContentBlock = z.infer<typeof contentBlock>;
export type MessageParam = z.infer<typeof messageParam>;
export type ToolChoice = z.infer<typeof toolChoice>;

/** POST /v1/messages/count_tokens: a Messages request without max_tokens. */
export const countTokensRequest = messagesRequest
  .omit({ max_tokens: true })
  .meta({ id: 'MessagesCountTokensRequest', description: 'Anthropic count_tokens request: a Messages request without max_tokens' });
export type CountTokensRequest = z.infer<typeof countTokensRequest>;
