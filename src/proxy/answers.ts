import { AppError } from '../errors.js';

/** The endpoints svc forwards to a provider: OpenAI's, and Anthropic's Messages API. */
export type Endpoint = '/chat/completions' | '/embeddings' | '/completions' | '/responses' | '/messages';

export const modelNotFound = (model: string) =>
  new AppError('model_not_found', `The model ${JSON.stringify(model.slice(0, 200))} does not exist here.`, { param: 'model' });
export const clientClosed = () => new AppError('client_closed', 'The client went away.');

/**
 * Whether a parsed JSON value nests deeper than `limit` (without recursion, so any depth is safe).
 * `text`, the JSON it was parsed from: each level takes an opening and a closing bracket, so a text
 * shorter than twice the limit cannot nest past it and is not walked.
 */
export function deeperThan(value: unknown, limit: number, text?: string): boolean {
  if (text !== undefined && text.length < 2 * (limit + 1)) return false;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (depth > limit) return true;
    for (const v of Object.values(node as object)) if (v !== null && typeof v === 'object') stack.push([v, depth + 1]);
  }
  return false;
}

export const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
/** Whether the app itself asked for a stream's usage (`stream_options.include_usage`). */
export const usageAsked = (body: Record<string, unknown>) => isObject(body.stream_options) && body.stream_options.include_usage === true;

const count = (v: unknown) => (typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : null);

/**
 * The most output tokens a call allows itself, as the body says: `max_tokens` (or chat's
 * `max_completion_tokens`, the larger of the two), the Responses API's `max_output_tokens`, times
 * `n` choices; none for embeddings; null when the body names no cap.
 */
export function outputCap(endpoint: Endpoint, body: Record<string, unknown>): number | null {
  if (endpoint === '/embeddings') return 0;
  if (endpoint === '/responses') return count(body.max_output_tokens);
  const a = count(body.max_tokens);
  const b = endpoint === '/chat/completions' ? count(body.max_completion_tokens) : null;
  const cap = a === null ? b : b === null ? a : Math.max(a, b);
  if (cap === null) return null;
  const n = count(body.n);
  return n !== null && n > 1 ? cap * n : cap;
}

/** The message of an upstream error body: OpenAI's `error.message`, or `error`, `message`, `detail`; else the text. */
export function upstreamMessage(text: string): string {
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown; detail?: unknown } | null;
    if (parsed && typeof parsed === 'object') {
      const m = typeof parsed.error === 'string' ? parsed.error : (parsed.error?.message ?? parsed.message ?? parsed.detail);
      if (typeof m === 'string') return m;
    }
  } catch {
    /* not JSON: the text itself */
  }
  return text;
}

/**
 * OpenAI's embeddings API answers base64 (little-endian float32) when asked; the official client
 * asks by default. An upstream that ignores it sends float arrays, which svc encodes as asked.
 */
export function floatsToBase64(answer: unknown): boolean {
  const data = (answer as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) return false;
  let changed = false;
  for (const item of data) {
    const vector = (item as { embedding?: unknown } | null)?.embedding;
    if (!Array.isArray(vector) || !vector.every((x) => typeof x === 'number')) continue;
    const buf = Buffer.allocUnsafe(vector.length * 4);
    vector.forEach((x: number, i) => buf.writeFloatLE(x, i * 4));
    (item as { embedding: unknown }).embedding = buf.toString('base64');
    changed = true;
  }
  return changed;
}

/** The event that ends a stream the upstream broke: the Responses API's `error` event, else `data: {"error":...}`. */
export function streamErrorEvent(endpoint: Endpoint, message: string, code: string): string {
  const error = { message, type: 'upstream_error', code };
  if (endpoint === '/responses') return `event: error\ndata: ${JSON.stringify({ type: 'error', sequence_number: 0, code, message, param: null, error })}\n\n`;
  return `data: ${JSON.stringify({ error })}\n\n`;
}
