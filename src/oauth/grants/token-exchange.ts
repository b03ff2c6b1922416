import type { AccessRequestsService } from '../../access-requests/service.js';
import { ACCESS_REQUEST_SCOPE_PREFIX, type BearerVerifier } from '../../auth/bearer.js';
import type { OidcCtx, OidcErrors } from '../load.js';
import { resourceServerInfo, type TargetOf } from '../resource-indicators.js';
import { audienceIncludes } from '../resources.js';
import { inheritSignIn } from '../token-claims.js';
import { ACCESS_TOKEN_TTL_S, GRANT_CLAIM } from '../token-family.js';

/**
 * RFC 8693 token exchange: a token of the same user and client buys a token for another approved
 * grant. Registered with oidc-provider as `handler` over `parameters`.
 */

const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

/** The request parameters oidc-provider reads for this grant type. */
export const parameters = ['subject_token', 'subject_token_type', 'requested_token_type', 'scope', 'resource', 'audience', 'actor_token', 'actor_token_type'];

export interface TokenExchangeDeps {
  /** the origin of this daemon, and the resource a token names when it names none */
  base: string;
  audience: string;
  verifier: BearerVerifier;
  requests: AccessRequestsService;
  targetOf: TargetOf;
  errors: OidcErrors;
}

/** The grant's handler at the token endpoint, given what it needs. */
export function handler(deps: TokenExchangeDeps) {
  const { base, audience, requests, targetOf, errors } = deps;
  return async function tokenExchange(ctx: OidcCtx) {
    const { client, params } = ctx.oidc;
    const { grant: subject, signIn, expiresAt } = await subjectOf(deps, params);
    if (subject.clientId !== client.clientId) throw new errors.InvalidGrant('subject_token was issued to another client');
    // The new token reaches no further than the one given: the same resource unless it was the
    // whole of svc, and that same resource when none is named.
    const resource = params.resource ? String(params.resource) : (subject.audience ?? audience);
    const { canonical } = await targetOf(resource);
    if (subject.audience && !audienceIncludes(base, subject.audience, canonical)) {
      throw new errors.InvalidTarget(`subject_token is bound to ${subject.audience}; an exchanged token cannot reach further`);
    }
    const scopes = String(params.scope ?? '').split(' ').filter(Boolean);
    if (scopes.length !== 1 || !scopes[0].startsWith(ACCESS_REQUEST_SCOPE_PREFIX)) {
      throw new errors.InvalidScope('request exactly one scope_access_request:<id>');
    }
    if (!(await requests.approvedScopesFor(client.clientId, subject.user.id)).includes(scopes[0])) {
      throw new errors.InvalidScope('that access request is not approved for this client and user', scopes[0]);
    }
    const { Grant, AccessToken, ResourceServer } = ctx.oidc.provider;
    const grant = new Grant({ accountId: subject.user.id, clientId: client.clientId });
    grant.addResourceScope(resource, scopes[0]);
    const grantId = await grant.save();
    // The new token lives no longer than the one given, and belongs to its sign-in: whatever ends
    // that sign-in ends this token too, so exchanging cannot keep a token alive past either.
    const expiresIn = Math.min(ACCESS_TOKEN_TTL_S, expiresAt - Math.floor(Date.now() / 1000));
    if (expiresIn < 1) throw new errors.InvalidGrant('subject_token is about to expire');
    const at = new AccessToken({ accountId: subject.user.id, client, grantId, gty: 'token_exchange', scope: scopes[0], expiresIn });
    if (signIn) inheritSignIn(at, signIn);
    at.resourceServer = new ResourceServer(resource, resourceServerInfo(canonical, scopes));
    ctx.oidc.entity('AccessToken', at);
    const value = await at.save();
    ctx.body = { access_token: value, issued_token_type: ACCESS_TOKEN_TYPE, token_type: 'Bearer', expires_in: at.expiration, scope: at.scope };
  };
}

/**
 * The verified grant behind the subject token, once its token types are the ones svc issues; and
 * the sign-in it belongs to and when it expires (epoch seconds).
 */
async function subjectOf({ verifier, errors }: TokenExchangeDeps, params: Record<string, unknown>) {
  if (params.subject_token_type !== ACCESS_TOKEN_TYPE) throw new errors.InvalidRequest(`subject_token_type must be ${ACCESS_TOKEN_TYPE}`);
  if (params.requested_token_type && params.requested_token_type !== ACCESS_TOKEN_TYPE) {
    throw new errors.InvalidRequest(`requested_token_type must be ${ACCESS_TOKEN_TYPE}`);
  }
  const token = String(params.subject_token ?? '');
  try {
    const grant = await verifier.verify(token);
    // verify has checked the signature and claims, and keeps them: this reads them back
    const { payload, expMs } = await verifier.verifySignature(token);
    const signIn = typeof payload[GRANT_CLAIM] === 'string' ? payload[GRANT_CLAIM] : undefined;
    return { grant, signIn, expiresAt: Math.floor(expMs / 1000) };
  } catch {
    throw new errors.InvalidGrant('subject_token is not a valid access token of this server');
  }
}
