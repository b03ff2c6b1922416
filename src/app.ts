import type { IncomingMessage, ServerResponse } from 'node:http';
import os from 'node:os';
import Router from '@koa/router';
import Koa, { type Middleware } from 'koa';
import { HttpMethodEnum, koaBody } from 'koa-body';
import { z } from 'zod';
import { accessRequestRoutes } from './access-requests/routes.js';
import { appDisplayName } from './access-requests/client-kinds.js';
import { AccessRequestsService, type AppInfoLookup } from './access-requests/service.js';
import { BearerVerifier, EXTERNAL_ALGORITHMS, localKeys, remoteKeysFromDiscovery, requireAppRole, requireBearer, requireRoleEither } from './auth/bearer.js';
import { DEFAULT_LOGIN_LIMITS, LoginService } from './auth/login.js';
import { LoginLinks } from './auth/login-links.js';
import { INSTANCE_HEADER, LOCAL_LOGIN_LABEL, QUIET_HEADER } from './daemon-info.js';
import { metadataUrlFor, PROTECTED_RESOURCE_PATH, protectedResourceRoutes } from './auth/protected-resource.js';
import { authRoutes } from './auth/routes.js';
import { requireSession, sessionMiddleware } from './auth/sessions.js';
import { UsersService } from './auth/users.js';
import type { AppDeps, AppState } from './http/context.js';
import { appCors } from './http/cors.js';
import { limitPerGrant } from './http/grant-limits.js';
import { OpenStreams } from './http/open-streams.js';
import { bodyReadError, errorMiddleware } from './http/errors-middleware.js';
import { apiKeyRoutes } from './keys/routes.js';
import { ApiKeysService, ApiKeyVerifier } from './keys/service.js';
import { type AnyRouteDef, defineRoute, mountRoutes, routePathMatcher } from './http/route.js';
import { allowedHosts, allowedOrigins, hostCheck, sameOriginOnly, securityHeaders } from './http/security.js';
import { appMcpRoutes } from './mcp/app-routes.js';
import { McpInstancesService } from './mcp/instances.js';
import { mcpOriginRule } from './mcp/origin.js';
import { mcpInstanceRoutes } from './mcp/routes.js';
import { McpToolsService } from './mcp/tools.js';
import { callRoutes } from './mcp/call-routes.js';
import { HeldCalls } from './mcp/held-calls.js';
import { ToolPolicies } from './mcp/policies.js';
import { DesktopNotifier } from './notify/desktop.js';
import { mountCallsUi } from './ui/calls.js';
import { mountGrantToolsUi } from './ui/grant-tools.js';
import { ModelCatalog } from './models/catalog.js';
import { ModelDownloads, replicaOf } from './models/downloads.js';
import { modelAliasRoutes, modelDownloadRoutes } from './models/routes.js';
import { sweepOAuthState } from './oauth/adapter.js';
import { OAuthClientsService } from './oauth/clients.js';
import { loadSigningKeys } from './oauth/keys.js';
import { type AuthorizationServer, lazyAuthorizationServer, OAUTH_PREFIX } from './oauth/provider.js';
import { oauthClientRoutes } from './oauth/routes.js';
import { buildOpenApi } from './openapi/document.js';
import { swaggerUi } from './openapi/swagger.js';
import type { ActivityStore } from './activity/store.js';
import { enforceGrantLimits } from './activity/limits.js';
import { recordActivity } from './activity/recorder.js';
import { activityRoutes } from './activity/routes.js';
import { providerRoutes } from './providers/routes.js';
import { ProvidersService } from './providers/service.js';
import { proxyRoutes, unservedEndpoint } from './proxy/routes.js';
import { mountHomeUi } from './ui/home.js';
import { mountLoginUi } from './ui/login.js';
import { mountReviewUi } from './ui/review.js';
import { mountAppsUi } from './ui/apps.js';
import { signInPages } from './ui/sign-in.js';
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
  /** ends the open-ended streams in flight (MCP GET streams) at once, for a stop; answers how many */
  endOpenStreams(): number;
}

