import type { IncomingMessage, ServerResponse } from 'node:http';
import type Router from '@koa/router';
import type Koa from 'koa';
import type { Middleware } from 'koa';
import { z } from 'zod';
import { accessRequestRoutes } from './access-requests/routes.js';
import type { AccessRequestsService } from './access-requests/service.js';
import { activityRoutes } from './activity/routes.js';
import type { ActivityStore } from './activity/store.js';
import { bearerChain, createTokenAuth } from './app/token-auth.js';
import { commonMiddleware, controlPlaneApp, dataPlaneApp, dispatchByPlane, logResponseErrors, routersByPlane } from './app/planes.js';
import { startRetention } from './app/retention.js';
import { createServices, type Services } from './app/services.js';
import type { BearerVerifier } from './auth/bearer.js';
import { protectedResourceRoutes } from './auth/protected-resource.js';
import { authRoutes } from './auth/routes.js';
import { requireSession } from './auth/sessions.js';
import type { UsersService } from './auth/users.js';
import type { AppDeps, AppState } from './http/context.js';
import { OpenStreams } from './http/open-streams.js';
import { type AnyRouteDef, defineRoute } from './http/route.js';
import { allowedHosts, allowedOrigins, sameOriginOnly } from './http/security.js';
import { apiKeyRoutes } from './keys/routes.js';
import { appMcpRoutes } from './mcp/app-routes.js';
import { callRoutes } from './mcp/call-routes.js';
import type { McpInstancesService } from './mcp/instances.js';
import type { CommandSupervisor } from './mcp/command/supervisor.js';
import { mcpOriginRule } from './mcp/origin.js';
import { mcpInstanceRoutes } from './mcp/routes.js';
import { mountUpstreamOAuthUi, upstreamOAuthRoutes } from './mcp/upstream-oauth/routes.js';
import { MCP_EVENT_IDS_LABEL, MCP_SESSION_IDS_LABEL, SessionIds } from './mcp/session-ids.js';
import { modelAliasRoutes, modelDownloadRoutes } from './models/routes.js';
import type { OAuthClientsService } from './oauth/clients.js';
import type { AuthorizationServer } from './oauth/provider.js';
import { oauthClientRoutes } from './oauth/routes.js';
import { buildOpenApi } from './openapi/document.js';
import { providerRoutes } from './providers/routes.js';
import { messagesErrorShape, proxyRoutes, unservedEndpoint } from './proxy/routes.js';
import { mountAppsUi } from './ui/apps.js';
import { mountCallsUi } from './ui/calls.js';
import { mountGrantToolsUi } from './ui/grant-tools.js';
import { mountHomeUi } from './ui/home.js';
import { mountLoginUi } from './ui/login.js';
import { mountReviewUi } from './ui/review.js';
import { VERSION } from './version.js';

const healthResponse = z.object({ status: z.literal('ok'), version: z.string() });

export interface App {
  koa: Koa<AppState>;
  /** the daemon's request handler: the data plane for the proxies, the control plane for the rest */
  callback: (req: IncomingMessage, res: ServerResponse) => void;
  clients: OAuthClientsService;
  verifier: BearerVerifier;
  /** the issuer whose tokens this daemon accepts: its own `<base>/oauth`, or --issuer */
  issuer: string;
  users: UsersService;
  requests: AccessRequestsService;
  instances: McpInstancesService;
  routes: AnyRouteDef[];
  openApi: () => Record<string, unknown>;
  /** stops background work (downloads); they resume at the next start */
  close(): Promise<void>;
  /** the command servers' processes running now (`svc status`) */
  commandProcesses(): number;
  /** ends the open-ended streams in flight (MCP GET streams) at once, for a stop; answers how many */
  endOpenStreams(): number;
}

/** Wires every feature onto one Koa app; it is built once the daemon listens, so the base URL is known. */
export async function createApp(
  deps: AppDeps,
  opts: { sessionKeys: string[]; port: number; activity: ActivityStore; supervisor?: CommandSupervisor },
): Promise<App> {
  const services = await createServices(deps, opts.activity, opts.supervisor);
  const auth = await createTokenAuth(deps, services, opts.sessionKeys);
  const bearer = bearerChain(deps, auth, services);
  const openStreams = new OpenStreams(deps.config.maxStreams);
  const browser = browserGuards(deps, opts.port, services);
  const routes = apiRoutes(deps, services, { issuer: auth.issuer, sameOrigin: browser.sameOrigin, mcpOriginAllowed: browser.mcpOriginAllowed, openStreams });
  let openApiDoc: Record<string, unknown> | null = null;
  const openApi = () => (openApiDoc ??= buildOpenApi(routes, { version: VERSION, serverUrl: deps.baseUrl() }));

  const planes = routersByPlane(routes, { session: browser.authenticateSession, bearer });
  const { router, isDataPlane } = planes;
  mountControlExtras(router, auth.authorizationServer, openApi);
  mountPages(router, deps, services, browser.sameOrigin);
  const common = commonMiddleware(deps.logger, deps.config.bodyLimit, browser.hosts, [messagesErrorShape]);
  const dataPlane = dataPlaneApp(common, planes, unservedEndpoint(isDataPlane));
  const koa = controlPlaneApp(deps, common, router, { authorizationServer: auth.authorizationServer, sessionKeys: opts.sessionKeys });
  logResponseErrors([koa, dataPlane], deps.logger);
  const callback = dispatchByPlane(koa, dataPlane, isDataPlane);
  await services.downloads.resumeAll();
  const stopRetention = await startRetention(deps, services);
  const { users, requests, instances, clients, held, downloads, activity } = services;
  return {
    koa,
    callback,
    users,
    requests,
    instances,
    clients,
    verifier: auth.verifier,
    issuer: auth.issuer,
    routes,
    openApi,
    close: async () => {
      stopRetention();
      held.failAll('svc stopped');
      await downloads.stop();
      await activity.close();
    },
    commandProcesses: () => services.commands?.totalLive() ?? 0,
    // A held call never outlives this process: at a stop its app is told at once, and it cannot run later.
    endOpenStreams: () => openStreams.endAll() + held.failAll('svc stopped'),
  };
}

