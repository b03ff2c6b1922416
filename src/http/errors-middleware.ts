import type { Middleware } from 'koa';
import { AppError, internalError, invalidBody, payloadTooLarge } from '../errors.js';
import type { Logger } from '../log.js';
import type { AppState } from './context.js';

/** Maps errors thrown by Koa itself or its body parser (which carry `status`) into AppErrors. */
function toAppError(err: unknown, bodyLimit: number): AppError {
  if (err instanceof AppError) return err;
  const e = err as { status?: number; statusCode?: number; expose?: boolean; message?: string; type?: string };
  const status = e?.status ?? e?.statusCode;
  if (status === 413) return payloadTooLarge(bodyLimit);
  if (status === 415) return invalidBody('Unsupported content type; send application/json.');
  if (status === 404) return new AppError(404, 'not_found_error', 'not_found', 'Not found');
  if (status === 405) return new AppError(405, 'invalid_request_error', 'method_not_allowed', 'Method not allowed');
  if (status && status >= 400 && status < 500) {
    const parseFailure = e.type === 'entity.parse.failed' || /JSON/i.test(e.message ?? '');
    return invalidBody(parseFailure ? 'Request body is not valid JSON.' : 'Malformed request.');
  }
  return internalError(err);
}

/** The one error-handling middleware: every error leaves as CONTRACT §5's JSON shape. */
export function errorMiddleware(logger: Logger, bodyLimit: number): Middleware<AppState> {
  return async function handleErrors(ctx, next) {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) throw new AppError(404, 'not_found_error', 'not_found', 'Not found');
    } catch (err) {
      const appError = toAppError(err, bodyLimit);
      if (appError.status >= 500) {
        logger.error({ err: (err as Error)?.stack ?? String(err), requestId: ctx.state.requestId, path: ctx.path }, 'request failed');
      }
      ctx.status = appError.status;
      ctx.set(appError.headers);
      ctx.body = appError.toBody();
      // Whatever was partly read stays unread; closing keeps a half-sent oversize body from lingering.
      if (appError.status === 413) ctx.set('Connection', 'close');
    }
  };
}
