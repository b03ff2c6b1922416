import type Router from '@koa/router';
import type { Middleware } from 'koa';
import mount from 'koa-mount';
import providerStorage from 'oidc-provider/lib/helpers/als.js';
import type { AccessRequestsService } from '../access-requests/service.js';
import { ACCESS_REQUEST_SCOPE_PREFIX, type BearerVerifier } from '../auth/bearer.js';
import { sessionUser } from '../auth/sessions.js';
import type { AppDeps, AppState } from '../http/context.js';
import { html } from '../ui/html.js';
import { sendPage } from '../ui/login.js';
import { createAdapterClass } from './adapter.js';
import { type OAuthClientsService, TOKEN_EXCHANGE_GRANT } from './clients.js';
import type { SigningKeys } from './keys.js';
import { loadOidcProvider, withQuietConsole } from './load.js';

export const OAUTH_PREFIX = '/oauth';
export const ACCESS_TOKEN_TTL_S = 10 * 60;
const REFRESH_TOKEN_TTL_S = 14 * 24 * 60 * 60;
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

// oidc-provider's context and models are untyped; these aliases mark where that is so.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type OidcCtx = any;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type OidcModel = any;

export interface AuthorizationServer {
  issuer: string;
  /** mounted in front of the body parser: oidc-provider reads its own request bodies */
  middleware: Middleware<AppState>;
  mountInteractions(router: Router<AppState>): void;
}

/**
 * The embedded authorization server (CONTRACT §7): oidc-provider at `<base>/oauth`, issuing
 * RFC 9068 JWT access tokens for the audience `<base>` and nothing but approved access-request
 * scopes. The user signs in with the svc session (single sign-on); the decision itself was made
 * on the review page, so there is no second consent screen.
 */
