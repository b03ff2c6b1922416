import { AppError } from '../errors.js';
import { MAX_JSON_DEPTH } from '../http/validate.js';

/**
 * The reading of an app's MCP request body, each step done once a request: its media type, its
 * UTF-8, its JSON, and how deep that JSON nests.
 */

/** The Content-Type nearly every MCP client sends, taken without taking it apart. */
const PLAIN_JSON = 'application/json';

/**
 * The proxy forwards only what it checked, and it checks UTF-8 JSON: a body in another charset
 * (UTF-7, UTF-16...) could spell `tools/call` in a way svc does not see and an upstream does.
 */
export function requireJsonUtf8(contentType: string): void {
  if (contentType === PLAIN_JSON) return;
  const [type, ...params] = contentType.split(';').map((p) => p.trim().toLowerCase());
  const charset = params.find((p) => p.startsWith('charset='))?.slice('charset='.length).replace(/^"|"$/g, '');
  if (type !== 'application/json' || (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8')) {
    throw new AppError('unsupported_media_type', 'The MCP endpoint takes Content-Type: application/json in UTF-8.');
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });
export function decodeUtf8(body: Buffer): string {
  try {
    return utf8.decode(body);
  } catch {
    throw new AppError('invalid_body', 'The MCP request body is not valid UTF-8.');
  }
}

/** What `parseJson` answers for a text that is not JSON (any JSON value, null included, is a value). */
export const NOT_JSON: unique symbol = Symbol('not JSON');

/** The body's JSON, parsed once for everything that reads it (the activity's note, the checks). */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return NOT_JSON;
  }
}

/**
 * A text shorter than this cannot hold a value nested deeper than MAX_JSON_DEPTH: each level is
 * an opening and a closing bracket of its own.
 */
const TOO_SHORT_TO_NEST = 2 * (MAX_JSON_DEPTH + 1);

/** Whether `value` nests at most `left` more arrays and objects; JSON.parse's values only (own keys, no cycles). */
function nestsWithin(value: unknown, left: number): boolean {
  if (value === null || typeof value !== 'object') return true;
  if (left === 0) return false;
  if (Array.isArray(value)) {
    for (const child of value) if (!nestsWithin(child, left - 1)) return false;
    return true;
  }
  const obj = value as Record<string, unknown>;
  for (const key of Object.keys(obj)) if (!nestsWithin(obj[key], left - 1)) return false;
  return true;
}

/**
 * Whether `value`, parsed from `text`, nests deeper than MAX_JSON_DEPTH: it is sent on
 * re-serialized, which a value nested thousands deep would not survive. The walk recurses at most
 * MAX_JSON_DEPTH + 1 calls deep, and a short text is not walked at all.
 */
export function nestedTooDeep(text: string, value: unknown): boolean {
  return text.length >= TOO_SHORT_TO_NEST && !nestsWithin(value, MAX_JSON_DEPTH);
}

/** The error of a body nested too deep, as the body's validation words it elsewhere. */
export const tooDeep = () => new AppError('invalid_body', `Invalid request body: nested more than ${MAX_JSON_DEPTH} levels deep`);
