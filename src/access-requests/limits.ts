import type { Middleware } from 'koa';
import type { AppDeps, AppState } from '../http/context.js';
import { RateLimiter } from '../http/rate-limit.js';

const MINUTE = 60_000;

/** Per-client and per-address limits for the endpoints that need no credential (decisions: Access requests). */
export function unauthenticatedLimit(deps: AppDeps, clientIdOf: (ctx: Parameters<Middleware<AppState>>[0]) => unknown): Middleware<AppState> {
  const perClient = new RateLimiter(deps.config.rateLimitClient, MINUTE, deps.clock);
  const perAddress = new RateLimiter(deps.config.rateLimitAddress, MINUTE, deps.clock);
  return async function rateLimitUnauthenticated(ctx, next) {
    perAddress.hit(ctx.ip);
    const clientId = clientIdOf(ctx);
    if (typeof clientId === 'string' && clientId.length > 0 && clientId.length <= 255) perClient.hit(clientId);
    await next();
  };
}

/**
 * Polls: every local app shares 127.0.0.1, so a per-address cap would let one app's polls starve
 * every other's, and a client id is public, so a per-client cap could be spent by anyone. A poll
 * is limited per (address, request id) instead, which only the app that made the request can
 * spend. Polls that find nothing (guessed or stale ids) count against the per-address limit, so
 * guessing stays bounded without touching the budget of good polls.
 */
export function pollLimit(deps: AppDeps): Middleware<AppState> {
  const perRequest = new RateLimiter(deps.config.rateLimitPoll, MINUTE, deps.clock);
  const missesPerAddress = new RateLimiter(deps.config.rateLimitAddress, MINUTE, deps.clock);
  return async function rateLimitPoll(ctx, next) {
    const key = `${ctx.ip} ${String(ctx.params.id ?? '').slice(0, 100)}`;
    perRequest.check(key);
    try {
      await next();
    } catch (err) {
      if ((err as { status?: number }).status === 404) missesPerAddress.hit(ctx.ip);
      throw err;
    }
    // counted only for requests that exist, so the table holds no more keys than real requests
    perRequest.hit(key);
  };
}
