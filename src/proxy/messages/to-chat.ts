/**
 * A Messages request turned into an OpenAI chat completion request, for a provider that does not
 * speak the Messages API (docs/api.md, /v1/messages). Pure: no I/O, no svc state.
 */
import type { ContentBlock, MessageParam, MessagesRequest, ToolChoice } from './schemas.js';

/** Content the chat format cannot carry (a PDF, a file id): the app is told, rather than the model answering without it. */
export class UntranslatableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UntranslatableError';
  }
}

export type ChatPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } };
export interface ChatToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}
export type ChatMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string | ChatPart[] }
  | { role: 'assistant'; content: string | null; tool_calls?: ChatToolCall[] }
  | { role: 'tool'; tool_call_id: string; content: string };

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  max_tokens: number;
  temperature?: number;
  top_p?: number;
  stop?: string[];
  stream?: true;
  stream_options?: { include_usage: true };
  tools?: { type: 'function'; function: { name: string; description?: string; parameters: Record<string, unknown> } }[];
  tool_choice?: 'auto' | 'required' | 'none' | { type: 'function'; function: { name: string } };
  parallel_tool_calls?: false;
}

/** What an error result's text starts with, as the chat format has no flag for it. */
export const TOOL_ERROR_PREFIX = 'Error: ';

/**
 * The chat request for a Messages request. `model` is the upstream's id (the caller resolves it).
 * A streamed request asks for the usage chunk (`stream_options.include_usage`), which the stream
 * translator needs for message_delta's counts. top_k, metadata, thinking, cache_control and any
 * other field the chat format has no place for are dropped.
 */
export function toChat(req: MessagesRequest, model: string = req.model): ChatRequest {
  const messages: ChatMessage[] = [];
  const system = systemText(req.system);
  if (system) messages.push({ role: 'system', content: system });
  for (const m of req.messages) pushMessage(messages, m);
  const out: ChatRequest = { model, messages, max_tokens: req.max_tokens };
  if (req.temperature !== undefined) out.temperature = req.temperature;
  if (req.top_p !== undefined) out.top_p = req.top_p;
  if (req.stop_sequences && req.stop_sequences.length > 0) out.stop = req.stop_sequences;
  if (req.stream) {
    out.stream = true;
    out.stream_options = { include_usage: true };
  }
  addTools(out, req);
  return out;
}

/** The system prompt as one string: its text blocks joined by a blank line (other blocks dropped). */
function systemText(system: MessagesRequest['system']): string {
  if (system === undefined) return '';
  if (typeof system === 'string') return system;
  const texts: string[] = [];
  for (const b of system) if (b.type === 'text' && typeof b.text === 'string' && b.text !== '') texts.push(b.text);
  return texts.join('\n\n');
}

function pushMessage(out: ChatMessage[], m: MessageParam): void {
  if (typeof m.content === 'string') {
    out.push(m.role === 'user' ? { role: 'user', content: m.content } : { role: 'assistant', content: m.content });
    return;
  }
  if (m.role === 'assistant') pushAssistant(out, m.content);
  else pushUser(out, m.content);
}

/** Text blocks become the content, tool_use blocks the tool calls (arguments as a JSON string); thinking is dropped. */
function pushAssistant(out: ChatMessage[], blocks: ContentBlock[]): void {
  const texts: string[] = [];
  const calls: ChatToolCall[] = [];
  for (const b of blocks) {
    if (b.type === 'text') texts.push((b as { text: string }).text);
    else if (b.type === 'tool_use') {
      const use = b as { id: string; name: string; input?: unknown };
      calls.push({ id: use.id, type: 'function', function: { name: use.name, arguments: JSON.stringify(use.input ?? {}) } });
    }
  }
  if (texts.length === 0 && calls.length === 0) return;
  const content = texts.length > 0 ? texts.join('\n\n') : null;
  out.push(calls.length > 0 ? { role: 'assistant', content, tool_calls: calls } : { role: 'assistant', content: content ?? '' });
}

/**
 * A user turn: its tool results first, each a `tool` message in their order (the chat format wants
 * them right after the assistant's calls), then the rest of the turn as one user message. Images
 * inside a tool result, which a tool message cannot carry, go into that user message.
 */
