import type { Middleware } from 'koa';
import { AppError } from '../errors.js';
import { afterAnswer, type AppState } from '../http/context.js';
import type { GrantUsageRepository } from '../store/repositories.js';
import { type ActivityStore, localDay } from './store.js';

const MINUTE_MS = 60_000;

/** Seconds from `now` to the next local midnight, when a day's token budget starts again. */
function secondsToMidnight(now: number): number {
  const next = new Date(now);
  next.setHours(24, 0, 0, 0);
  return Math.max(1, Math.ceil((next.getTime() - now) / 1000));
}

/** Where a grant's calls and tokens are counted against its limits. */
interface UsageCounter {
  /** counts a call in the grant's minute window unless it is full; answers when the window started */
  takeCall(grantId: string, now: number, max: number): Promise<{ allowed: boolean; windowStart: number }>;
  tokensToday(grantId: string, now: number): Promise<number>;
  /** counts a call's upstream tokens, after it answered */
  addTokens(grantId: string, now: number, tokens: number): void;
}

/** One process's counts: minute windows in memory, tokens from its activity log. */
function localCounter(log: ActivityStore): UsageCounter {
  const windows = new Map<string, { start: number; calls: number }>();
  return {
    async takeCall(grantId, now, max) {
      let w = windows.get(grantId);
      if (!w || now - w.start >= MINUTE_MS) {
        if (windows.size > 10_000) for (const [k, v] of windows) if (now - v.start >= MINUTE_MS) windows.delete(k);
        w = { start: now, calls: 0 };
        windows.set(grantId, w);
      }
      if (w.calls >= max) return { allowed: false, windowStart: w.start };
      w.calls++;
      return { allowed: true, windowStart: w.start };
    },
    async tokensToday(grantId, now) {
      const totals = await log.grantTotals(grantId);
      return totals.day === localDay(now) ? totals.today_tokens : 0;
    },
    addTokens: () => undefined, // the activity log counts them as it records the call
  };
}

/** A team server's counts, in the shared store, so every replica holds a grant to one budget. */
function sharedCounter(usage: GrantUsageRepository, onError: (err: Error) => void): UsageCounter {
  return {
    takeCall: (grantId, now, max) => usage.takeCall(grantId, now, MINUTE_MS, max),
    tokensToday: (grantId, now) => usage.tokensOn(grantId, localDay(now)),
    addTokens(grantId, now, tokens) {
      if (tokens > 0) usage.addTokens(grantId, localDay(now), tokens).catch(onError);
    },
  };
}

/**
 * The limits a person set on a grant: calls a minute and upstream tokens a day. Beyond either, a
 * 429 with Retry-After in the endpoint's error shape; other grants are untouched. A minute is a
 * window of 60 s from the first call in it. A day is the daemon's local calendar day, and its
 * tokens are those the activity counted: a call that starts within the budget may end over it,
 * and the next one is refused. On one svc the counts live in this process; on a team server
 * (`usage` given) in the shared store, where every replica counts into the same window and day.
 */
export function enforceGrantLimits(log: ActivityStore, clock: () => number, usage?: GrantUsageRepository, onError: (err: Error) => void = () => undefined): Middleware<AppState> {
  const counter = usage ? sharedCounter(usage, onError) : localCounter(log);
  return async function checkGrantLimits(ctx, next) {
    const grant = ctx.state.grant;
    const limits = grant?.record.limits;
    if (!grant || !limits) return next();
    const now = clock();
    if (limits.tokens_per_day && (await counter.tokensToday(grant.record.id, now)) >= limits.tokens_per_day) {
      throw new AppError('grant_token_budget_exhausted', `This grant has used its ${limits.tokens_per_day} tokens for today; the person who approved it set that limit.`, {
        headers: { 'Retry-After': String(secondsToMidnight(now)) },
      });
    }
    const perMinute = limits.requests_per_minute;
    if (perMinute) {
      const take = async (at: number) => {
        const { allowed, windowStart } = await counter.takeCall(grant.record.id, at, perMinute);
        if (!allowed) {
          throw new AppError('grant_rate_limited', `This grant may make ${perMinute} calls a minute; the person who approved it set that limit.`, {
            headers: { 'Retry-After': String(Math.max(1, Math.ceil((windowStart + MINUTE_MS - at) / 1000))) },
          });
        }
      };
      await take(now);
      // a JSON-RPC batch's further messages, each a call of its own
      ctx.state.takeCalls = async (n) => {
        for (let i = 0; i < n; i++) await take(clock());
      };
    }
    const count = () => {
      const note = ctx.state.activity;
      if (limits.tokens_per_day && note) counter.addTokens(grant.record.id, clock(), (note.tokens_in ?? 0) + (note.tokens_out ?? 0));
    };
    try {
      await next();
    } catch (err) {
      count();
      throw err;
    }
    afterAnswer(ctx, count);
  };
}
