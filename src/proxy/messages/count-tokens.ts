/**
 * POST /v1/messages/count_tokens where the provider does not count them itself: svc's estimate,
 * not a tokenizer's count (docs/api.md). It is the estimate svc counts for a stream that ended
 * without its usage, a token per 4 bytes, taken over what the model would read: the system
 * prompt, the messages as the chat format carries them, and the tools. An image counts a flat
 * IMAGE_TOKENS, whatever its bytes, as a model reads an image in tiles, not its base64.
 */
import { tokensOfBytes } from '../../activity/usage.js';
import type { CountTokensRequest, MessagesRequest } from './schemas.js';
import { type ChatMessage, toChat } from './to-chat.js';

/** About what a model reads of an image of a megapixel or so. */
export const IMAGE_TOKENS = 1600;

export interface TokenCount {
  input_tokens: number;
}

/** The estimate for a count_tokens body (a Messages request; max_tokens is not needed). */
export function countTokens(req: CountTokensRequest): TokenCount {
  const chat = toChat({ ...req, max_tokens: 1, stream: false } as MessagesRequest);
  let bytes = 0;
  let images = 0;
  for (const m of chat.messages) {
    bytes += 8; // the role and the message's framing
    const c = (m as ChatMessage & { content: unknown }).content;
    if (typeof c === 'string') bytes += Buffer.byteLength(c);
    else if (Array.isArray(c)) {
      for (const part of c) {
        if (part.type === 'text') bytes += Buffer.byteLength(part.text);
        else images++;
      }
    }
    if (m.role === 'assistant' && m.tool_calls) for (const call of m.tool_calls) bytes += Buffer.byteLength(call.function.name) + Buffer.byteLength(call.function.arguments);
  }
  if (chat.tools) bytes += Buffer.byteLength(JSON.stringify(chat.tools));
  return { input_tokens: tokensOfBytes(bytes) + images * IMAGE_TOKENS };
}