function pushUser(out: ChatMessage[], blocks: ContentBlock[]): void {
  const parts: ChatPart[] = [];
  const resultImages: ChatPart[] = [];
  for (const b of blocks) {
    if (b.type === 'tool_result') out.push(toolMessage(b as ToolResult, resultImages));
    else contentPart(b, parts);
  }
  parts.push(...resultImages);
  if (parts.length === 0) return;
  out.push({ role: 'user', content: parts.length === 1 && parts[0].type === 'text' ? parts[0].text : parts });
}

interface ToolResult {
  tool_use_id: string;
  content?: string | ContentBlock[];
  is_error?: boolean;
}

function toolMessage(r: ToolResult, images: ChatPart[]): ChatMessage {
  let text: string;
  if (r.content === undefined) text = '';
  else if (typeof r.content === 'string') text = r.content;
  else {
    const parts: ChatPart[] = [];
    for (const b of r.content) contentPart(b, parts);
    const texts: string[] = [];
    for (const p of parts) {
      if (p.type === 'text') texts.push(p.text);
      else images.push(p);
    }
    text = texts.join('\n');
  }
  return { role: 'tool', tool_call_id: r.tool_use_id, content: r.is_error ? TOOL_ERROR_PREFIX + text : text };
}

/** A text, image or document block as a chat content part; blocks of other types are dropped. */
function contentPart(b: ContentBlock, parts: ChatPart[]): void {
  if (b.type === 'text') parts.push({ type: 'text', text: (b as { text: string }).text });
  else if (b.type === 'image') parts.push({ type: 'image_url', image_url: { url: imageUrl((b as { source: Source }).source) } });
  else if (b.type === 'document') documentParts(b as Document, parts);
}

interface Source {
  type: string;
  media_type?: string;
  data?: unknown;
  url?: string;
  content?: unknown;
}
interface Document {
  source: Source;
  title?: string | null;
}

function imageUrl(source: Source): string {
  if (source.type === 'base64' && typeof source.data === 'string') return `data:${source.media_type};base64,${source.data}`;
  if (source.type === 'url' && typeof source.url === 'string') return source.url;
  throw new UntranslatableError(`An image of source type ${JSON.stringify(String(source.type).slice(0, 100))} cannot be sent to this provider: send it as base64 or a URL.`);
}

/** A text document as a text part (its title, when it has one, on the first line); a content document as its blocks. */
function documentParts(d: Document, parts: ChatPart[]): void {
  const title = typeof d.title === 'string' && d.title !== '' ? `${d.title}\n\n` : '';
  if (d.source.type === 'text' && typeof d.source.data === 'string') {
    parts.push({ type: 'text', text: title + d.source.data });
    return;
  }
  if (d.source.type === 'content') {
    const content = d.source.content;
    if (typeof content === 'string') parts.push({ type: 'text', text: title + content });
    else if (Array.isArray(content)) for (const b of content as ContentBlock[]) contentPart(b, parts);
    return;
  }
  throw new UntranslatableError(
    `A document of source type ${JSON.stringify(String(d.source.type).slice(0, 100))} cannot be sent to this provider, which takes text only: send the document's text.`,
  );
}

const choiceOf = (c: ToolChoice): ChatRequest['tool_choice'] =>
  c.type === 'any' ? 'required' : c.type === 'tool' ? { type: 'function', function: { name: (c as { name: string }).name } } : c.type === 'none' ? 'none' : 'auto';

/** Custom tools as functions (input_schema the parameters); server tools (another `type`) are dropped. */
function addTools(out: ChatRequest, req: MessagesRequest): void {
  const tools: NonNullable<ChatRequest['tools']> = [];
  for (const t of req.tools ?? []) {
    if (t.type !== undefined && t.type !== null && t.type !== 'custom') continue;
    const fn: { name: string; description?: string; parameters: Record<string, unknown> } = { name: t.name, parameters: t.input_schema ?? { type: 'object', properties: {} } };
    if (typeof t.description === 'string') fn.description = t.description;
    tools.push({ type: 'function', function: fn });
  }
  if (tools.length === 0) return;
  out.tools = tools;
  if (req.tool_choice) {
    out.tool_choice = choiceOf(req.tool_choice);
    if ('disable_parallel_tool_use' in req.tool_choice && req.tool_choice.disable_parallel_tool_use === true) out.parallel_tool_calls = false;
  }
}
