import { type IncomingMessage, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Middleware } from 'koa';
import { AppError, type ErrorCode, internalError, invalidBody, payloadTooLarge } from '../errors.js';
import type { Logger } from '../log.js';
import { StoreUnavailableError } from '../store/durable-file.js';
import type { AppState } from './context.js';

/** Maps errors thrown by Koa itself or its body parser (which carry `status`) into AppErrors. */
/** The store's own errors as HTTP answers: the store knows nothing of HTTP. Others pass unchanged. */
export function fromStoreError(err: unknown): unknown {
  return err instanceof StoreUnavailableError ? new AppError('store_unavailable', err.message, { expose: true, cause: err.cause }) : err;
}

function toAppError(err: unknown, bodyLimit: number): AppError {
  err = fromStoreError(err);
  if (err instanceof AppError) return err;
  const e = err as { status?: number; statusCode?: number; expose?: boolean; message?: string; type?: string };
  const status = e?.status ?? e?.statusCode;
  if (status === 413) return payloadTooLarge(bodyLimit);
  if (status === 415) return invalidBody('Unsupported content type; send application/json.');
  if (status === 404) return new AppError('not_found', 'Not found');
  if (status === 405) return new AppError('method_not_allowed', 'Method not allowed');
  if (status && status >= 400 && status < 500) {
    const parseFailure = e.type === 'entity.parse.failed' || /JSON/i.test(e.message ?? '');
    return invalidBody(parseFailure ? 'Request body is not valid JSON.' : 'Malformed request.');
  }
  return internalError(err);
}

/**
 * koa-body's onError: a body that cannot be read (a Content-Encoding whose data does not inflate,
 * a broken stream) is the client's fault, a 400, never a 500. Errors that already carry a 4xx
 * status (413, 415, bad JSON) pass through unchanged.
 */
export function bodyReadError(err: Error): never {
  const status = (err as { status?: number }).status;
  if (typeof status === 'number' && status >= 400 && status < 500) throw err;
  throw invalidBody('The request body could not be read (does Content-Encoding match the data?).');
}

/** The request stream ended early because the client went away (not a failure of ours). */
function clientHungUp(req: IncomingMessage): boolean {
  return !req.complete && (req.destroyed || Boolean(req.socket?.destroyed));
}

/** The error's body in the route's wire format (AppState.errorBody), else svc's own. */
const bodyOf = (state: AppState, error: AppError) => (state.errorBody ? state.errorBody(error) : error.toBody());

/** The one error-handling middleware: every error leaves as the JSON error shape (decisions: Errors). */
export function errorMiddleware(logger: Logger, bodyLimit: number): Middleware<AppState> {
  return async function handleErrors(ctx, next) {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) throw new AppError('not_found', 'Not found');
      // The router's own answers for a wrong method (405, or 501 for a method it does not know)
      // come without a body; both leave as a JSON 405, keeping the router's Allow header.
      if ((ctx.status === 405 || ctx.status === 501) && ctx.body === undefined) {
        const allow = ctx.response.get('Allow');
        throw new AppError('method_not_allowed', `Method ${ctx.method} is not allowed here${allow ? `; allowed: ${allow}` : ''}.`);
      }
    } catch (err) {
      // An app that hung up while sending its body: its mistake (a 400 nobody will read), and
      // routine, not an internal error worth a stack trace.
      if (!(err instanceof AppError) && clientHungUp(ctx.req)) {
        logger.debug({ requestId: ctx.state.requestId, path: ctx.path, err: (err as Error)?.message }, 'client closed the request before its body ended');
        ctx.status = 400;
        ctx.body = bodyOf(ctx.state, invalidBody('The request body was cut off: the client closed the connection.'));
        return;
      }
      const appError = toAppError(err, bodyLimit);
      if (appError.status === 500) {
        logger.error({ err: (err as Error)?.stack ?? String(err), requestId: ctx.state.requestId, path: ctx.path }, 'request failed');
      }
      ctx.status = appError.status;
      ctx.set(appError.headers);
      ctx.body = bodyOf(ctx.state, appError);
      // Whatever was partly read stays unread; closing keeps a half-sent oversize body from lingering.
      if (appError.status === 413) ctx.set('Connection', 'close');
    }
  };
}

/** What Node's HTTP parser could not take, by its error code, as the catalogue names it. */
const PARSER_ERRORS: Record<string, [ErrorCode, string]> = {
  HPE_HEADER_OVERFLOW: ['headers_too_large', 'The request line and headers are over 16 KiB (a very long URL or cookie).'],
  HPE_CHUNK_EXTENSIONS_OVERFLOW: ['payload_too_large', 'The chunk extensions of the body are too large.'],
  ERR_HTTP_REQUEST_TIMEOUT: ['request_timeout', 'The request did not arrive in time.'],
};

/**
 * The server's `clientError` listener: a request Node's parser refused before Koa saw it (a URL
 * over 16 KiB, broken HTTP, too slow) is answered in the error shape like every other, instead
 * of Node's bare status line. As Node's own answer, it is written only while no answer of this
 * connection has begun, and the connection is closed.
 */
export function answerParserError(err: Error & { code?: string }, socket: Duplex): void {
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  const [code, message] = PARSER_ERRORS[err.code ?? ''] ?? ['invalid_body', 'The request is not valid HTTP.'];
  const error = new AppError(code, message);
  const body = JSON.stringify(error.toBody());
  const head = [`HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? ''}`, 'Content-Type: application/json; charset=utf-8', `Content-Length: ${Buffer.byteLength(body)}`, 'Connection: close'];
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
}
