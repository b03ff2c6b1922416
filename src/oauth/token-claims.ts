import { ACCESS_REQUEST_SCOPE_PREFIX } from '../auth/bearer.js';
import { type AppRole, appRoles } from '../store/vocabulary.js';
import type { OidcCtx, OidcModel } from './load.js';
import { GRANT_CLAIM, grantClaim } from './token-family.js';

/** What a token carries besides oidc-provider's own claims: its grant, and the access request it stands on. */

export const isAccessRequestScope = (s: string) => s.startsWith(ACCESS_REQUEST_SCOPE_PREFIX);

/**
 * Tokens made by token exchange, and the sign-in (GRANT_CLAIM) of the token each was exchanged
 * from: such a token belongs to that sign-in, so whatever ends it (a replayed or revoked refresh
 * token) ends the exchanged token too, and an exchange of it stays in the same sign-in.
 */
const exchangedFrom = new WeakMap<object, string>();

/** Marks `token` (an AccessToken not yet saved) as belonging to the sign-in `claim` names. */
export function inheritSignIn(token: object, claim: string): void {
  exchangedFrom.set(token, claim);
}

/**
 * The one access-request scope a grant holds for a resource. Every authorization makes a grant of
 * its own (see loadExistingGrant), so a grant names exactly one; one that names two is refused
 * rather than guessed at.
 */
export function grantedRequestScope(grant: OidcModel, resource: string): string | undefined {
  const named = new Set(
    String(grant?.getResourceScope?.(resource) ?? '')
      .split(' ')
      .filter(isAccessRequestScope),
  );
  return named.size === 1 ? [...named][0] : undefined;
}

/** The role the person approved for access request `id` (undefined: none, or not approved). */
export type ApprovedRoleOf = (id: string) => Promise<AppRole | undefined>;

const isRoleScope = (s: string) => (appRoles as readonly string[]).includes(s);

/**
 * Adds svc's claims to a JWT access token: the grant it belongs to (hashed), and the access request
 * it stands on. A standard client asks for a role, but the token must name the access request it
 * stands on (decisions: Tokens): that scope is in the grant, set when the person approved. The role
 * it names is the one the person approved, not the one asked for: a person who narrows Power user
 * to User gets a token that says User (svc reads the role from the grant itself either way, but a
 * token is read by others too, and must not claim more than was approved).
 */
export async function customizeJwt(ctx: OidcCtx, token: OidcModel, jwt: { payload: Record<string, unknown> }, approvedRoleOf: ApprovedRoleOf): Promise<void> {
  const inherited = exchangedFrom.get(token);
  if (inherited) jwt.payload[GRANT_CLAIM] = inherited;
  else if (token.grantId) jwt.payload[GRANT_CLAIM] = grantClaim(token.grantId);
  let scopes = String(jwt.payload.scope ?? '').split(' ').filter(Boolean);
  if (!scopes.some(isAccessRequestScope) && token.grantId && token.resourceServer) {
    const grant = ctx?.oidc?.entities?.Grant ?? (await ctx.oidc.provider.Grant.find(token.grantId));
    const scope = grantedRequestScope(grant, token.resourceServer.identifier());
    if (scope) scopes = [...scopes, scope];
  }
  const request = scopes.find(isAccessRequestScope);
  if (request && scopes.some(isRoleScope)) {
    const role = await approvedRoleOf(request.slice(ACCESS_REQUEST_SCOPE_PREFIX.length));
    scopes = [...scopes.filter((s) => !isRoleScope(s)), ...(role ? [role] : [])];
  }
  jwt.payload.scope = scopes.join(' ');
  // the token endpoint's answer says the same scope as the token (oidc-provider reads it from the
  // token once it is made)
  if (typeof token.scope === 'string') token.scope = jwt.payload.scope;
}

/** oidc-provider's `formats` configuration: JWT access tokens with svc's claims. */
export const tokenFormats = (approvedRoleOf: ApprovedRoleOf) => ({
  customizers: { jwt: (ctx: OidcCtx, token: OidcModel, jwt: { payload: Record<string, unknown> }) => customizeJwt(ctx, token, jwt, approvedRoleOf) },
});
