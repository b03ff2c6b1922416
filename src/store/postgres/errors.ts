import { StoreUnavailableError } from '../durable-file.js';

/**
 * Which failures of the database mean "the database cannot be reached or cannot answer now" (so
 * the change was not made, and the HTTP layer answers 503 store_unavailable), as opposed to a
 * bug (a malformed query), which stays what it is.
 */

/** SQLSTATE classes and codes that say nothing about the query, only about the server's state. */
const UNAVAILABLE_CLASSES = ['08', '53', '57', '58'];
const UNAVAILABLE_CODES = new Set([
  '55P03', // lock_not_available: lock_timeout ran out
  '40001', // serialization_failure, once the retries are spent
  '40P01', // deadlock_detected, likewise
  '25P03', // idle_in_transaction_session_timeout
]);
/** what Node's sockets say when the server is gone */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ECONNABORTED']);
/** what the pg client says about its own timeouts and lost connections (it gives them no code) */
const CLIENT_MESSAGES = [/timeout exceeded when trying to connect/i, /connection terminated/i, /query read timeout/i, /client has encountered a connection error/i, /connection timeout/i, /cannot use a pool after calling end/i, /client was closed/i, /not queryable/i];

export function isUnavailable(err: unknown): boolean {
  if (err instanceof StoreUnavailableError) return true;
  const e = err as { code?: unknown; message?: unknown } | null;
  if (!e || typeof e !== 'object') return false;
  const code = typeof e.code === 'string' ? e.code : '';
  if (code.length === 5 && (UNAVAILABLE_CLASSES.includes(code.slice(0, 2)) || UNAVAILABLE_CODES.has(code))) return true;
  if (SOCKET_CODES.has(code)) return true;
  return typeof e.message === 'string' && CLIENT_MESSAGES.some((re) => re.test(e.message as string));
}

/**
 * Whether the client's connection can no longer be trusted (gone, or a reply it gave up waiting
 * for may still come): such a client is thrown away, not asked to roll back.
 */
export function connectionLost(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  if (!e || typeof e !== 'object') return false;
  const code = typeof e.code === 'string' ? e.code : '';
  if (code.startsWith('08') || ['57P01', '57P02', '57P03'].includes(code) || SOCKET_CODES.has(code)) return true;
  return typeof e.message === 'string' && CLIENT_MESSAGES.some((re) => re.test(e.message as string));
}

/** Conflicts that a transaction run again may not meet. */
export const isRetryable = (err: unknown) => ['40001', '40P01'].includes(String((err as { code?: unknown } | null)?.code ?? ''));

/** The error a repository call gives: the store's own 503 error for an unavailable database, else the error itself. */
export function storeError(err: unknown): unknown {
  if (err instanceof StoreUnavailableError || !isUnavailable(err)) return err;
  return new StoreUnavailableError(new Error(`the database is unavailable: ${describe(err)}`));
}

/** A short, secret-free reason: the SQLSTATE or socket code and the server's or client's message. */
function describe(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown };
  const code = typeof e.code === 'string' ? `${e.code} ` : '';
  return `${code}${typeof e.message === 'string' ? e.message : String(err)}`.slice(0, 300);
}
