/** The Messages dialect: Anthropic's Messages API translated onto chat completions (docs/api.md, /v1/messages). */
export { countTokens, IMAGE_TOKENS, type TokenCount } from './count-tokens.js';
export { anthropicErrorBody, anthropicErrorType, type AnthropicErrorBody, type AnthropicErrorType, errorEvent } from './errors.js';
export { type AnthropicMessage, fromChat, MalformedAnswerError, newId } from './from-chat.js';
export { type CountTokensRequest, countTokensRequest, type MessagesRequest, messagesRequest } from './schemas.js';
export { MessagesStream, MessagesTransform, PING_EVENT, type StreamOptions } from './stream.js';
export { type ChatRequest, toChat, UntranslatableError } from './to-chat.js';