/** Wires every feature onto one Koa app; it is built once the daemon listens, so the base URL is known. */
export async function createApp(deps: AppDeps, opts: { sessionKeys: string[]; port: number; activity: ActivityStore }): Promise<App> {
  const koa = new Koa<AppState>({ proxy: false });
  const users = new UsersService(deps.repos, deps.clock);
  const login = new LoginService(users, deps.clock, deps.localLoginProof ?? deps.box.derive(LOCAL_LOGIN_LABEL), DEFAULT_LOGIN_LIMITS, deps.repos.loginFailures);
  const loginLinks = new LoginLinks(deps.clock);
  const instances = new McpInstancesService(deps.repos, deps.box, deps.clock);
  const clients = new OAuthClientsService(deps.repos, deps.box, deps.clock);
  const appInfo: AppInfoLookup = async (clientId) => {
    const key = await keys.appInfo(clientId);
    if (key) return key;
    const c = await clients.find(clientId);
    return c ? { name: appDisplayName(c.name), description: c.description ?? undefined, redirect_uris: c.redirect_uris, kind: c.kind ?? 'registered' } : undefined;
  };
  const { activity } = opts;
  const requests = new AccessRequestsService(
    deps.repos,
    deps.clock,
    deps.logger,
    appInfo,
    { draftsPerClient: deps.config.maxDraftsPerClient, drafts: deps.config.maxDrafts },
    (id) => activity.usageOf(id),
  );
  const keys = new ApiKeysService(deps.repos, requests, deps.clock);
  const mcpTools = new McpToolsService(deps.repos, instances, deps.clock, deps.config.mcpTimeoutMs);
  // A review waits for an instance's tool list at most this long; a call of a tool may wait the full timeout.
  const policies = new ToolPolicies(deps.repos, mcpTools, deps.clock, deps.logger, Math.min(5_000, deps.config.mcpTimeoutMs));
  const held = new HeldCalls(deps.clock, deps.logger, deps.config.callApprovalTimeoutS * 1000, deps.repos.heldCalls);
  const notifier = new DesktopNotifier({ enabled: deps.config.notify, logger: deps.logger });
  held.onHeld((c) => notifier.notify(`svc: ${c.app_name ?? c.app_client_id} wants to run ${c.tool}`, `On ${c.instance_name}. Approve or deny it at`, `${deps.baseUrl()}/ui/calls`));
  // A new draft (created and not changed since) is news for the person too.
  deps.repos.accessRequests.onChange((id, r) => {
    if (r?.status !== 'draft' || r.created_at !== r.updated_at) return;
    void appInfo(r.app_client_id).then(
      (info) => notifier.notify(`svc: ${info?.name ?? r.app_client_id} asks for access`, 'Review it at', `${deps.baseUrl()}/ui/apps/access-requests/review?id=${encodeURIComponent(id)}`),
      () => undefined,
    );
  });
  const providers = new ProvidersService(deps.repos, deps.box, deps.clock, deps.logger);
  const catalog = new ModelCatalog(deps.repos, deps.clock);
  const downloads = new ModelDownloads(deps.config.dataDir, deps.repos, deps.clock, deps.logger, {
    quotaBytes: deps.config.downloadQuotaBytes,
    allowNetworks: deps.config.downloadAllowNetworks,
    replica: deps.config.database ? replicaOf(os.hostname(), deps.config.dataDir) : undefined,
  });

  const { config } = deps;
  // An external issuer's tokens carry its one audience, so only the embedded issuer points hosts
  // at the per-resource documents.
  const metadataUrl = (path = '/') => (config.issuer ? `${deps.baseUrl()}${PROTECTED_RESOURCE_PATH}` : metadataUrlFor(deps.baseUrl(), path));
  let authorizationServer: AuthorizationServer | null = null;
  let verifier: BearerVerifier;
  if (config.issuer) {
    verifier = new BearerVerifier(
      { issuer: config.issuer, audience: config.audience ?? deps.baseUrl(), allowJwtTyp: config.allowJwtTyp, algorithms: EXTERNAL_ALGORITHMS, keys: remoteKeysFromDiscovery(config.issuer, (message) => deps.logger.warn({ issuer: config.issuer }, `cannot get the issuer's signing keys: ${message}`)) },
      deps.repos,
      deps.clock,
      metadataUrl,
    );
  } else {
    const keys = await loadSigningKeys(deps.repos, deps.box);
    verifier = new BearerVerifier(
      // only the access-token key: the RS256 ID-token key of the same issuer signs no access token
      { issuer: `${deps.baseUrl()}${OAUTH_PREFIX}`, audience: deps.baseUrl(), allowJwtTyp: false, algorithms: ['ES256'], keys: localKeys(keys.publicKeys), resourceBound: true },
      deps.repos,
      deps.clock,
      metadataUrl,
    );
    authorizationServer = lazyAuthorizationServer(deps, { clients, requests, instances, keys, cookieKeys: opts.sessionKeys, verifier, pages: signInPages });
  }
  const issuer = authorizationServer?.issuer ?? config.issuer!;
  const authenticateBearer = requireBearer(verifier, metadataUrl, new ApiKeyVerifier(deps.repos, deps.clock, metadataUrl));
  const perGrant = limitPerGrant({ calls: config.grantConcurrency, streams: config.grantStreams });
  const openStreams = new OpenStreams(config.maxStreams);
  const record = recordActivity(activity, deps.repos, deps.clock);
  const grantLimits = enforceGrantLimits(activity, deps.clock, deps.repos.grantUsage, (err) => deps.logger.warn({ err: err.message }, 'could not count a grant\'s tokens'));
  // Outermost the activity, which sees every refusal; then who the caller is, the person's limits
  // on the grant, and the concurrency every grant gets.
  const checked: Middleware<AppState> = (ctx, next) => authenticateBearer(ctx, () => grantLimits(ctx, () => perGrant(ctx, next)));
  const bearer: Middleware<AppState> = config.activity ? (ctx, next) => record(ctx, () => checked(ctx, next)) : checked;

  const hosts = allowedHosts(deps.baseUrl(), opts.port);
  const origins = allowedOrigins(hosts, deps.baseUrl());
  const mcpOriginAllowed = mcpOriginRule(origins, async (clientId) => (await clients.find(clientId))?.redirect_uris ?? null, Boolean(config.issuer));
  const sameOrigin = sameOriginOnly(origins);
  const session = requireSession(deps);
  const authenticateSession: Middleware<AppState> = (ctx, next) => sameOrigin(ctx, () => session(ctx, next));

  const routes: AnyRouteDef[] = [
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
    ...authRoutes(deps, users, login, sameOrigin, loginLinks),
    ...accessRequestRoutes(deps, requests, (u) => instances.listOwned(u), policies),
    ...apiKeyRoutes(deps, keys),
    ...mcpInstanceRoutes(instances, deps.baseUrl),
    ...oauthClientRoutes(clients),
    ...protectedResourceRoutes(deps, issuer),
    ...appMcpRoutes(instances, mcpTools, mcpOriginAllowed, deps.config.mcpTimeoutMs, openStreams, {
      policies,
      held,
      repos: deps.repos,
      appName: async (clientId) => (await appInfo(clientId))?.name ?? null,
    }),
    ...callRoutes(deps, held, policies),
    ...providerRoutes(providers),
    ...modelAliasRoutes(catalog),
    ...modelDownloadRoutes(downloads),
    ...proxyRoutes(deps, providers, catalog),
    ...activityRoutes(deps, activity, requests),
  ];
  let openApiDoc: Record<string, unknown> | null = null;
  const openApi = () => (openApiDoc ??= buildOpenApi(routes, { version: VERSION, serverUrl: deps.baseUrl() }));

  const router = new Router<AppState>();
  const either: Middleware<AppState> = (ctx, next) => (ctx.get('Authorization') ? bearer(ctx, next) : authenticateSession(ctx, next));
  // The data plane (the proxies apps call on every request) runs on its own lean stack: no
  // sessions, no body parser, no UI or OAuth middleware in its path. The rest is the control plane.
  // Each route declares its plane (RouteDef.plane); requests are sent to a plane by the same routes.
  const dataRoutes = routes.filter((r) => r.plane === 'data');
  const isDataPlane = routePathMatcher(dataRoutes);
  const guards = { bearer: requireAppRole, either: requireRoleEither };
  mountRoutes(router, routes.filter((r) => r.plane !== 'data'), { session: authenticateSession, bearer, either }, guards);
  const dataRouter = new Router<AppState>();
  mountRoutes(dataRouter, dataRoutes, { bearer }, guards);
  authorizationServer?.mountInteractions(router);
  router.get('/svc/v1/openapi.json', function serveOpenApi(ctx) {
    ctx.body = openApi();
  });
  router.get('/', function root(ctx) {
    ctx.redirect('/ui');
  });
  mountLoginUi(router, deps, login, sameOrigin, loginLinks);
  mountHomeUi(router, deps, requests, (u) => held.pendingCount(u));
  mountReviewUi(router, deps, requests, (u) => instances.listOwned(u), sameOrigin, policies);
  mountAppsUi(router, deps, requests, activity, (u) => instances.listOwned(u), sameOrigin);
  mountCallsUi(router, deps, held, sameOrigin);
  mountGrantToolsUi(router, deps, requests, policies, sameOrigin);

  // A cheap, unique-per-process request id (no randomness on the hot path).
  const idPrefix = `${process.pid.toString(36)}-${Date.now().toString(36)}-`;
  let requestCount = 0;
  const tagRequest: Middleware<AppState> = async function tagRequest(ctx, next) {
    ctx.state.requestId = idPrefix + (++requestCount).toString(36);
    // OpenAI answers carry it and its clients read it (`request_id`), so a person can match an
    // app's report to svc's log line; the proxies' own writeHead keeps it (Node merges the two).
    ctx.set('X-Request-Id', ctx.state.requestId);
    const started = performance.now();
    try {
      await next();
    } finally {
      // A line per request, naming the app, its grant and the model or tool (never content). The
      // review surfaces' own polling says so (QUIET_HEADER) and stays at debug.
      const grant = ctx.state.grant;
      const note = ctx.state.activity;
      const status = ctx.respond === false ? ctx.res.statusCode : ctx.status;
      deps.logger[ctx.get(QUIET_HEADER) ? 'debug' : 'info'](
        {
          requestId: ctx.state.requestId,
          method: ctx.method,
          path: ctx.path,
          status,
          ms: Math.round(performance.now() - started),
          ...(grant ? { app: grant.clientId, grant: grant.record.id.slice(0, 8) } : {}),
          ...(note?.model ? { model: note.model } : {}),
          ...(note?.tool ? { tool: note.tool } : {}),
        },
        'request',
      );
    }
  };
  const common: Middleware<AppState>[] = [tagRequest, errorMiddleware(deps.logger, deps.config.bodyLimit), securityHeaders, hostCheck(hosts), appCors];
  const dataPlane = new Koa<AppState>({ proxy: false });
  for (const mw of common) {
    koa.use(mw);
    dataPlane.use(mw);
  }
  dataPlane.use(dataRouter.routes());
  dataPlane.use(dataRouter.allowedMethods());
  dataPlane.use(unservedEndpoint(isDataPlane));
  const instanceId = deps.instanceId;
  if (instanceId) {
    koa.use(function nameInstance(ctx, next) {
      ctx.set(INSTANCE_HEADER, instanceId);
      return next();
    });
  }
  if (authorizationServer) koa.use(authorizationServer.middleware);
  koa.use(swaggerUi('/svc/v1/openapi.json'));
  const parseBody = koaBody({
    json: true,
    urlencoded: false,
    text: false,
    multipart: false,
    jsonStrict: true,
    jsonLimit: deps.config.bodyLimit,
    formLimit: 64 * 1024,
    parsedMethods: [HttpMethodEnum.POST, HttpMethodEnum.PUT, HttpMethodEnum.PATCH, HttpMethodEnum.DELETE],
    onError: bodyReadError,
  }) as unknown as Middleware<AppState>;
  // Forms are for the browser pages only; every API body is JSON.
  const parseForms = koaBody({ json: false, urlencoded: true, text: false, multipart: false, formLimit: 64 * 1024, onError: bodyReadError }) as unknown as Middleware<AppState>;
  koa.use(function parseBodies(ctx, next) {
    return ctx.path.startsWith('/ui/') ? parseForms(ctx, next) : parseBody(ctx, next);
  });
  koa.use(sessionMiddleware(koa, deps, opts.sessionKeys));
  koa.use(router.routes());
  koa.use(router.allowedMethods());

  // Koa's default error logger prints stacks to stderr; ours logs a line (a client that hung up is routine).
  for (const app of [koa, dataPlane]) {
    app.silent = true;
    app.on('error', (err: NodeJS.ErrnoException) => {
      // HPE_INVALID_EOF_STATE: the client closed while its body was still coming.
      const routine = err?.code === 'ECONNRESET' || err?.code === 'EPIPE' || err?.code === 'ERR_STREAM_PREMATURE_CLOSE' || err?.code === 'HPE_INVALID_EOF_STATE' || /premature close|aborted/i.test(err?.message ?? '');
      deps.logger[routine ? 'debug' : 'warn']({ err: err?.message, code: err?.code }, 'response error');
    });
  }
  const control = koa.callback();
  const data = dataPlane.callback();
  const callback = (req: IncomingMessage, res: ServerResponse) => {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    // every /v1 path is the OpenAI surface's: one svc does not proxy gets an OpenAI-shaped 404 there
    return isDataPlane(path) || path === '/v1' || path.startsWith('/v1/') ? data(req, res) : control(req, res);
  };
  await downloads.resumeAll();
  // Retention, so the store holds the present and not all of history: at start, then hourly.
  const retention: [string, () => Promise<number>][] = [
    ['finished and revoked access requests', () => requests.sweep(config.requestRetentionDays, config.revokedRetentionDays)],
    ['unused self-registered OAuth clients', () => clients.sweepDynamic(config.dynamicClientRetentionDays)],
    ['dead refresh tokens and grants', () => sweepOAuthState(deps.repos, deps.clock(), 10 * 60 * 1000)],
    ['activity events past their bounds', () => activity.dropOld()],
  ];
  const sweep = async () => {
    for (const [what, run] of retention) {
      await run().then(
        (n) => n && deps.logger.info({ removed: n }, `retention: removed ${what}`),
        (err: Error) => deps.logger.warn({ err: err.message }, `retention: could not remove ${what}`),
      );
    }
  };
  const sweeping = setInterval(sweep, 60 * 60 * 1000);
  sweeping.unref();
  await sweep();
  return {
    koa,
    callback,
    users,
    requests,
    instances,
    clients,
    verifier,
    issuer,
    routes,
    openApi,
    close: async () => {
      clearInterval(sweeping);
      held.failAll('svc stopped');
      await downloads.stop();
      await activity.close();
    },
    // A held call never outlives this process: at a stop its app is told at once, and it cannot run later.
    endOpenStreams: () => openStreams.endAll() + held.failAll('svc stopped'),
  };
}
