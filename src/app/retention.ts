import type { AppDeps } from '../http/context.js';
import { localDay } from '../activity/store.js';
import { sweepOAuthState } from '../oauth/adapter.js';
import type { Services } from './services.js';

/**
 * Retention, so the store holds the present and not all of history: a sweep now, then hourly.
 * Answers once the first sweep is done, with how to stop the hourly one.
 */
export async function startRetention(deps: AppDeps, { requests, clients, activity }: Services): Promise<() => void> {
  const { config } = deps;
  const retention: [string, () => Promise<number>][] = [
    ['finished and revoked access requests', () => requests.sweep(config.requestRetentionDays, config.revokedRetentionDays)],
    ['unused self-registered OAuth clients', () => clients.sweepDynamic(config.dynamicClientRetentionDays)],
    ['dead refresh tokens and grants', () => sweepOAuthState(deps.repos, deps.clock(), 10 * 60 * 1000)],
    ['activity events past their bounds', () => activity.dropOld()],
  ];
  // a team's per-grant counts: one row per grant that has limits, gone once it says nothing
  const usage = deps.repos.grantUsage;
  if (usage) retention.push(['idle per-grant usage counts', () => usage.forgetIdle(deps.clock() - 60_000, localDay(deps.clock()))]);
  const sweep = async () => {
    for (const [what, run] of retention) {
      await run().then(
        (n) => n && deps.logger.info({ removed: n }, `retention: removed ${what}`),
        (err: Error) => deps.logger.warn({ err: err.message }, `retention: could not remove ${what}`),
      );
    }
  };
  const sweeping = setInterval(sweep, 60 * 60 * 1000);
  sweeping.unref();
  await sweep();
  return () => clearInterval(sweeping);
}
