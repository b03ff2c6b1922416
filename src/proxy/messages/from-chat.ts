/**
 * An OpenAI chat completion turned into an Anthropic Message (docs/api.md, /v1/messages). Pure:
 * no I/O, no svc state.
 */
import { randomBytes } from 'node:crypto';

export type StopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use' | 'refusal';

export interface TextBlock {
  type: 'text';
  text: string;
}
export interface ToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: Record<string, unknown>;
}
export interface Usage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
}
export interface AnthropicMessage {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: (TextBlock | ToolUseBlock)[];
  stop_reason: StopReason;
  stop_sequence: string | null;
  usage: Usage;
}

/** The answer was not a chat completion (no choices, no message): the caller answers api_error. */
export class MalformedAnswerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedAnswerError';
  }
}

/** How many ids' worth of random bytes are drawn at once (18 bytes each). */
const IDS_PER_DRAW = 256;
let pool = Buffer.alloc(0);
let poolAt = 0;

/**
 * An id of Anthropic's shape: the prefix and 24 random base-62-ish characters. The bytes come
 * from the system's CSPRNG as for one `randomBytes(18)`, but drawn for many ids at once: a draw
 * per id cost more than the rest of a translated answer's id and framing together.
 */
export function newId(prefix: 'msg_' | 'toolu_'): string {
  if (poolAt + 18 > pool.length) {
    pool = randomBytes(18 * IDS_PER_DRAW);
    poolAt = 0;
  }
  const id = prefix + pool.toString('base64url', poolAt, poolAt + 18);
  poolAt += 18;
  return id;
}

/**
 * Which of the app's stop sequences ended the answer. The chat format says `stop` both for a
 * natural end and a matched stop sequence; servers that tell which put the matched text in the
 * choice's `stop_reason` (vLLM) or `matched_stop` (SGLang). Only a string that is one of the
 * request's stop sequences counts; anything else (a token id, a stop string of the model's own)
 * is an end_turn.
 */
export function matchedStop(choice: Record<string, unknown>, stopSequences: readonly string[] | undefined): string | null {
  if (!stopSequences || stopSequences.length === 0) return null;
  const said = typeof choice.stop_reason === 'string' ? choice.stop_reason : typeof choice.matched_stop === 'string' ? choice.matched_stop : null;
  return said !== null && stopSequences.includes(said) ? said : null;
}

/** finish_reason as stop_reason; `hasTools` for servers that say `stop` after calling tools. */
export function stopReasonOf(finish: unknown, stopSequence: string | null, hasTools: boolean): StopReason {
  if (finish === 'length') return 'max_tokens';
  if (finish === 'tool_calls' || finish === 'function_call' || hasTools) return 'tool_use';
  if (finish === 'content_filter') return 'refusal';
  return stopSequence !== null ? 'stop_sequence' : 'end_turn';
}

const count = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0);

/** The chat usage as Anthropic's: every prompt token is an input token (cached or not). */
export function usageOf(usage: unknown): Usage {
  const u = (usage && typeof usage === 'object' ? usage : {}) as Record<string, unknown>;
  return { input_tokens: count(u.prompt_tokens), output_tokens: count(u.completion_tokens), cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
}

/** A tool call's arguments as the tool_use input: the parsed JSON object, or `{}` when they are not one. */
export function inputOf(args: unknown): Record<string, unknown> {
  if (typeof args !== 'string' || args.trim() === '') return {};
  try {
    const parsed: unknown = JSON.parse(args);
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

export interface FromChatOptions {
  /** the model as the app named it */
  model: string;
  stopSequences?: readonly string[];
  /** the message id; a new `msg_...` when absent */
  id?: string;
}

/** The Message for a (non-streamed) chat completion: its first choice's text and tool calls, stop reason and usage. */
export function fromChat(answer: unknown, opts: FromChatOptions): AnthropicMessage {
  const choices = (answer as { choices?: unknown } | null)?.choices;
  const choice = Array.isArray(choices) ? (choices[0] as Record<string, unknown> | undefined) : undefined;
  const message = choice?.message as { content?: unknown; tool_calls?: unknown } | undefined;
  if (!choice || typeof choice !== 'object' || !message || typeof message !== 'object') throw new MalformedAnswerError('The upstream answer has no choice with a message.');
  const content: AnthropicMessage['content'] = [];
  const text = textOf(message.content);
  if (text !== '') content.push({ type: 'text', text });
  if (Array.isArray(message.tool_calls)) {
    for (const call of message.tool_calls as { id?: unknown; function?: { name?: unknown; arguments?: unknown } }[]) {
      if (!call || typeof call !== 'object') continue;
      const id = typeof call.id === 'string' && call.id !== '' ? call.id : newId('toolu_');
      const name = typeof call.function?.name === 'string' ? call.function.name : '';
      content.push({ type: 'tool_use', id, name, input: inputOf(call.function?.arguments) });
    }
  }
  const stopSequence = matchedStop(choice, opts.stopSequences);
  const stop_reason = stopReasonOf(choice.finish_reason, stopSequence, content.some((b) => b.type === 'tool_use') && choice.finish_reason !== 'length');
  return {
    id: opts.id ?? newId('msg_'),
    type: 'message',
    role: 'assistant',
    model: opts.model,
    content,
    stop_reason,
    stop_sequence: stop_reason === 'stop_sequence' ? stopSequence : null,
    usage: usageOf((answer as { usage?: unknown }).usage),
  };
}

/** A chat message's content as text: a string, or the text of its parts. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let text = '';
  for (const p of content as { type?: unknown; text?: unknown }[]) if (p && p.type === 'text' && typeof p.text === 'string') text += p.text;
  return text;
}