export async function createAuthorizationServer(
  deps: AppDeps,
  opts: { clients: OAuthClientsService; requests: AccessRequestsService; keys: SigningKeys; cookieKeys: string[]; verifier: BearerVerifier },
): Promise<AuthorizationServer> {
  const { Provider, interactionPolicy, errors } = await loadOidcProvider(deps.logger);
  const base = deps.baseUrl();
  const issuer = `${base}${OAUTH_PREFIX}`;
  const audience = base;
  const { clients, requests, verifier } = opts;

  const resourceServerInfo = (scopes: string[]) => ({
    scope: scopes.join(' ') || `${ACCESS_REQUEST_SCOPE_PREFIX}none`,
    audience,
    accessTokenTTL: ACCESS_TOKEN_TTL_S,
    accessTokenFormat: 'jwt' as const,
    jwt: { sign: { alg: 'ES256' } },
  });

  // Every authorization passes the login prompt once, where the svc session answers it: so the
  // account behind a code is always the user logged in to svc right now.
  const policy = interactionPolicy.base();
  policy.get('login')!.checks.add(
    new interactionPolicy.Check('svc_session', 'the svc session confirms the user', (ctx: OidcCtx) => (ctx.oidc.result?.login ? false : true)),
  );

  const Adapter = createAdapterClass(deps.store, deps.box, clients, deps.clock);
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
        const user = deps.store.read((db) => db.users.find((u) => u.id === sub));
        return user ? { accountId: user.id, claims: async () => ({ sub: user.id }) } : undefined;
      },
      scopes: ['openid', 'offline_access'],
      pkce: { required: () => true },
      features: {
        devInteractions: { enabled: false },
        revocation: { enabled: true },
        userinfo: { enabled: false },
        rpInitiatedLogout: { enabled: false },
        resourceIndicators: {
          enabled: true,
          defaultResource: async () => audience,
          useGrantedResource: async () => true,
          async getResourceServerInfo(ctx: OidcCtx, resource: string, client: OidcModel) {
            if (resource !== audience) throw new errors.InvalidTarget(`the only resource here is ${audience}`);
            const entities = ctx.oidc.entities as { AuthorizationCode?: { accountId?: string }; RefreshToken?: { accountId?: string } };
            const accountId = entities.AuthorizationCode?.accountId ?? entities.RefreshToken?.accountId ?? ctx.oidc.session?.accountId;
            const scopes = requests.approvedScopesFor(client.clientId, accountId);
            if (scopes.length === 0 && ctx.oidc.route === 'token') {
              throw new errors.InvalidGrant('the access request behind this grant is no longer approved');
            }
            return resourceServerInfo(scopes);
          },
        },
      },
      interactions: { url: async (_ctx: OidcCtx, interaction: OidcModel) => `${OAUTH_PREFIX}/interaction/${interaction.uid}`, policy },
      issueRefreshToken: async (_ctx: OidcCtx, client: OidcModel) => client.grantTypeAllowed('refresh_token'),
      rotateRefreshToken: true,
      expiresWithSession: async () => false,
      ttl: {
        AccessToken: ACCESS_TOKEN_TTL_S,
        AuthorizationCode: 60,
        IdToken: ACCESS_TOKEN_TTL_S,
        Interaction: 10 * 60,
        Session: 24 * 60 * 60,
        Grant: REFRESH_TOKEN_TTL_S,
        RefreshToken: REFRESH_TOKEN_TTL_S,
      },
      clientBasedCORS: (_ctx: OidcCtx, origin: string, client: OidcModel) => client.redirectUris?.some((u: string) => safeOrigin(u) === origin) ?? false,
      async renderError(ctx: OidcCtx, out: { error: string; error_description?: string }) {
        sendPage(ctx as never, ctx.status || 400, 'Sign-in error', () => html`<div class="card"><h1>This sign-in cannot go on</h1>
<p class="error">${out.error}</p><p>${out.error_description ?? ''}</p><p class="muted">Return to the app and start again.</p></div>`);
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
      if (params.resource && params.resource !== audience) throw new errors.InvalidTarget();
      let subject;
      try {
        subject = await verifier.verify(String(params.subject_token ?? ''));
      } catch {
        throw new errors.InvalidGrant('subject_token is not a valid access token of this server');
      }
      if (subject.clientId !== client.clientId) throw new errors.InvalidGrant('subject_token was issued to another client');
      const scopes = String(params.scope ?? '').split(' ').filter(Boolean);
      if (scopes.length !== 1 || !scopes[0].startsWith(ACCESS_REQUEST_SCOPE_PREFIX)) {
        throw new errors.InvalidScope('request exactly one scope_access_request:<id>');
      }
      if (!requests.approvedScopesFor(client.clientId, subject.user.id).includes(scopes[0])) {
        throw new errors.InvalidScope('that access request is not approved for this client and user', scopes[0]);
      }
      const { Grant, AccessToken, ResourceServer } = ctx.oidc.provider;
      const grant = new Grant({ accountId: subject.user.id, clientId: client.clientId });
      grant.addResourceScope(audience, scopes[0]);
      const grantId = await grant.save();
      const at = new AccessToken({ accountId: subject.user.id, client, grantId, gty: 'token_exchange', scope: scopes[0] });
      at.resourceServer = new ResourceServer(audience, resourceServerInfo(scopes));
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

  return {
    issuer,
    middleware: async function authorizationServer(ctx, next) {
      if (ctx.path !== OAUTH_PREFIX && !ctx.path.startsWith(`${OAUTH_PREFIX}/`)) return next();
      if (ctx.path.startsWith(interactionPath)) return next();
      inFlight++;
      try {
        return await mounted(ctx, next);
      } finally {
        // oidc-provider keeps its request in an AsyncLocalStorage; once one was used, Node 20
        // tracks every promise of the process. Between OAuth requests nothing needs it, so it is
        // switched off, and the proxies' hot path does not pay for it.
        if (--inFlight === 0) providerStorage.disable();
      }
    },
    mountInteractions(router) {
      router.get(`${interactionPath}:uid`, async function resolveInteraction(ctx) {
        let details;
        try {
          details = await provider.interactionDetails(ctx.req, ctx.res);
        } catch {
          sendPage(ctx, 400, 'Sign-in expired', () => html`<div class="card"><h1>This sign-in has expired</h1><p>Return to the app and start again.</p></div>`);
          return;
        }
        const finish = async (result: Record<string, unknown>) => {
          const to = await provider.interactionResult(ctx.req, ctx.res, result, { mergeWithLastSubmission: false });
          ctx.status = 303;
          ctx.redirect(to);
          ctx.status = 303;
        };
        if (details.prompt.name === 'login') {
          const user = sessionUser(ctx, deps);
          if (!user) {
            ctx.redirect(`/ui/login?next=${encodeURIComponent(ctx.path)}`);
            return;
          }
          await finish({ login: { accountId: user.id, remember: false } });
          return;
        }
        if (details.prompt.name === 'consent') {
          const accountId = details.session?.accountId;
          const clientId = String(details.params.client_id);
          const requested = String(details.params.scope ?? '').split(' ').filter(Boolean);
          const grants = requested.filter((s) => s.startsWith(ACCESS_REQUEST_SCOPE_PREFIX));
          if (grants.length !== 1) {
            await finish({ error: 'invalid_scope', error_description: 'request exactly one scope_access_request:<id>' });
            return;
          }
          if (!accountId || !requests.approvedScopesFor(clientId, accountId).includes(grants[0])) {
            await finish({ error: 'access_denied', error_description: 'that access request is not approved for this app by this user' });
            return;
          }
          const grant = details.grantId ? await provider.Grant.find(details.grantId) : new provider.Grant({ accountId, clientId });
          if (!grant) {
            await finish({ error: 'access_denied', error_description: 'grant not found' });
            return;
          }
          grant.addResourceScope(audience, grants[0]);
          const oidcScopes = requested.filter((s) => s === 'openid' || s === 'offline_access');
          if (oidcScopes.length) grant.addOIDCScope(oidcScopes.join(' '));
          await finish({ consent: { grantId: await grant.save() } });
          return;
        }
        await finish({ error: 'access_denied', error_description: 'unsupported interaction' });
      });
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
