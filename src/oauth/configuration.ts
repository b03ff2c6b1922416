import { randomBytes } from 'node:crypto';
import type { AccessRequestsService } from '../access-requests/service.js';
import type { AppDeps } from '../http/context.js';
import { appRoles } from '../store/schema.js';
import { INTERACTION_TTL_S, type SignInPages } from './interactions.js';
import type { SigningKeys } from './keys.js';
import type { OidcCtx, OidcErrors, OidcModel } from './load.js';
import { INTERACTION_PATH } from './paths.js';
import { registrationPolicy } from './registration.js';
import { resourceIndicators, type TargetOf } from './resource-indicators.js';
import { tokenFormats } from './token-claims.js';
import { ACCESS_TOKEN_TTL_S } from './token-family.js';

const REFRESH_TOKEN_TTL_S = 14 * 24 * 60 * 60;

/** What svc's configuration of oidc-provider is made of: built by the authorization server, passed in. */
export interface ProviderConfigurationDeps {
  deps: Pick<AppDeps, 'config' | 'repos'>;
  /** oidc-provider's adapter class, over svc's store */
  adapter: unknown;
  keys: SigningKeys;
  cookieKeys: string[];
  /** the daemon's own origin: whether cookies are Secure */
  base: string;
  /** the resource a token is bound to when its request names none */
  audience: string;
  requests: AccessRequestsService;
  pages: SignInPages;
  errors: OidcErrors;
  /** the interaction policy (signInPolicy) */
  policy: unknown;
  targetOf: TargetOf;
  endTokenFamily: (grantId: string) => Promise<void>;
}

/** The configuration the embedded oidc-provider is built with. */
export function providerConfiguration(c: ProviderConfigurationDeps) {
  const { deps, pages } = c;
  return {
    adapter: c.adapter,
    jwks: { keys: c.keys.keys as never },
    cookies: cookieOptions(c.cookieKeys, c.base.startsWith('https:')),
    async findAccount(_ctx: OidcCtx, sub: string) {
      const user = await deps.repos.users.get(sub);
      return user ? { accountId: user.id, claims: async () => ({ sub: user.id }) } : undefined;
    },
    // The roles are known scopes too: MCP hosts (the MCP SDK) put the scope they were told
    // (WWW-Authenticate, scopes_supported) in their registration, which is refused otherwise.
    scopes: ['openid', 'offline_access', ...appRoles],
    pkce: { required: () => true },
    // oidc-provider reuses one grant per client and person (the session remembers it), and would
    // add each new approval to it: then a token asked for one access request could carry another
    // (the first one the grant names), and a revoked one would poison every later sign-in. svc
    // makes a new grant at every consent instead, so each authorization issues tokens for exactly
    // the access request it named and the person approved.
    loadExistingGrant: async (ctx: OidcCtx) => {
      const grantId = ctx.oidc.result?.consent?.grantId;
      return grantId ? ctx.oidc.provider.Grant.find(grantId) : undefined;
    },
    // Self-registered and metadata-document clients are public; admin-added confidential clients
    // send their secret with HTTP Basic. Nothing else is offered, so nothing else is advertised.
    clientAuthMethods: ['none', 'client_secret_basic'],
    clientDefaults: { grant_types: ['authorization_code'], id_token_signed_response_alg: 'RS256', response_types: ['code'], token_endpoint_auth_method: 'none' },
    features: providerFeatures(c),
    extraClientMetadata: {
      // oidc-provider has no hook for registration policy; a validator over a property of our own
      // runs on every client it builds, and is where svc's rules for self-registration live.
      properties: ['svc_policy'],
      validator: registrationPolicy(c.errors),
    },
    formats: tokenFormats(async (id) => {
      const record = await c.requests.get(id);
      return record?.status === 'approved' ? (record.approved_role ?? undefined) : undefined;
    }),
    async fetch(url: URL | string, options: RequestInit & { dispatcher?: unknown }) {
      if (deps.config.clientMetadataAllowLoopback) delete options.dispatcher;
      return fetch(url, options);
    },
    interactions: { url: async (_ctx: OidcCtx, interaction: OidcModel) => `${INTERACTION_PATH}${interaction.uid}`, policy: c.policy },
    issueRefreshToken: async (_ctx: OidcCtx, client: OidcModel) => client.grantTypeAllowed('refresh_token'),
    rotateRefreshToken: true,
    expiresWithSession: async () => false,
    ttl: {
      AccessToken: ACCESS_TOKEN_TTL_S,
      AuthorizationCode: 60,
      IdToken: ACCESS_TOKEN_TTL_S,
      Interaction: INTERACTION_TTL_S,
      Session: 24 * 60 * 60,
      Grant: REFRESH_TOKEN_TTL_S,
      RefreshToken: REFRESH_TOKEN_TTL_S,
    },
    clientBasedCORS: (_ctx: OidcCtx, origin: string, client: OidcModel) => client.redirectUris?.some((u: string) => safeOrigin(u) === origin) ?? false,
    async renderError(ctx: OidcCtx, out: { error: string; error_description?: string }) {
      pages.failure(ctx as never, ctx.status || 400, 'Sign-in error', 'This sign-in cannot go on', [
        { text: out.error, kind: 'error' },
        { text: out.error_description ?? '' },
        { text: 'Return to the app and start again.', kind: 'muted' },
      ]);
    },
  };
}

function cookieOptions(keys: string[], secure: boolean) {
  return {
    keys,
    long: { signed: true, httpOnly: true, sameSite: 'lax', secure },
    short: { signed: true, httpOnly: true, sameSite: 'lax', secure },
    names: { session: 'svc_oauth_session', interaction: 'svc_oauth_interaction', resume: 'svc_oauth_resume' },
  };
}

function providerFeatures(c: ProviderConfigurationDeps) {
  const { config } = c.deps;
  return {
    devInteractions: { enabled: false },
    revocation: { enabled: true },
    userinfo: { enabled: false },
    rpInitiatedLogout: { enabled: false },
    // Tokens are only ever Bearer tokens: svc checks no proof of possession (issue: a DPoP-bound
    // token must never pass as a Bearer, so none is issued).
    dPoP: { enabled: false },
    registration: { enabled: config.dynamicClientMax > 0, initialAccessToken: false, idFactory: () => `svc-dyn-${randomBytes(12).toString('base64url')}` },
    clientIdMetadataDocument: {
      enabled: true,
      ack: 'draft-02',
      // oidc-provider refuses special-use addresses at connect time; for development the
      // operator may let loopback through (see `fetch` in providerConfiguration).
      allowFetch: async () => true,
    },
    resourceIndicators: resourceIndicators({ audience: c.audience, targetOf: c.targetOf, requests: c.requests, errors: c.errors, endTokenFamily: c.endTokenFamily }),
  };
}

function safeOrigin(url: string): string | null {
  try {
    return new URL(url).origin;
  } catch {
    return null;
  }
}
