import type Router from '@koa/router';
import type { Middleware } from 'koa';
import mount from 'koa-mount';
// oidc-provider offers no switch for the AsyncLocalStorage it keeps its request in, so this
// reaches into one of its private files; package.json pins its exact version for that reason.
import providerStorage from 'oidc-provider/lib/helpers/als.js';
import type { AccessRequestsService } from '../access-requests/service.js';
import type { BearerVerifier } from '../auth/bearer.js';
import type { AppDeps, AppState } from '../http/context.js';
import { RateLimiter } from '../http/rate-limit.js';
import type { McpInstancesService } from '../mcp/instances.js';
import { createAdapterClass } from './adapter.js';
import { type OAuthClientsService, TOKEN_EXCHANGE_GRANT } from './clients.js';
import { providerConfiguration } from './configuration.js';
import { authorizationServerFrontDoor } from './front-door.js';
import * as tokenExchange from './grants/token-exchange.js';
import { interactionResolver, type SignInPages, signInPolicy, waitingInteractions } from './interactions.js';
import { withIdTokenKey } from './keys.js';
import { loadOidcProvider, type OidcCtx, withQuietConsole } from './load.js';
import { INTERACTION_PATH, isAuthorizationServerPath, OAUTH_PREFIX } from './paths.js';
import { resourceTargets } from './resource-indicators.js';

export { AS_METADATA_PATH, OAUTH_PREFIX } from './paths.js';
export type { SignInPages } from './interactions.js';

export interface AuthorizationServer {
  issuer: string;
  /** mounted in front of the body parser: oidc-provider reads its own request bodies */
  middleware: Middleware<AppState>;
  mountInteractions(router: Router<AppState>): void;
}

type AuthorizationServerOptions = Parameters<typeof createAuthorizationServer>[1];
/** the built server also hands out its interaction handler, for the lazy one to call */
type BuiltAuthorizationServer = AuthorizationServer & { interaction: Middleware<AppState> };

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
 * on the review page, so there is no second consent screen. Each concern lives in a module of its
 * own (configuration, resource indicators, token claims, the token-exchange grant, interactions,
 * the front door); this composes them.
 */
export async function createAuthorizationServer(
  deps: AppDeps,
  opts: {
    clients: OAuthClientsService;
    requests: AccessRequestsService;
    instances: McpInstancesService;
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
  const targetOf = resourceTargets(base, instances, errors);
  const policy = signInPolicy(interactionPolicy);

  /** Ends a grant and every token of it: its access request is no longer approved. */
  const endTokenFamily = async (grantId: string) => {
    for (const model of ['RefreshToken', 'AuthorizationCode', 'AccessToken']) await new Adapter(model).revokeByGrantId(grantId);
    await new Adapter('Grant').destroy(grantId);
  };

  const requestAddress = () => (providerStorage.getStore() as { ip?: string } | undefined)?.ip;
  // On a team server the next step of an authorization may reach another replica: all of it is stored.
  const replayed = async (grantId: string | undefined): Promise<never> => {
    if (grantId) await endTokenFamily(grantId);
    throw new errors.InvalidGrant('this code or refresh token was already used');
  };
  const Adapter = createAdapterClass(deps.repos, deps.box, clients, deps.clock, requestAddress, { shared: config.database !== null, replayed });
  const registrations = new RateLimiter(config.rateLimitRegistration, 60_000, deps.clock);
  const keys = await withIdTokenKey(deps.repos, deps.box);
  const configuration = { deps, adapter: Adapter, keys, cookieKeys: opts.cookieKeys, base, audience, requests, pages, errors, policy, targetOf, endTokenFamily };
  const provider = await withQuietConsole(deps.logger, () => new Provider(issuer, providerConfiguration(configuration)));
  provider.on('server_error', (_ctx: unknown, err: Error) => deps.logger.error({ err: err.message, source: 'oidc-provider' }, 'authorization server error'));

  provider.registerGrantType(TOKEN_EXCHANGE_GRANT, tokenExchange.handler({ base, audience, verifier, requests, targetOf, errors }), tokenExchange.parameters);

  // oidc-provider 9's Provider is the Koa app itself (its `.app` getter only warns that it is deprecated).
  const mounted = mount(OAUTH_PREFIX, provider as never) as unknown as Middleware<AppState>;

  // A self-registered client is kept while it gets tokens (one without any for 30 days goes). Only a
  // token counts: an authorization request costs nothing to send, so it would keep any flood alive.
  const touch = (ctx: OidcCtx) => {
    const clientId = ctx?.oidc?.client?.clientId;
    if (clientId) clients.touch(clientId).catch((err: Error) => deps.logger.warn({ err: err.message }, 'could not mark an OAuth client used'));
  };
  provider.on('grant.success', touch);

  const middleware = authorizationServerFrontDoor({
    mounted,
    clients,
    registrations,
    config,
    // oidc-provider keeps its request in an AsyncLocalStorage; once one was used, Node 20
    // tracks every promise of the process. Between OAuth requests nothing needs it, so it is
    // switched off, and the proxies' hot path does not pay for it.
    onIdle: () => providerStorage.disable(),
  });
  const waiting = waitingInteractions(deps.clock);
  const resolveInteraction = interactionResolver({ deps, provider, clients, requests, instances, pages, targetOf, waiting, base, audience });

  return {
    issuer,
    middleware,
    interaction: resolveInteraction,
    mountInteractions(router) {
      router.get(`${INTERACTION_PATH}:uid`, resolveInteraction);
    },
  };
}
