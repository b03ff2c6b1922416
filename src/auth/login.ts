import { timingSafeEqual } from 'node:crypto';
import { rateLimited } from '../errors.js';
import type { Clock } from '../http/context.js';
import type { LoginFailureEntry, LoginFailureRepository } from '../store/repositories.js';
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
 * One login attempt against its entry, at `now`: refused while blocked (the entry unchanged), else
 * counted as a failure before the password is looked at (a success clears it), so parallel guesses
 * cannot all slip in before the first is counted. An entry quiet for `forgetAfterMs` starts over.
 */
export function loginAttempt(entry: LoginFailureEntry | undefined, now: number, limits: LoginLimits): { next: LoginFailureEntry; blockedUntil: number | null } {
  const live = entry && now - entry.last <= limits.forgetAfterMs ? entry : undefined;
  if (live && live.blockedUntil > now) return { next: live, blockedUntil: live.blockedUntil };
  const count = (live?.count ?? 0) + 1;
  const over = count - limits.freeFailures;
  const blockedUntil = over >= 0 ? now + Math.min(limits.maxDelayMs, limits.baseDelayMs * 2 ** Math.min(over, 30)) : (live?.blockedUntil ?? 0);
  return { next: { count, blockedUntil, last: now }, blockedUntil: null };
}

/**
 * Password checks that slow a guesser without locking the owner out. Failures count per
 * (username, address): after `freeFailures` of them, each further failure blocks that pair for a
 * delay that doubles (1 s, 2 s, 4 s ... up to 15 minutes), and an attempt during the delay is a
 * 429 with Retry-After before the password is looked at. Another address, or another username,
 * is not affected. A login that proves it comes from the CLI on the daemon's own machine (a value
 * derived from the master key, which only the data dir's owner can reach) counts in a bucket of
 * its own, so a local process or web page guessing at 127.0.0.1 never locks the owner's CLI out.
 * Failures are counted in memory, or, given `shared` (a team server), where every replica counts.
 */
export class LoginService {
  private readonly failures = new Map<string, { count: number; blockedUntil: number; last: number }>();

  constructor(
    private readonly users: UsersService,
    private readonly clock: Clock,
    private readonly localProof: string | null = null,
    private readonly limits: LoginLimits = DEFAULT_LOGIN_LIMITS,
    private readonly shared?: LoginFailureRepository,
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
    const blockedUntil = await this.begin(key, now);
    if (blockedUntil !== null) throw rateLimited((blockedUntil - now) / 1000);
    // The decoy is ready before any user is looked up: the first login costs the same either way.
    const decoy = await decoyHash();
    const user = await this.users.findByName(username);
    const ok = await verifyPassword(password, user?.password_hash ?? decoy);
    if (!user || !ok) throw invalidCredentials();
    await this.clear(key);
    return user;
  }

  /** The attempt counted (loginAttempt); answers until when the pair is blocked, or null. */
  private async begin(key: string, now: number): Promise<number | null> {
    const forgetBefore = now - this.limits.forgetAfterMs;
    if (this.shared) {
      return this.shared.modify(key, forgetBefore, (entry) => {
        const attempt = loginAttempt(entry, now, this.limits);
        return { next: attempt.next, result: attempt.blockedUntil };
      });
    }
    const attempt = loginAttempt(this.failures.get(key), now, this.limits);
    if (attempt.blockedUntil !== null) return attempt.blockedUntil;
    // most recently failed last, so the sweep drops the least recent first
    this.failures.delete(key);
    this.failures.set(key, attempt.next);
    if (this.failures.size > MAX_TRACKED) this.sweep(now);
    return null;
  }

  private async clear(key: string): Promise<void> {
    if (this.shared) await this.shared.modify(key, this.clock() - this.limits.forgetAfterMs, () => ({ next: undefined, result: undefined }));
    else this.failures.delete(key);
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
