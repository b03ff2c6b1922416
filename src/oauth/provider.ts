import type Router from '@koa/router';
import type { Middleware } from 'koa';
import { randomBytes } from 'node:crypto';
import mount from 'koa-mount';
// oidc-provider offers no switch for the AsyncLocalStorage it keeps its request in, so this
// reaches into one of its private files; package.json pins its exact version for that reason.
import providerStorage from 'oidc-provider/lib/helpers/als.js';
import type { AccessRequestsService } from '../access-requests/service.js';
import { ACCESS_REQUEST_SCOPE_PREFIX, type BearerVerifier } from '../auth/bearer.js';
import { sessionUser } from '../auth/sessions.js';
import type { AppContext, AppDeps, AppState } from '../http/context.js';
import { RateLimiter } from '../http/rate-limit.js';
import type { McpInstancesService } from '../mcp/instances.js';
import { type AppRole, appRoles, type OAuthClientKind } from '../store/schema.js';
import { createAdapterClass } from './adapter.js';
import { ACCESS_TOKEN_TTL_S, GRANT_CLAIM, grantClaim } from './token-family.js';
import { type OAuthClientsService, TOKEN_EXCHANGE_GRANT } from './clients.js';
import type { SigningKeys } from './keys.js';
import { loadOidcProvider, withQuietConsole } from './load.js';
import { registrationPolicy } from './registration.js';
import { audienceIncludes, resourceTarget } from './resources.js';

export const OAUTH_PREFIX = '/oauth';
const REFRESH_TOKEN_TTL_S = 14 * 24 * 60 * 60;
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
/** RFC 8414 §3: the metadata of the issuer `<base>/oauth`, at the well-known path inserted before its path. */
export const AS_METADATA_PATH = `/.well-known/oauth-authorization-server${'/oauth'}`;
const DISCOVERY_PATH = '/.well-known/openid-configuration';
/** How long a sign-in waits for the person's decision: the draft's life, and a little more. */
const INTERACTION_TTL_S = 15 * 60;
const isAccessRequestScope = (s: string) => s.startsWith(ACCESS_REQUEST_SCOPE_PREFIX);
const asList = (value: unknown): string[] => (Array.isArray(value) ? value.map(String) : typeof value === 'string' && value ? [value] : []);

// oidc-provider's context and models are untyped; these aliases mark where that is so.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type OidcCtx = any;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type OidcModel = any;

/** The pages a sign-in shows, from the UI: passed in, so the authorization server does not import ui/. */
export interface SignInPages {
  /** where the person reviews the access request `id` */
  reviewUrl(id: string): string;
  /** a page saying the sign-in cannot go on: `lines` are plain text (the page escapes them) */
  failure(ctx: AppContext, status: number, title: string, heading: string, lines: { text: string; kind?: 'error' | 'muted' }[]): void;
}

export interface AuthorizationServer {
  issuer: string;
  /** mounted in front of the body parser: oidc-provider reads its own request bodies */
  middleware: Middleware<AppState>;
  mountInteractions(router: Router<AppState>): void;
}

type AuthorizationServerOptions = Parameters<typeof createAuthorizationServer>[1];
/** the built server also hands out its interaction handler, for the lazy one to call */
type BuiltAuthorizationServer = AuthorizationServer & { interaction: Middleware<AppState> };

const INTERACTION_PATH = `${OAUTH_PREFIX}/interaction/`;
const isAuthorizationServerPath = (path: string) =>
  path === OAUTH_PREFIX || path.startsWith(`${OAUTH_PREFIX}/`) || path === AS_METADATA_PATH || path === `${AS_METADATA_PATH}/`;

/**
 * The embedded authorization server, built on its first request. oidc-provider is a large share of
 * the daemon's memory, and a daemon whose apps hold valid tokens may go a long time
 * without an OAuth request: Bearer checks need only the public keys, which are loaded apart.
 */
