import type { Middleware } from 'koa';
import { AppError } from '../errors.js';
import type { AppState } from '../http/context.js';
import { type ActivityLog, localDay } from './log.js';

const MINUTE_MS = 60_000;

/** Seconds from `now` to the next local midnight, when a day's token budget starts again. */
function secondsToMidnight(now: number): number {
  const next = new Date(now);
  next.setHours(24, 0, 0, 0);
  return Math.max(1, Math.ceil((next.getTime() - now) / 1000));
}

/**
 * The limits a person set on a grant: calls a minute and upstream tokens a day. Beyond either, a
 * 429 with Retry-After in the endpoint's error shape; other grants are untouched. A minute is a
 * window of 60 s from the first call in it. A day is the daemon's local calendar day, and its
 * tokens are those the activity counted: a call that starts within the budget may end over it,
 * and the next one is refused. The minute counts live in memory, per process.
 */
export function enforceGrantLimits(log: ActivityLog, clock: () => number): Middleware<AppState> {
  const windows = new Map<string, { start: number; calls: number }>();
  return async function checkGrantLimits(ctx, next) {
    const grant = ctx.state.grant;
    const limits = grant?.record.limits;
    if (!grant || !limits) return next();
    const now = clock();
    if (limits.tokens_per_day) {
      const totals = log.totalsFor(grant.record.id);
      if (totals.day === localDay(now) && totals.today_tokens >= limits.tokens_per_day) {
        throw new AppError('grant_token_budget_exhausted', `This grant has used its ${limits.tokens_per_day} tokens for today; the person who approved it set that limit.`, {
          headers: { 'Retry-After': String(secondsToMidnight(now)) },
        });
      }
    }
    if (limits.requests_per_minute) {
      let w = windows.get(grant.record.id);
      if (!w || now - w.start >= MINUTE_MS) {
        if (windows.size > 10_000) for (const [k, v] of windows) if (now - v.start >= MINUTE_MS) windows.delete(k);
        w = { start: now, calls: 0 };
        windows.set(grant.record.id, w);
      }
      if (w.calls >= limits.requests_per_minute) {
        throw new AppError('grant_rate_limited', `This grant may make ${limits.requests_per_minute} calls a minute; the person who approved it set that limit.`, {
          headers: { 'Retry-After': String(Math.max(1, Math.ceil((w.start + MINUTE_MS - now) / 1000))) },
        });
      }
      w.calls++;
    }
    return next();
  };
}
