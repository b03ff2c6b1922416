import type { Middleware } from 'koa';
import { AppError } from '../errors.js';
import { afterAnswer, type AppState } from '../http/context.js';
import { LocalGrantUsage } from '../store/grant-days.js';
import type { GrantUsageRepository } from '../store/repositories.js';
import { localDay } from './store.js';

const MINUTE_MS = 60_000;

/** Seconds from `now` to the next local midnight, when a day's token budget starts again. */
function secondsToMidnight(now: number): number {
  const next = new Date(now);
  next.setHours(24, 0, 0, 0);
  return Math.max(1, Math.ceil((next.getTime() - now) / 1000));
}

const budgetSpent = (budget: number, now: number) =>
  new AppError('grant_token_budget_exhausted', `This grant has used its ${budget} tokens for today; the person who approved it set that limit.`, {
    headers: { 'Retry-After': String(secondsToMidnight(now)) },
  });

/**
 * The limits a person set on a grant: calls a minute and upstream tokens a day. Beyond either, a
 * 429 with Retry-After in the endpoint's error shape; other grants are untouched. A minute is a
 * window of 60 s from the first call in it. A day is the daemon's local calendar day.
 *
 * A call that may spend tokens reserves them before it goes upstream (`ctx.state.tokenBudget`,
 * which the proxy calls once it has read the body): its input (estimated) and the output it
 * allows itself (`max_tokens`), or, naming no cap, the whole day's budget. It may start only while
 * what is spent and reserved is below the budget, and its reservation is settled with what it
 * spent when it ends. So calls started together are held to the budget as calls made one after
 * another are: the day ends over it by at most one call's reservation (a call naming no cap runs
 * alone, and ends over it by what it spent past what was left). A call that fails before it
 * reserves is only counted.
 *
 * The counts are `usage`'s: the data dir's (grant-days.json, apart from the bounded activity log,
 * so a flood of refused calls cannot push a spent day out of what a restart reads back), or on a
 * team server the shared store's, where every replica counts into the same window and day.
 */
export function enforceGrantLimits(clock: () => number, usage: GrantUsageRepository = LocalGrantUsage.inMemory(), onError: (err: Error) => void = () => undefined): Middleware<AppState> {
  return async function checkGrantLimits(ctx, next) {
    const grant = ctx.state.grant;
    const limits = grant?.record.limits;
    if (!grant || !limits) return next();
    const id = grant.record.id;
    const now = clock();
    const budget = limits.tokens_per_day;
    if (budget && (await usage.tokensOn(id, localDay(now))) >= budget) throw budgetSpent(budget, now);
    const perMinute = limits.requests_per_minute;
    if (perMinute) {
      const take = async (at: number) => {
        const { allowed, windowStart } = await usage.takeCall(id, at, MINUTE_MS, perMinute);
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
    if (!budget) return next();
    let held: { day: string; tokens: number } | null = null;
    ctx.state.tokenBudget = {
      async reserve(tokensIn, tokensOut) {
        const at = clock();
        const tokens = tokensOut === null ? Math.max(budget, tokensIn) : tokensIn + tokensOut;
        const day = localDay(at);
        if (!(await usage.reserveTokens(id, day, tokens, budget))) {
          if ((await usage.tokensOn(id, day)) >= budget) throw budgetSpent(budget, at);
          throw new AppError('grant_token_budget_exhausted', `Calls of this grant still running hold the rest of its ${budget} tokens for today; wait for one to finish.`, {
            headers: { 'Retry-After': '1' },
          });
        }
        held = { day, tokens };
      },
    };
    const count = () => {
      const note = ctx.state.activity;
      const spent = note ? (note.tokens_in ?? 0) + (note.tokens_out ?? 0) : 0;
      const day = localDay(clock());
      const settled = held && held.day === day ? usage.settleTokens(id, day, held.tokens, spent) : spent > 0 ? usage.addTokens(id, day, spent) : null;
      held = null;
      settled?.catch(onError);
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