export function lazyAuthorizationServer(deps: AppDeps, opts: AuthorizationServerOptions): AuthorizationServer {
  let built: Promise<BuiltAuthorizationServer> | null = null;
  const server = () =>
    (built ??= createAuthorizationServer(deps, opts).catch((err: unknown) => {
      built = null;
      throw err;
    }));
  return {
    issuer: `${deps.baseUrl()}${OAUTH_PREFIX}`,
    middleware: async function authorizationServer(ctx, next) {
      if (!isAuthorizationServerPath(ctx.path) || ctx.path.startsWith(INTERACTION_PATH)) return next();
      return (await server()).middleware(ctx, next);
    },
    mountInteractions(router) {
      router.get(`${INTERACTION_PATH}:uid`, async function resolveInteraction(ctx, next) {
        return (await server()).interaction(ctx, next);
      });
    },
  };
}

/**
 * The embedded authorization server (decisions: Tokens): oidc-provider at `<base>/oauth`, issuing
 * RFC 9068 JWT access tokens for the audience `<base>` and nothing but approved access-request
 * scopes. The user signs in with the svc session (single sign-on); the decision itself was made
 * on the review page, so there is no second consent screen.
 */
export async function createAuthorizationServer(
  deps: AppDeps,
  opts: {
    clients: OAuthClientsService;
    requests: AccessRequestsService;
    instances: McpInstancesService;
    keys: SigningKeys;
    cookieKeys: string[];
    verifier: BearerVerifier;
    pages: SignInPages;
  },
): Promise<BuiltAuthorizationServer> {
  const { Provider, interactionPolicy, errors } = await loadOidcProvider(deps.logger);
  const base = deps.baseUrl();
  const issuer = `${base}${OAUTH_PREFIX}`;
  const audience = base;
  const { clients, requests, verifier, instances, pages } = opts;
  const { config } = deps;

  const resourceServerInfo = (canonical: string, scopes: string[]) => ({
    scope: [...new Set([...appRoles, ...scopes])].join(' '),
    audience: canonical,
    accessTokenTTL: ACCESS_TOKEN_TTL_S,
    accessTokenFormat: 'jwt' as const,
    jwt: { sign: { alg: 'ES256' } },
  });

  /** A resource value of this daemon, normalised, or invalid_target (another origin, an unknown path or instance). */
  const targetOf = async (resource: string) => {
    const found = resourceTarget(base, resource);
    if (!found) throw new errors.InvalidTarget(`${resource} is not a resource of this svc: use ${base}, ${base}/v1 or an MCP proxy URL (svc mcp list)`);
    if (found.target.kind === 'mcp' && !(await instances.find(found.target.instanceId))) {
      throw new errors.InvalidTarget('no MCP instance has that proxy URL');
    }
    return found;
  };

  // Every authorization passes the login prompt once, where the svc session answers it: so the
  // account behind a code is always the user logged in to svc right now. And every one passes the
  // consent prompt, where svc decides from the access request behind it.
  const policy = interactionPolicy.base();
  policy.get('login')!.checks.add(
    new interactionPolicy.Check('svc_session', 'the svc session confirms the user', (ctx: OidcCtx) => (ctx.oidc.result?.login ? false : true)),
  );
  policy.get('consent')!.checks.add(
    new interactionPolicy.Check('svc_access_request', 'an approved access request stands behind every grant', (ctx: OidcCtx) => (ctx.oidc.result?.consent ? false : true)),
  );

  /** Ends a grant and every token of it: its access request is no longer approved. */
  const endTokenFamily = async (grantId: string) => {
    for (const model of ['RefreshToken', 'AuthorizationCode', 'AccessToken']) await new Adapter(model).revokeByGrantId(grantId);
    await new Adapter('Grant').destroy(grantId);
  };

  /**
   * The one access-request scope a grant holds for a resource. Every authorization makes a grant of
   * its own (see loadExistingGrant), so a grant names exactly one; one that names two is refused
   * rather than guessed at.
   */
  const grantedRequestScope = (grant: OidcModel, resource: string): string | undefined => {
    const named = new Set(
      String(grant?.getResourceScope?.(resource) ?? '')
        .split(' ')
        .filter(isAccessRequestScope),
    );
    return named.size === 1 ? [...named][0] : undefined;
  };

  const requestAddress = () => (providerStorage.getStore() as { ip?: string } | undefined)?.ip;
  // On a team server the next step of an authorization may reach another replica: all of it is stored.
  const Adapter = createAdapterClass(deps.repos, deps.box, clients, deps.clock, requestAddress, { shared: config.database !== null });
  const registrations = new RateLimiter(config.rateLimitRegistration, 60_000, deps.clock);
  const secure = base.startsWith('https:');
  const provider = await withQuietConsole(deps.logger, () => {
    const p = new Provider(issuer, {
      adapter: Adapter,
      jwks: { keys: opts.keys.keys as never },
      cookies: {
        keys: opts.cookieKeys,
        long: { signed: true, httpOnly: true, sameSite: 'lax', secure },
        short: { signed: true, httpOnly: true, sameSite: 'lax', secure },
        names: { session: 'svc_oauth_session', interaction: 'svc_oauth_interaction', resume: 'svc_oauth_resume' },
      },
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
      features: {
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
          // operator may let loopback through (see `fetch` below).
          allowFetch: async () => true,
        },
        resourceIndicators: {
          enabled: true,
          defaultResource: async () => audience,
          useGrantedResource: async () => true,
          async getResourceServerInfo(ctx: OidcCtx, resource: string, client: OidcModel) {
            const { canonical } = await targetOf(resource);
            if (ctx.oidc.route !== 'token') {
              // svc's own flow names the approved request in the scope; a standard client names a role.
              const accountId = ctx.oidc.session?.accountId;
              return resourceServerInfo(canonical, await requests.approvedScopesFor(client.clientId, accountId));
            }
            // At the token endpoint the grant must still stand on an approved access request of this
            // client and user; if not, the whole token family ends here.
            const entities = ctx.oidc.entities as { Grant?: OidcModel; AuthorizationCode?: OidcModel; RefreshToken?: OidcModel };
            const source = entities.AuthorizationCode ?? entities.RefreshToken;
            const grant = entities.Grant ?? (source?.grantId ? await ctx.oidc.provider.Grant.find(source.grantId) : undefined);
            const scope = grantedRequestScope(grant, resource);
            const record = scope ? await requests.get(scope.slice(ACCESS_REQUEST_SCOPE_PREFIX.length)) : undefined;
            if (!scope || !record || record.status !== 'approved' || record.app_client_id !== client.clientId || record.user_id !== source?.accountId) {
              if (source?.grantId) await endTokenFamily(source.grantId);
              throw new errors.InvalidGrant('the access request behind this grant is no longer approved');
            }
            return resourceServerInfo(canonical, [scope]);
          },
        },
      },
      extraClientMetadata: {
        // oidc-provider has no hook for registration policy; a validator over a property of our own
        // runs on every client it builds, and is where svc's rules for self-registration live.
        properties: ['svc_policy'],
        validator: registrationPolicy(errors),
      },
      formats: {
        customizers: {
          // A standard client asks for a role, but the token must name the access request it stands
          // on (decisions: Tokens): that scope is in the grant, set when the person approved.
          async jwt(ctx: OidcCtx, token: OidcModel, jwt: { payload: Record<string, unknown> }) {
            if (token.grantId) jwt.payload[GRANT_CLAIM] = grantClaim(token.grantId);
            const scopes = String(jwt.payload.scope ?? '').split(' ').filter(Boolean);
            if (scopes.some(isAccessRequestScope) || !token.grantId || !token.resourceServer) return;
            const grant = ctx?.oidc?.entities?.Grant ?? (await ctx.oidc.provider.Grant.find(token.grantId));
            const scope = grantedRequestScope(grant, token.resourceServer.identifier());
            if (scope) jwt.payload.scope = [...scopes, scope].join(' ');
          },
        },
      },
      async fetch(url: URL | string, options: RequestInit & { dispatcher?: unknown }) {
        if (config.clientMetadataAllowLoopback) delete options.dispatcher;
        return fetch(url, options);
      },
      interactions: { url: async (_ctx: OidcCtx, interaction: OidcModel) => `${OAUTH_PREFIX}/interaction/${interaction.uid}`, policy },
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
    });
    return p;
  });
  provider.on('server_error', (_ctx: unknown, err: Error) => deps.logger.error({ err: err.message, source: 'oidc-provider' }, 'authorization server error'));

  // RFC 8693: a token of the same user and client buys a token for another approved grant.
  provider.registerGrantType(
    TOKEN_EXCHANGE_GRANT,
    async function tokenExchange(ctx: OidcCtx) {
      const { client, params } = ctx.oidc;
      if (params.subject_token_type !== ACCESS_TOKEN_TYPE) throw new errors.InvalidRequest(`subject_token_type must be ${ACCESS_TOKEN_TYPE}`);
      if (params.requested_token_type && params.requested_token_type !== ACCESS_TOKEN_TYPE) {
        throw new errors.InvalidRequest(`requested_token_type must be ${ACCESS_TOKEN_TYPE}`);
      }
      let subject;
      try {
        subject = await verifier.verify(String(params.subject_token ?? ''));
      } catch {
        throw new errors.InvalidGrant('subject_token is not a valid access token of this server');
      }
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
      const at = new AccessToken({ accountId: subject.user.id, client, grantId, gty: 'token_exchange', scope: scopes[0] });
      at.resourceServer = new ResourceServer(resource, resourceServerInfo(canonical, scopes));
      ctx.oidc.entity('AccessToken', at);
      const value = await at.save();
      ctx.body = { access_token: value, issued_token_type: ACCESS_TOKEN_TYPE, token_type: 'Bearer', expires_in: at.expiration, scope: at.scope };
    },
    ['subject_token', 'subject_token_type', 'requested_token_type', 'scope', 'resource', 'audience', 'actor_token', 'actor_token_type'],
  );

  // oidc-provider 9's Provider is the Koa app itself (its `.app` getter only warns that it is deprecated).
  const mounted = mount(OAUTH_PREFIX, provider as never) as unknown as Middleware<AppState>;
  let inFlight = 0;
  const interactionPath = `${OAUTH_PREFIX}/interaction/`;
  /** Interactions waiting for a person's decision, by uid: the access request each one made. */
  const waiting = new Map<string, { id: string; until: number }>();
  const remember = (uid: string, id: string) => {
    const now = deps.clock();
    for (const [key, v] of waiting) if (v.until <= now) waiting.delete(key);
    waiting.set(uid, { id, until: now + INTERACTION_TTL_S * 1000 });
  };

  // A self-registered client is kept while it gets tokens (one without any for 30 days goes). Only a
  // token counts: an authorization request costs nothing to send, so it would keep any flood alive.
  const touch = (ctx: OidcCtx) => {
    const clientId = ctx?.oidc?.client?.clientId;
    if (clientId) clients.touch(clientId).catch((err: Error) => deps.logger.warn({ err: err.message }, 'could not mark an OAuth client used'));
  };
  provider.on('grant.success', touch);

  const oauthError = (ctx: Parameters<Middleware<AppState>>[0], status: number, error: string, description: string) => {
    ctx.status = status;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { error, error_description: description };
  };

  /** What the client is, for the person deciding: registered by an admin, by itself, or by a metadata document. */
  const clientKind = async (clientId: string): Promise<OAuthClientKind> => {
    const known = await clients.find(clientId);
    if (known) return known.kind ?? 'registered';
    return /^https:/.test(clientId) ? 'metadata_document' : 'registered';
  };

  const serveOAuth: Middleware<AppState> = async function authorizationServer(ctx, next) {
    if (ctx.path === AS_METADATA_PATH || ctx.path === `${AS_METADATA_PATH}/`) {
      // RFC 8414's location for an issuer with a path; the same document as OIDC discovery.
      ctx.path = `${OAUTH_PREFIX}${DISCOVERY_PATH}`;
    } else if (ctx.path !== OAUTH_PREFIX && !ctx.path.startsWith(`${OAUTH_PREFIX}/`)) {
      return next();
    }
    if (ctx.path.startsWith(interactionPath)) return next();
    if (ctx.path === `${OAUTH_PREFIX}/auth` && ctx.method === 'GET' && !ctx.query.scope) {
      // oidc-provider grants nothing to a request that names no scope; for svc such a request
      // (the conformance suite's, many hosts') asks for the User role.
      ctx.querystring = `${ctx.querystring ? `${ctx.querystring}&` : ''}scope=scope_user_user`;
    }
    if (ctx.path === `${OAUTH_PREFIX}/reg`) {
      // oidc-provider answers no CORS on registration, and browser-based MCP clients (the
      // Inspector's web UI) register from their own origin: open CORS, no credentials, like discovery.
      if (ctx.get('Origin')) ctx.set('Access-Control-Allow-Origin', '*');
      if (ctx.method === 'OPTIONS') {
        ctx.set('Access-Control-Allow-Methods', 'POST');
        ctx.set('Access-Control-Allow-Headers', 'Content-Type, Authorization');
        ctx.set('Access-Control-Max-Age', '600');
        ctx.status = 204;
        return;
      }
    }
    if (ctx.path === `${OAUTH_PREFIX}/reg` && ctx.method === 'POST') {
      // Anyone may register, so registration is rate-limited per address and capped in number.
      try {
        registrations.hit(ctx.ip);
      } catch {
        ctx.set('Retry-After', '60');
        return oauthError(ctx, 429, 'rate_limited', 'Too many client registrations from this address; try again in a minute.');
      }
      const refused = await clients.registrationRefusal(ctx.ip, { total: config.dynamicClientMax, perAddress: config.dynamicClientMaxPerAddress });
      if (refused) return oauthError(ctx, 429, refused.error, refused.description);
    }
    inFlight++;
    try {
      return await mounted(ctx, next);
    } finally {
      // oidc-provider keeps its request in an AsyncLocalStorage; once one was used, Node 20
      // tracks every promise of the process. Between OAuth requests nothing needs it, so it is
      // switched off, and the proxies' hot path does not pay for it.
      if (--inFlight === 0) providerStorage.disable();
    }
  };

  const resolveInteraction: Middleware<AppState> = async function resolveInteraction(ctx) {
    let details;
    try {
      details = await provider.interactionDetails(ctx.req, ctx.res);
    } catch {
      pages.failure(ctx, 400, 'Sign-in expired', 'This sign-in has expired', [{ text: 'Return to the app and start again.' }]);
      return;
    }
    const finish = async (result: Record<string, unknown>, merge = false) => {
      const to = await provider.interactionResult(ctx.req, ctx.res, result, { mergeWithLastSubmission: merge });
      ctx.status = 303;
      ctx.redirect(to);
      ctx.status = 303;
    };
    // A consent result keeps the login of the same sign-in, so the prompts are satisfied at once
    // (even with prompt=consent, which would otherwise ask again for ever).
    const deny = (description: string) => finish({ error: 'access_denied', error_description: description }, true);
    if (details.prompt.name === 'login') {
      const user = await sessionUser(ctx, deps);
      if (!user) {
        ctx.redirect(`/ui/login?next=${encodeURIComponent(ctx.path)}`);
        return;
      }
      await finish({ login: { accountId: user.id, remember: false } });
      return;
    }
    if (details.prompt.name !== 'consent') return deny('unsupported interaction');

    const accountId = details.session?.accountId;
    const clientId = String(details.params.client_id);
    const requested = String(details.params.scope ?? '').split(' ').filter(Boolean);
    const resources = asList(details.params.resource);
    // Known scopes the grant must cover, or the consent prompt comes back for ever.
    const oidcScopes = requested.filter((s) => s === 'openid' || s === 'offline_access' || (appRoles as readonly string[]).includes(s));
    const grantRequest = async (scope: string, extra: string[] = []) => {
      const grant = new provider.Grant({ accountId, clientId });
      for (const resource of resources.length ? resources : [audience]) grant.addResourceScope(resource, [...extra, scope].join(' '));
      if (oidcScopes.length) grant.addOIDCScope(oidcScopes.join(' '));
      return finish({ consent: { grantId: await grant.save() } }, true);
    };
    if (!accountId) return deny('no signed-in user');

    // svc's own flow: the app names the access request the person already approved.
    const named = requested.filter(isAccessRequestScope);
    if (named.length > 1) return finish({ error: 'invalid_scope', error_description: 'request at most one scope_access_request:<id>' }, true);
    if (named.length === 1) {
      if (!(await requests.approvedScopesFor(clientId, accountId)).includes(named[0])) return deny('that access request is not approved for this app by this user');
      return grantRequest(named[0]);
    }

    // A standard client (an MCP host, any OAuth app): its request becomes an access request that
    // the person decides on the review page, and the sign-in resumes here afterwards.
    const uid = String(ctx.params.uid);
    const pending = waiting.get(uid);
    if (!pending) {
      const role: AppRole = requested.includes('scope_user_power_user') ? 'scope_user_power_user' : 'scope_user_user';
      const mcpUrls: string[] = [];
      const suggested: string[] = [];
      for (const resource of resources) {
        const { target } = await targetOf(resource);
        if (target.kind !== 'mcp') continue;
        const instance = await instances.find(target.instanceId);
        if (!instance) continue;
        mcpUrls.push(instance.url);
        suggested.push(instance.id);
      }
      const client = await (provider as OidcModel).Client.find(clientId);
      const record = await requests.createForAuthorization({
        clientId,
        role,
        mcpUrls,
        resumeUrl: `${base}${interactionPath}${uid}`,
        origin: {
          interaction: uid,
          redirect_uri: String(details.params.redirect_uri ?? ''),
          client_kind: await clientKind(clientId),
          client_name: typeof client?.clientName === 'string' ? client.clientName.slice(0, 100) : null,
          suggested_instance_ids: suggested,
          resources,
        },
      });
      remember(uid, record.id);
      deps.logger.info({ accessRequest: record.id, client: clientId }, 'access request made at the authorization endpoint');
      ctx.status = 303;
      ctx.redirect(pages.reviewUrl(record.id));
      ctx.status = 303;
      return;
    }
    const record = await requests.get(pending.id);
    if (!record) return deny('the access request is gone');
    if (record.status === 'draft') {
      ctx.status = 303;
      ctx.redirect(pages.reviewUrl(record.id));
      ctx.status = 303;
      return;
    }
    waiting.delete(uid);
    if (record.status !== 'approved') return deny(`the access request was ${record.status}`);
    if (record.user_id !== accountId) return deny('the access request was approved by another user than the one signing in');
    const roles = appRoles.filter((r) => requested.includes(r));
    return grantRequest(`${ACCESS_REQUEST_SCOPE_PREFIX}${record.id}`, roles);
  };

  return {
    issuer,
    middleware: serveOAuth,
    interaction: resolveInteraction,
    mountInteractions(router) {
      router.get(`${interactionPath}:uid`, resolveInteraction);
    },
  };
}

function safeOrigin(url: string): string | null {
  try {
    return new URL(url).origin;
  } catch {
    return null;
  }
}
