import { createLocalJWKSet, createRemoteJWKSet, errors as joseErrors, type JWK, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import type { Middleware } from 'koa';
import { AppError } from '../errors.js';
import type { AppState, BearerGrant, Clock } from '../http/context.js';
import type { AppRole } from '../store/schema.js';
import type { Repositories } from '../store/repositories.js';
import { type ResourceTarget, resourceTarget, targetCovers } from '../oauth/resources.js';
import { endedGrantKey, endedMarkHolds, GRANT_CLAIM, grantEnded } from '../oauth/token-family.js';
import { appRoleAtMost, atLeast, lowerAppRole, maxGrantableRole } from './roles.js';

export const ACCESS_REQUEST_SCOPE_PREFIX = 'scope_access_request:';
/** What an external issuer may sign with; the embedded one signs access tokens with ES256 only. */
export const EXTERNAL_ALGORITHMS = ['ES256', 'ES384', 'RS256', 'PS256', 'EdDSA'];
const CLOCK_TOLERANCE_S = 5;
const CACHE_LIMIT = 10_000;

/** What a verified Bearer credential stands on; defined with the request state it lives in. */
export type { BearerGrant } from '../http/context.js';

export interface VerifierOptions {
  issuer: string;
  audience: string;
  /** accept `typ: JWT` as well as RFC 9068's `at+jwt` (some external issuers) */
  allowJwtTyp: boolean;
  algorithms: string[];
  keys: JWTVerifyGetKey;
  /**
   * The embedded issuer binds each token to one resource of this daemon (`audience` is then the
   * base URL, and `<base>/v1` or an MCP proxy URL are accepted too, each only on its own paths).
   */
  resourceBound?: boolean;
}

/**
 * Keys from the JWKS document that the issuer's discovery document names, looked up on first use
 * (the issuer may start after svc) and again after a failure; jose refetches the JWKS on an
 * unknown kid, at most every 30 s.
 */
export function remoteKeysFromDiscovery(issuer: string, onIssuerError?: (message: string) => void): JWTVerifyGetKey {
  let keys: Promise<JWTVerifyGetKey> | null = null;
  const discover = async (): Promise<JWTVerifyGetKey> => {
    const res = await fetch(`${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`, { signal: AbortSignal.timeout(10_000) });
    if (!res.ok) throw new Error(`discovery document of ${issuer} answered ${res.status}`);
    const doc = (await res.json()) as { issuer?: string; jwks_uri?: string };
    if (doc.issuer !== issuer) throw new Error(`discovery document names issuer ${doc.issuer}, not ${issuer}`);
    if (!doc.jwks_uri) throw new Error(`discovery document of ${issuer} has no jwks_uri`);
    return createRemoteJWKSet(new URL(doc.jwks_uri), { cooldownDuration: 30_000, cacheMaxAge: 10 * 60_000 });
  };
  return async (header, token) => {
    keys ??= discover().catch((err) => {
      keys = null;
      throw err;
    });
    try {
      return await (await keys)(header, token);
    } catch (err) {
      // An unreachable or misconfigured issuer is the operator's to know (the app gets a 503);
      // an unknown kid is the token's problem, not the issuer's.
      if (!(err instanceof joseErrors.JWKSNoMatchingKey)) onIssuerError?.(err instanceof Error ? err.message : String(err));
      throw err;
    }
  };
}

export const localKeys = (publicKeys: JWK[]): JWTVerifyGetKey => createLocalJWKSet({ keys: publicKeys });

/**
 * A 401 with the RFC 6750 challenge: `error="invalid_token"` only when a credential was sent
 * (§3.1), the metadata of the very resource asked for, and the role a client should ask for.
 */
export const invalidToken = (message: string, metadataUrl: string, credentialSent = true) =>
  new AppError('invalid_token', message, {
    headers: {
      'WWW-Authenticate': `Bearer ${credentialSent ? 'error="invalid_token", ' : ''}resource_metadata="${metadataUrl}", scope="scope_user_user"`,
    },
  });

/**
 * The resource side of the token checks (decisions: Tokens). A token's signature and claims are checked once and cached by
 * the token until it expires; the grant record behind it is checked on every call, so a revoke
 * takes effect on the very next request.
 */
export class BearerVerifier {
  private readonly verified = new Map<string, { payload: JWTPayload; accessRequestId: string; clientId: string; audience: string | null; expMs: number }>();
  /** each audience's resource on this daemon (null: none) */
  private readonly targets = new Map<string, ResourceTarget | null>();

  constructor(
    private readonly opts: VerifierOptions,
    private readonly repos: Repositories,
    private readonly clock: Clock,
    private readonly metadataUrl: (path?: string) => string,
  ) {}

  private fail(message: string): AppError {
    return invalidToken(message, this.metadataUrl());
  }

  /** The grant a token whose signature was verified names (it is in the cache), for a refusal's record. */
  attempted(token: string): { accessRequestId: string; clientId: string } | undefined {
    const hit = this.verified.get(token);
    return hit ? { accessRequestId: hit.accessRequestId, clientId: hit.clientId } : undefined;
  }

  /**
   * Whether a verified grant's token may be used on this request path. What each audience names
   * here is worked out once (it parses two URLs): the audiences are those of verified tokens.
   */
  covers(grant: BearerGrant, path: string): boolean {
    if (grant.audience === null) return true;
    let target = this.targets.get(grant.audience);
    if (target === undefined) {
      target = resourceTarget(this.opts.audience, grant.audience)?.target ?? null;
      if (this.targets.size >= CACHE_LIMIT) this.targets.clear();
      this.targets.set(grant.audience, target);
    }
    return targetCovers(target, path);
  }

  /** Signature, algorithm, typ, iss, aud, exp/nbf and the single access-request scope. */
  async verifySignature(token: string) {
    // The token itself is the key: hashing it cost more than the rest of a cache hit.
    const key = token;
    const now = this.clock();
    const hit = this.verified.get(key);
    if (hit) {
      if (hit.expMs + CLOCK_TOLERANCE_S * 1000 > now) return hit;
      this.verified.delete(key);
    }
    let payload: JWTPayload;
    let typ: string | undefined;
    try {
      const result = await jwtVerify(token, this.opts.keys, {
        issuer: this.opts.issuer,
        // a bound token's audience is checked below, against the resources of this daemon
        audience: this.opts.resourceBound ? undefined : this.opts.audience,
        algorithms: this.opts.algorithms,
        clockTolerance: CLOCK_TOLERANCE_S,
        currentDate: new Date(now),
        requiredClaims: ['exp', 'sub'],
      });
      payload = result.payload;
      typ = result.protectedHeader.typ;
    } catch (err) {
      // The issuer's keys could not be fetched: not the token's fault, so not a 401 that would
      // make the app throw a good token away.
      if (!(err instanceof joseErrors.JOSEError) || err instanceof joseErrors.JWKSTimeout) {
        throw new AppError('issuer_unavailable', "The authorization server's signing keys cannot be fetched right now; try again shortly.", {
          headers: { 'Retry-After': '5' },
        });
      }
      throw this.fail(describeJoseError(err));
    }
    const typOk = typ?.toLowerCase() === 'at+jwt' || typ?.toLowerCase() === 'application/at+jwt' || (this.opts.allowJwtTyp && (typ === undefined || typ.toUpperCase() === 'JWT'));
    if (!typOk) throw this.fail('The token is not an access token (typ).');
    // A sender-constrained token (DPoP, mTLS) is only good with its proof, which svc does not check:
    // it must never pass as a plain Bearer.
    if (payload.cnf !== undefined) throw this.fail('The token is bound to a key (cnf); svc accepts only Bearer tokens.');
    let audience: string | null = null;
    if (this.opts.resourceBound) {
      const aud = Array.isArray(payload.aud) && payload.aud.length === 1 ? payload.aud[0] : payload.aud;
      if (typeof aud !== 'string' || !resourceTarget(this.opts.audience, aud)) throw this.fail("The token's aud claim is not acceptable.");
      audience = aud;
    }
    const scopes = typeof payload.scope === 'string' ? payload.scope.split(' ') : [];
    const grants = scopes.filter((s) => s.startsWith(ACCESS_REQUEST_SCOPE_PREFIX));
    if (grants.length !== 1) throw this.fail('The token must carry exactly one scope_access_request scope.');
    const clientId = typeof payload.client_id === 'string' ? payload.client_id : typeof payload.azp === 'string' ? payload.azp : '';
    if (!clientId) throw this.fail('The token names no client.');
    const entry = { payload, accessRequestId: grants[0].slice(ACCESS_REQUEST_SCOPE_PREFIX.length), clientId, audience, expMs: (payload.exp as number) * 1000 };
    if (this.verified.size >= CACHE_LIMIT) this.verified.delete(this.verified.keys().next().value as string);
    this.verified.set(key, entry);
    return entry;
  }

  /** The full check: a verified token whose grant is approved for that very client and user. */
  async verify(token: string): Promise<BearerGrant> {
    const entry = await this.verifySignature(token);
    // The records themselves, by id, on every call: a revoke or a demotion counts from the moment
    // it is durable. The user is the token's subject, checked against the grant's approver below.
    const family = entry.payload[GRANT_CLAIM];
    const sub = typeof entry.payload.sub === 'string' ? entry.payload.sub : '';
    const { record, user, ended } = await this.grantRecords(entry.accessRequestId, sub, typeof family === 'string' ? family : null);
    if (!record || record.status !== 'approved' || !record.approved_role) throw this.fail('The grant behind this token is not approved (revoked, denied, expired or gone).');
    if (record.app_client_id !== entry.clientId) throw this.fail('The token was issued to another client than the one that asked for this grant.');
    if (!user || record.user_id !== user.id) throw this.fail('The token belongs to another user than the approver of this grant.');
    if (ended) {
      throw this.fail('The sign-in behind this token has ended (its refresh token was revoked or used twice); sign in again.');
    }
    // Never above what the approver may grant now: a demoted approver's grants shrink with them.
    const role: AppRole = lowerAppRole(appRoleAtMost(record.approved_role, 'scope_user_power_user') ? record.approved_role : 'scope_user_power_user', maxGrantableRole(user.role));
    return { record, user, role, clientId: entry.clientId, audience: entry.audience };
  }

  /**
   * The grant, the token's subject and whether its sign-in ended: in one statement where the store
   * offers it, else in three independent reads at once (one round trip's time on a remote store).
   */
  private async grantRecords(accessRequestId: string, sub: string, family: string | null) {
    const now = this.clock();
    if (this.repos.bearerRecords) {
      const found = await this.repos.bearerRecords.forToken(accessRequestId, sub, family === null ? null : endedGrantKey(family));
      return { record: found.record, user: sub ? found.user : undefined, ended: endedMarkHolds(found.ended, now) };
    }
    const [record, user, ended] = await Promise.all([
      this.repos.accessRequests.get(accessRequestId),
      sub ? this.repos.users.get(sub) : undefined,
      family === null ? false : grantEnded(this.repos, family, now),
    ]);
    return { record, user, ended };
  }
}

function describeJoseError(err: unknown): string {
  if (err instanceof joseErrors.JWTExpired) return 'The token has expired.';
  if (err instanceof joseErrors.JWTClaimValidationFailed) return `The token's ${err.claim} claim is not acceptable.`;
  if (err instanceof joseErrors.JWSSignatureVerificationFailed) return 'The token signature does not verify.';
  if (err instanceof joseErrors.JWKSNoMatchingKey) return 'The token was signed with an unknown key.';
  if (err instanceof joseErrors.JOSEAlgNotAllowed) return 'The token uses an algorithm that is not allowed.';
  return 'The token is malformed or not verifiable.';
}

/** API keys (decisions: API keys, src/keys) start with this; every other Bearer credential is a JWT. */
export const API_KEY_PREFIX = 'svc_';

/** Checks an API key and its grant record on every call, as BearerVerifier.verify does a token's. */
export interface ApiKeyBearer {
  verify(key: string): Promise<BearerGrant>;
  /** the grant a known key stands on, when its use was refused */
  attempted?(key: string): Promise<{ accessRequestId: string; clientId: string } | undefined>;
}

/** RFC 6750's b64token: what a Bearer credential (a JWT or an svc API key) is made of. */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

/**
 * The credential of a request: from `Authorization: Bearer` (the scheme name is case-insensitive,
 * RFC 7235 §2.1), or from `x-api-key`, where Anthropic's SDKs send theirs. Never from the query
 * string or a cookie. Both headers naming different credentials is a 401: which one was meant
 * cannot be told, and neither is tried.
 */
function credentialOf(ctx: { get(name: string): string; query: Record<string, unknown>; path: string }, metadataUrl: (path: string) => string): string {
  const header = ctx.get('Authorization');
  const match = /^Bearer +([A-Za-z0-9\-._~+/]+=*)$/i.exec(header);
  const apiKey = ctx.get('x-api-key');
  if (apiKey) {
    if (!B64TOKEN.test(apiKey)) throw invalidToken('The x-api-key header must be an svc API key or access token.', metadataUrl(ctx.path));
    if (header && match?.[1] !== apiKey) throw invalidToken('The Authorization and x-api-key headers name different credentials; send one of them.', metadataUrl(ctx.path));
    return apiKey;
  }
  if (!match) {
    const inQuery = 'access_token' in ctx.query;
    if (header) throw invalidToken('The Authorization header must be "Bearer <token>".', metadataUrl(ctx.path));
    throw invalidToken(inQuery ? 'Send the token in the Authorization header, not the query string.' : 'A Bearer token is required.', metadataUrl(ctx.path), false);
  }
  return match[1];
}

/**
 * Bearer authentication for app routes: the credential (credentialOf), then BearerVerifier.verify
 * (an API key: `keys.verify`).
 */
export function requireBearer(verifier: BearerVerifier, metadataUrl: (path: string) => string, keys?: ApiKeyBearer): Middleware<AppState> {
  return async function authenticateBearer(ctx, next) {
    const credential = credentialOf(ctx, metadataUrl);
    let grant: BearerGrant;
    try {
      grant = keys && credential.startsWith(API_KEY_PREFIX) ? await keys.verify(credential) : await verifier.verify(credential);
    } catch (err) {
      // a credential whose signature held names its grant: the refusal shows in that grant's activity
      ctx.state.attempted = credential.startsWith(API_KEY_PREFIX) ? keys?.attempted?.(credential) : verifier.attempted(credential);
      // the challenge names the metadata of the resource that was asked for
      if (err instanceof AppError && err.status === 401) throw invalidToken(err.message, metadataUrl(ctx.path));
      throw err;
    }
    if (!verifier.covers(grant, ctx.path)) throw invalidToken('The token was issued for another resource of this service.', metadataUrl(ctx.path));
    ctx.state.grant = grant;
    await next();
  };
}

/** The role a route needs; the token's role comes from the grant record, never from the token. */
export function requireAppRole(role: AppRole): Middleware<AppState> {
  return async function checkAppRole(ctx, next) {
    const grant = ctx.state.grant;
    if (!grant || !appRoleAtMost(role, grant.role)) {
      throw new AppError('insufficient_scope', `This endpoint needs ${role}; the grant is ${grant?.role ?? 'none'}.`, {
        headers: { 'WWW-Authenticate': `Bearer error="insufficient_scope", scope="${role}"` },
      });
    }
    await next();
  };
}

/**
 * For routes open to a user's session and to app tokens alike: a token needs the app role, a
 * session user the matching account role (power user for scope_user_power_user).
 */
export function requireRoleEither(role: AppRole): Middleware<AppState> {
  const tokenGuard = requireAppRole(role);
  return async function checkRoleEither(ctx, next) {
    if (ctx.state.grant) return tokenGuard(ctx, next);
    const user = ctx.state.user;
    const needed = role === 'scope_user_power_user' ? 'power_user' : 'user';
    if (!user || !atLeast(user.role, needed)) {
      throw new AppError('insufficient_scope', `This endpoint needs a ${needed.replace('_', ' ')} account.`);
    }
    await next();
  };
}
