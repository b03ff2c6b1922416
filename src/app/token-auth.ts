import type { Middleware } from 'koa';
import { enforceGrantLimits } from '../activity/limits.js';
import { recordActivity } from '../activity/recorder.js';
import { BearerVerifier, EXTERNAL_ALGORITHMS, localKeys, remoteKeysFromDiscovery, requireBearer } from '../auth/bearer.js';
import { metadataUrlFor, PROTECTED_RESOURCE_PATH } from '../auth/protected-resource.js';
import type { AppDeps, AppState } from '../http/context.js';
import { limitPerGrant } from '../http/grant-limits.js';
import { ApiKeyVerifier } from '../keys/service.js';
import { loadSigningKeys } from '../oauth/keys.js';
import { type AuthorizationServer, lazyAuthorizationServer, OAUTH_PREFIX } from '../oauth/provider.js';
import { signInPages } from '../ui/sign-in.js';
import type { Services } from './services.js';

/** Who issues the tokens apps bring, and how this daemon checks them. */
export interface TokenAuth {
  verifier: BearerVerifier;
  /** the embedded OAuth server; null when an external issuer (--issuer) signs the tokens */
  authorizationServer: AuthorizationServer | null;
  /** the issuer whose tokens this daemon accepts: its own `<base>/oauth`, or --issuer */
  issuer: string;
  /** where a host finds the protected-resource document of a path */
  metadataUrl: (path?: string) => string;
}

/** The external issuer's verifier, or the embedded OAuth server and a verifier of its own keys. */
export async function createTokenAuth(deps: AppDeps, services: Services, sessionKeys: string[]): Promise<TokenAuth> {
  const { config } = deps;
  // An external issuer's tokens carry its one audience, so only the embedded issuer points hosts
  // at the per-resource documents.
  const metadataUrl = (path = '/') => (config.issuer ? `${deps.baseUrl()}${PROTECTED_RESOURCE_PATH}` : metadataUrlFor(deps.baseUrl(), path));
  if (config.issuer) {
    const verifier = new BearerVerifier(
      { issuer: config.issuer, audience: config.audience ?? deps.baseUrl(), allowJwtTyp: config.allowJwtTyp, algorithms: EXTERNAL_ALGORITHMS, keys: remoteKeysFromDiscovery(config.issuer, (message) => deps.logger.warn({ issuer: config.issuer }, `cannot get the issuer's signing keys: ${message}`)) },
      deps.repos,
      deps.clock,
      metadataUrl,
    );
    return { verifier, authorizationServer: null, issuer: config.issuer, metadataUrl };
  }
  const keys = await loadSigningKeys(deps.repos, deps.box);
  const verifier = new BearerVerifier(
    // only the access-token key: the RS256 ID-token key of the same issuer signs no access token
    { issuer: `${deps.baseUrl()}${OAUTH_PREFIX}`, audience: deps.baseUrl(), allowJwtTyp: false, algorithms: ['ES256'], keys: localKeys(keys.publicKeys), resourceBound: true },
    deps.repos,
    deps.clock,
    metadataUrl,
  );
  const { clients, requests, instances } = services;
  const authorizationServer = lazyAuthorizationServer(deps, { clients, requests, instances, cookieKeys: sessionKeys, verifier, pages: signInPages });
  return { verifier, authorizationServer, issuer: authorizationServer.issuer, metadataUrl };
}

/**
 * The middleware every Bearer call passes. Outermost the activity, which sees every refusal; then
 * who the caller is, the person's limits on the grant, and the concurrency every grant gets.
 */
export function bearerChain(deps: AppDeps, auth: TokenAuth, services: Services): Middleware<AppState> {
  const { config } = deps;
  const authenticateBearer = requireBearer(auth.verifier, auth.metadataUrl, new ApiKeyVerifier(deps.repos, deps.clock, auth.metadataUrl));
  const perGrant = limitPerGrant({ calls: config.grantConcurrency, streams: config.grantStreams });
  const record = recordActivity(services.activity, deps.repos, deps.clock);
  const grantLimits = enforceGrantLimits(deps.clock, deps.repos.grantUsage, (err) => deps.logger.warn({ err: err.message }, "could not count a grant's tokens"));
  const checked: Middleware<AppState> = (ctx, next) => authenticateBearer(ctx, () => grantLimits(ctx, () => perGrant(ctx, next)));
  return config.activity ? (ctx, next) => record(ctx, () => checked(ctx, next)) : checked;
}
