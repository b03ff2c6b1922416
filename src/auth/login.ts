import { timingSafeEqual } from 'node:crypto';
import { rateLimited } from '../errors.js';
import type { Clock } from '../http/context.js';
import type { UserRecord } from '../store/schema.js';
import { decoyHash, verifyPassword } from './password.js';
import { invalidCredentials, type UsersService } from './users.js';

export { LOCAL_LOGIN_HEADER } from '../daemon-info.js';

export interface LoginLimits {
  /** failures per (username, address) before any delay */
  freeFailures: number;
  /** the first delay, doubled on each further failure */
  baseDelayMs: number;
  /** the longest delay */
  maxDelayMs: number;
  /** failures are forgotten this long after the last one */
  forgetAfterMs: number;
}

export const DEFAULT_LOGIN_LIMITS: LoginLimits = { freeFailures: 5, baseDelayMs: 1000, maxDelayMs: 15 * 60_000, forgetAfterMs: 24 * 60 * 60_000 };
const MAX_TRACKED = 100_000;

/**
 * Password checks that slow a guesser without locking the owner out. Failures count per
 * (username, address): after `freeFailures` of them, each further failure blocks that pair for a
 * delay that doubles (1 s, 2 s, 4 s ... up to 15 minutes), and an attempt during the delay is a
 * 429 with Retry-After before the password is looked at. Another address, or another username,
 * is not affected. A login that proves it comes from the CLI on the daemon's own machine (a value
 * derived from the master key, which only the data dir's owner can reach) counts in a bucket of
 * its own, so a local process or web page guessing at 127.0.0.1 never locks the owner's CLI out.
 */
export class LoginService {
  private readonly failures = new Map<string, { count: number; blockedUntil: number; last: number }>();

  constructor(
    private readonly users: UsersService,
    private readonly clock: Clock,
    private readonly localProof: string | null = null,
    private readonly limits: LoginLimits = DEFAULT_LOGIN_LIMITS,
  ) {}

  /** Whether a login carries the local CLI's proof. */
  isLocalCli(proof: string | undefined): boolean {
    if (!this.localProof || !proof) return false;
    const a = Buffer.from(proof);
    const b = Buffer.from(this.localProof);
    return a.length === b.length && timingSafeEqual(a, b);
  }

  async authenticate(username: string, password: string, address: string, opts: { localCli?: boolean } = {}): Promise<UserRecord> {
    const key = `${username.toLowerCase()}\0${opts.localCli ? 'local-cli' : address}`;
    const now = this.clock();
    const entry = this.failures.get(key);
    if (entry && now - entry.last > this.limits.forgetAfterMs) this.failures.delete(key);
    else if (entry && entry.blockedUntil > now) throw rateLimited((entry.blockedUntil - now) / 1000);
    // Counted as a failure before the (slow) password check and cleared on success, so parallel
    // guesses cannot all slip in before the first of them is counted.
    this.fail(key, now);
    // The decoy is ready before any user is looked up: the first login costs the same either way.
    const decoy = await decoyHash();
    const user = await this.users.findByName(username);
    const ok = await verifyPassword(password, user?.password_hash ?? decoy);
    if (!user || !ok) throw invalidCredentials();
    this.failures.delete(key);
    return user;
  }

  private fail(key: string, now: number): void {
    const entry = this.failures.get(key) ?? { count: 0, blockedUntil: 0, last: now };
    entry.count++;
    entry.last = now;
    const over = entry.count - this.limits.freeFailures;
    if (over >= 0) entry.blockedUntil = now + Math.min(this.limits.maxDelayMs, this.limits.baseDelayMs * 2 ** Math.min(over, 30));
    this.failures.delete(key);
    this.failures.set(key, entry);
    if (this.failures.size > MAX_TRACKED) this.sweep(now);
  }

  /** Drops forgotten entries, then the least recently failed ones beyond the cap. */
  private sweep(now: number): void {
    for (const [k, e] of this.failures) if (now - e.last > this.limits.forgetAfterMs || (e.count < this.limits.freeFailures && now - e.last > 60 * 60_000)) this.failures.delete(k);
    for (const k of this.failures.keys()) {
      if (this.failures.size <= MAX_TRACKED * 0.9) break;
      this.failures.delete(k);
    }
  }
}
