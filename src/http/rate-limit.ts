import { rateLimited } from '../errors.js';
import type { Clock } from './context.js';

/**
 * Fixed-window counters kept in memory. A limit of 0 turns the limiter off. The map is swept as
 * windows pass, so a flood of distinct keys cannot grow it without bound.
 */
export class RateLimiter {
  private windows = new Map<string, { count: number; resetAt: number }>();
  private nextSweep = 0;

  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly clock: Clock,
  ) {}

  /** Counts one hit for `key`; throws 429 with Retry-After when over the limit. */
  hit(key: string): void {
    if (this.limit <= 0) return;
    const now = this.clock();
    this.sweep(now);
    let w = this.windows.get(key);
    if (!w || w.resetAt <= now) {
      w = { count: 0, resetAt: now + this.windowMs };
      this.windows.set(key, w);
    }
    w.count++;
    if (w.count > this.limit) throw rateLimited((w.resetAt - now) / 1000);
  }

  /** Throws 429 if `key` is already over the limit, without counting a hit. */
  check(key: string): void {
    if (this.limit <= 0) return;
    const now = this.clock();
    const w = this.windows.get(key);
    if (w && w.resetAt > now && w.count >= this.limit) throw rateLimited((w.resetAt - now) / 1000);
  }

  reset(key: string): void {
    this.windows.delete(key);
  }

  private sweep(now: number): void {
    if (now < this.nextSweep) return;
    this.nextSweep = now + this.windowMs;
    for (const [key, w] of this.windows) if (w.resetAt <= now) this.windows.delete(key);
  }
}
