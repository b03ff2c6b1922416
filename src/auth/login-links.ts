import { createHash, randomBytes } from 'node:crypto';
import type { Clock } from '../http/context.js';

/** How long a link stays good: long enough to reach a browser, short enough to be worth nothing later. */
export const LOGIN_LINK_TTL_MS = 60_000;
/** Links waiting at once; minting more drops the oldest (each is good for a minute anyway). */
const MAX_WAITING = 100;

const hash = (token: string) => createHash('sha256').update(token).digest('base64url');

/**
 * One-time links that sign a browser in as the user who asked for one (`svc open`): the CLI is
 * logged in already, so the person should not type a password again to see the home page. A
 * link works once, within a minute; only its hash is kept, in memory (a restart ends them all).
 */
export class LoginLinks {
  private readonly waiting = new Map<string, { userId: string; expiresAt: number }>();

  constructor(private readonly clock: Clock) {}

  /** A new token for `userId`, and when it stops working. */
  mint(userId: string): { token: string; expiresAt: number } {
    const now = this.clock();
    for (const [key, link] of this.waiting) if (link.expiresAt <= now) this.waiting.delete(key);
    while (this.waiting.size >= MAX_WAITING) this.waiting.delete(this.waiting.keys().next().value!);
    const token = randomBytes(32).toString('base64url');
    const expiresAt = now + LOGIN_LINK_TTL_MS;
    this.waiting.set(hash(token), { userId, expiresAt });
    return { token, expiresAt };
  }

  /** The user a token signs in, once: it is spent whether or not it is still good. */
  redeem(token: string): string | null {
    if (token.length === 0 || token.length > 200) return null;
    const key = hash(token);
    const link = this.waiting.get(key);
    this.waiting.delete(key);
    if (!link || link.expiresAt <= this.clock()) return null;
    return link.userId;
  }
}