/** What keeps a browser page to this daemon's own hosts and origins, and a session's calls to its own pages. */
function browserGuards(deps: AppDeps, port: number, { clients }: Services) {
  const hosts = allowedHosts(deps.baseUrl(), port);
  const origins = allowedOrigins(hosts, deps.baseUrl());
  const mcpOriginAllowed = mcpOriginRule(origins, async (clientId) => (await clients.find(clientId))?.redirect_uris ?? null, Boolean(deps.config.issuer));
  const sameOrigin = sameOriginOnly(origins);
  const session = requireSession(deps);
  const authenticateSession: Middleware<AppState> = (ctx, next) => sameOrigin(ctx, () => session(ctx, next));
  return { hosts, mcpOriginAllowed, sameOrigin, authenticateSession };
}

/** Every API route of svc, each defined once: it is mounted, validated and documented from here. */
function apiRoutes(
  deps: AppDeps,
  s: Services,
  opts: { issuer: string; sameOrigin: Middleware<AppState>; mcpOriginAllowed: ReturnType<typeof mcpOriginRule>; openStreams: OpenStreams },
): AnyRouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/svc/v1/health',
      operationId: 'health',
      summary: 'Liveness and version',
      tags: ['meta'],
      auth: 'none',
      responses: { 200: { description: 'Running', schema: healthResponse } },
      handler: () => ({ status: 'ok' as const, version: VERSION }),
    }),
    ...authRoutes(deps, s.users, s.login, opts.sameOrigin, s.loginLinks),
    ...accessRequestRoutes(deps, s.requests, (u) => s.instances.listOwned(u), s.policies),
    ...apiKeyRoutes(deps, s.keys),
    ...mcpInstanceRoutes(s.instances, deps.baseUrl),
    ...upstreamOAuthRoutes(s.instances, s.upstreamOAuth),
    ...oauthClientRoutes(s.clients),
    ...protectedResourceRoutes(deps, opts.issuer),
    ...appMcpRoutes(s.instances, s.mcpTools, opts.mcpOriginAllowed, deps.config.mcpTimeoutMs, opts.openStreams, {
      policies: s.policies,
      held: s.held,
      repos: deps.repos,
      appName: async (clientId) => (await s.appInfo(clientId))?.name ?? null,
      sessions: new SessionIds(deps.box.derive(MCP_SESSION_IDS_LABEL)),
      events: new SessionIds(deps.box.derive(MCP_EVENT_IDS_LABEL)),
    }, s.commands),
    ...callRoutes(deps, s.held, s.policies),
    ...providerRoutes(s.providers),
    ...modelAliasRoutes(s.catalog),
    ...modelDownloadRoutes(s.downloads),
    ...proxyRoutes(deps, s.providers, s.catalog),
    ...activityRoutes(deps, s.activity, s.requests),
  ];
}

/** The control plane's routes that are not API routes: the OAuth interactions, the OpenAPI document, the root. */
function mountControlExtras(router: Router<AppState>, authorizationServer: AuthorizationServer | null, openApi: () => Record<string, unknown>): void {
  authorizationServer?.mountInteractions(router);
  router.get('/svc/v1/openapi.json', function serveOpenApi(ctx) {
    ctx.body = openApi();
  });
  router.get('/', function root(ctx) {
    ctx.redirect('/ui');
  });
}

/** The person's browser pages. */
function mountPages(router: Router<AppState>, deps: AppDeps, s: Services, sameOrigin: Middleware<AppState>): void {
  mountLoginUi(router, deps, s.login, sameOrigin, s.loginLinks);
  mountHomeUi(router, deps, s.requests, (u) => s.held.pendingCount(u));
  mountReviewUi(router, deps, s.requests, (u) => s.instances.listOwned(u), sameOrigin, s.policies);
  mountAppsUi(router, deps, s.requests, s.activity, (u) => s.instances.listOwned(u), sameOrigin);
  mountCallsUi(router, deps, s.held, sameOrigin);
  mountGrantToolsUi(router, deps, s.requests, s.policies, sameOrigin);
  mountUpstreamOAuthUi(router, deps, s.instances, s.upstreamOAuth);
}
