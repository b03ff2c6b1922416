import type { Middleware } from 'koa';
import { QUIET_HEADER } from '../daemon-info.js';
import { afterAnswer, type AppState, type ErrorShape } from '../http/context.js';
import type { Logger } from '../log.js';

/**
 * Gives each request a cheap id unique to this process (no randomness on the hot path), its
 * path's error shape, and logs a line when it is answered.
 */
export function tagAndLogRequests(logger: Logger, errorShapes: ErrorShape[] = []): Middleware<AppState> {
  const idPrefix = `${process.pid.toString(36)}-${Date.now().toString(36)}-`;
  let requestCount = 0;
  return async function tagRequest(ctx, next) {
    ctx.state.requestId = idPrefix + (++requestCount).toString(36);
    // OpenAI answers carry it and its clients read it (`request_id`), so a person can match an
    // app's report to svc's log line; the proxies' own writeHead keeps it (Node merges the two).
    ctx.set('X-Request-Id', ctx.state.requestId);
    for (const shape of errorShapes) shape(ctx);
    const started = performance.now();
    // A line per request, naming the app, its grant and the model or tool (never content). The
    // review surfaces' own polling says so (QUIET_HEADER) and stays at debug. The line's fields are
    // gathered only when it is written (a daemon at warn writes none); a stream's, once it ends.
    const log = () => {
      // below info nothing is written either way (debug is the lower level): no header read
      if (logger.isLevelEnabled?.('info') === false) return;
      const level = ctx.get(QUIET_HEADER) ? 'debug' : 'info';
      if (logger.isLevelEnabled?.(level) !== false) logRequest(logger, level, ctx, started);
    };
    try {
      await next();
    } catch (err) {
      log();
      throw err;
    }
    afterAnswer(ctx, log);
  };
}

/** The request's log line: the app, its grant and the model or tool (never content). */
function logRequest(logger: Logger, level: 'debug' | 'info', ctx: Parameters<Middleware<AppState>>[0], started: number): void {
  const grant = ctx.state.grant;
  const note = ctx.state.activity;
  const status = ctx.respond === false ? ctx.res.statusCode : ctx.status;
  logger[level](
    {
      requestId: ctx.state.requestId,
      method: ctx.method,
      path: ctx.path,
      status,
      ms: Math.round(performance.now() - started),
      ...(grant ? { app: grant.clientId, grant: grant.record.id.slice(0, 8) } : {}),
      ...(note?.model ? { model: note.model } : {}),
      ...(note?.tool ? { tool: note.tool } : {}),
    },
    'request',
  );
}
