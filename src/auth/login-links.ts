import { createHash, randomBytes } from 'node:crypto';
import type { Clock } from '../http/context.js';
import { SEALED_PREFIX, type SecretBox } from '../store/crypto.js';
import type { Repositories } from '../store/repositories.js';
import { SEAL_KINDS } from '../store/seal-kinds.js';

/** How long a link stays good: long enough to reach a browser, short enough to be worth nothing later. */
export const LOGIN_LINK_TTL_MS = 60_000;
/** The oauthState rows that mark a link used, until it would have expired anyway (then swept). */
const SPENT_MODEL = 'LoginLinkSpent';
/** A sealed token is about 130 characters; anything much longer is not one. */
const MAX_TOKEN_LENGTH = 400;
const SEAL_ID = 'login_link';

interface LinkClaims {
  /** the user it signs in */
  u: string;
  /** when it stops working (ms) */
  e: number;
  /** what makes it one of a kind, and marks it used */
  n: string;
  /** the session that made it (the hash its record is stored under): the link lives no longer than it */
  s: string;
}

const hash = (value: string) => createHash('sha256').update(value).digest('base64url');

/**
 * One-time links that sign a browser in as the user who asked for one (`svc open`): the CLI is
 * logged in already, so the person should not type a password again to see the home page. A link
 * works once, within a minute.
 *
 * The token carries its user and expiry, sealed with the master key, so nothing is stored when one
 * is made and any replica of a team server opens it (the CLI asks its own replica; the browser may
 * reach another through the balancer). Its first use is stored (under a hash of its nonce, in one
 * transaction that finds none before it), so of two uses on any replicas exactly one signs in; that
 * mark expires with the link and the OAuth sweep removes it.
 *
 * The mark is taken back when the answer that signs the browser in was never written (its
 * connection was gone first): a link is spent by a browser that got its session, not by one that
 * asked and left.
 *
 * A link is good only while the session that made it is: a logout, a password change or the
 * removal of the user (each ends that session) ends its links too, so whoever held the session
 * cannot keep a way back in by minting links before it ends.
 */
export class LoginLinks {
  constructor(
    private readonly box: SecretBox,
    private readonly repos: Repositories,
    private readonly clock: Clock,
  ) {}

  /** A new token for `userId`, made by the session stored under `sessionIdHash`, and when it stops working. */
  mint(userId: string, sessionIdHash: string): { token: string; expiresAt: number } {
    const expiresAt = this.clock() + LOGIN_LINK_TTL_MS;
    const claims: LinkClaims = { u: userId, e: expiresAt, n: randomBytes(16).toString('base64url'), s: sessionIdHash };
    // the sealed value without its fixed prefix: a token of base64url and dots, whole in a URL
    return { token: this.box.seal(SEAL_KINDS.loginLink, SEAL_ID, JSON.stringify(claims)).slice(SEALED_PREFIX.length), expiresAt };
  }

  /**
   * The user a token signs in, once: null for a token that is not one, expired, used already, or
   * whose session ended. The mark it leaves is taken back with `unspend`, for an answer that never
   * reached the browser: a link is used up only by the answer that signs someone in.
   */
  async redeem(token: string): Promise<{ userId: string; unspend: () => Promise<void> } | null> {
    const claims = token.length > 0 && token.length <= MAX_TOKEN_LENGTH ? this.opened(token) : null;
    const now = this.clock();
    if (!claims || claims.e <= now) return null;
    const maker = await this.repos.sessions.get(claims.s);
    if (!maker || maker.user_id !== claims.u || maker.expires_at <= now) return null;
    const mark = { model: SPENT_MODEL, id: hash(claims.n), payload: '', grant_id: null, expires_at: claims.e, created_at: now };
    const key = `${mark.model}:${mark.id}`;
    const first = await this.repos.transaction(async (r) => {
      if (await r.oauthState.get(key)) return false;
      await r.oauthState.put(mark);
      return true;
    });
    return first ? { userId: claims.u, unspend: async () => void (await this.repos.oauthState.delete(key)) } : null;
  }

  private opened(token: string): LinkClaims | null {
    try {
      const claims = JSON.parse(this.box.open(SEAL_KINDS.loginLink, SEAL_ID, SEALED_PREFIX + token)) as Partial<LinkClaims>;
      return typeof claims.u === 'string' && typeof claims.e === 'number' && typeof claims.n === 'string' && typeof claims.s === 'string' ? (claims as LinkClaims) : null;
    } catch {
      return null;
    }
  }
}
