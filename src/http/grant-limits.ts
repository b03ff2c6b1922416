import type { Middleware } from 'koa';
import { AppError } from '../errors.js';
import { afterAnswer, type AppState } from './context.js';

export interface GrantLimits {
  /** upstream calls one grant may have in flight at once; 0 = no limit */
  calls: number;
  /** MCP GET streams one grant may hold open at once; 0 = no limit */
  streams: number;
}

/**
 * Every grant shares the upstream connection pools with every other, so one app could hold them
 * all (hundreds of slow chats or open MCP streams) and make another person's app wait. Each grant
 * gets at most `calls` requests in flight and `streams` open MCP GET streams; beyond that, 429
 * with Retry-After, and the other grants are untouched. Counts live in memory, per process.
 */
export function limitPerGrant(limits: GrantLimits): Middleware<AppState> {
  const inFlight = new Map<string, { calls: number; streams: number }>();
  return async function limitGrant(ctx, next) {
    const grant = ctx.state.grant;
    // the route the router matched says what the request is, not how its path is spelt
    const kind = ctx.state.stream ? 'streams' : 'calls';
    const limit = limits[kind];
    if (!grant || limit <= 0) return next();
    const key = grant.record.id;
    const count = inFlight.get(key) ?? { calls: 0, streams: 0 };
    if (count[kind] >= limit) {
      throw new AppError('rate_limited', kind === 'streams'
          ? `This grant already holds ${limit} open MCP streams; close one first.`
          : `This grant already has ${limit} calls in flight; wait for one to finish.`,
        { headers: { 'Retry-After': '1' } },
      );
    }
    count[kind]++;
    inFlight.set(key, count);
    const release = () => {
      count[kind]--;
      if (count.calls === 0 && count.streams === 0) inFlight.delete(key);
    };
    try {
      await next();
    } catch (err) {
      release();
      throw err;
    }
    // the slot is held until the answer is over: a stream's, until the stream ends
    afterAnswer(ctx, release);
  };
}
