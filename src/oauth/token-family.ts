import { createHash } from 'node:crypto';
import { ENDED_GRANT_MODEL as ENDED_GRANT, type OAuthStateRecord } from '../store/records.js';
import type { Repositories } from '../store/repositories.js';

/**
 * What ends a token family before its time. Access tokens are JWTs stored nowhere, so they cannot
 * be deleted: a grant that ends (its refresh token replayed, or revoked) is remembered instead, for
 * as long as one of its access tokens could still be valid, and the Bearer check asks.
 */

/** How long an access token lives: short, since a JWT cannot be called back once issued. */
export const ACCESS_TOKEN_TTL_S = 10 * 60;

/** The private claim of an access token that names its grant (hashed, as the store keys grants). */
export const GRANT_CLAIM = 'svc_grant';

/** How the store keys an OAuth artifact: a hash of its model and id, so no row holds a usable id. */
export const hashId = (model: string, id: string) => createHash('sha256').update(`${model}\0${id}`).digest('base64url');

export const rowKey = (r: { model: string; id: string }) => `${r.model}:${r.id}`;

/** The value of GRANT_CLAIM for a grant id. */
export const grantClaim = (grantId: string) => hashId('Grant', grantId);

/** Marks a grant ended until its last access token has expired (lifetime plus the verifier's leeway). */
export async function markGrantEnded(repos: Repositories, grantId: string, now: number): Promise<void> {
  const id = grantClaim(grantId);
  await repos.oauthState.put({ model: ENDED_GRANT, id, payload: '', grant_id: null, expires_at: now + ACCESS_TOKEN_TTL_S * 1000 + 60_000, created_at: now });
}

/** The oauthState key under which the end of the grant a token's GRANT_CLAIM names is marked. */
export const endedGrantKey = (claim: string) => rowKey({ model: ENDED_GRANT, id: claim });

/** Whether an ended-grant mark (read under endedGrantKey) still holds. */
export const endedMarkHolds = (row: OAuthStateRecord | undefined, now: number) => row !== undefined && (row.expires_at === null || row.expires_at > now);

/** Whether the grant a token's GRANT_CLAIM names has ended. */
export async function grantEnded(repos: Repositories, claim: string, now: number): Promise<boolean> {
  return endedMarkHolds(await repos.oauthState.get(endedGrantKey(claim)), now);
}
