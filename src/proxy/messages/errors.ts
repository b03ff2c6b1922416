/**
 * Anthropic's error shape for the Messages paths: `{"type":"error","error":{"type","message"}}`,
 * with the statuses Anthropic answers them with. svc's own error codes (src/errors.ts) keep
 * their status; only the body's type is said in Anthropic's words.
 */
export type AnthropicErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'request_too_large'
  | 'rate_limit_error'
  | 'api_error'
  | 'overloaded_error';

export interface AnthropicErrorBody {
  type: 'error';
  error: { type: AnthropicErrorType; message: string };
}

/**
 * The codes whose type is not told by their status alone. An upstream that was busy or silent is
 * overloaded (the SDKs retry it, as they do a 529); one that broke off or answered garbage is an
 * api_error.
 */
const BY_CODE: Readonly<Record<string, AnthropicErrorType>> = {
  upstream_busy: 'overloaded_error',
  upstream_timeout: 'overloaded_error',
  too_many_streams: 'overloaded_error',
  starting: 'overloaded_error',
  upstream_unavailable: 'api_error',
  payload_too_large: 'request_too_large',
  headers_too_large: 'request_too_large',
  model_not_found: 'not_found_error',
  unsupported_endpoint: 'not_found_error',
};

/** The Anthropic type of an error svc answers with, from its code (src/errors.ts) and status. */
export function anthropicErrorType(status: number, code?: string): AnthropicErrorType {
  const known = code === undefined ? undefined : BY_CODE[code];
  if (known) return known;
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 413) return 'request_too_large';
  if (status === 429) return 'rate_limit_error';
  if (status === 503 || status === 529) return 'overloaded_error';
  if (status >= 500) return 'api_error';
  return 'invalid_request_error';
}

export function anthropicErrorBody(type: AnthropicErrorType, message: string): AnthropicErrorBody {
  return { type: 'error', error: { type, message } };
}

/** The `error` event that ends a stream which broke after its 200 (Anthropic sends no message_stop after it). */
export function errorEvent(type: AnthropicErrorType, message: string): string {
  return `event: error\ndata: ${JSON.stringify(anthropicErrorBody(type, message))}\n\n`;
}
