import { randomUUID } from 'node:crypto';
import Router from '@koa/router';
import Koa, { type Middleware } from 'koa';
import { HttpMethodEnum, koaBody } from 'koa-body';
import { koaSwagger } from 'koa2-swagger-ui';
import { accessRequestRoutes } from './access-requests/routes.js';
import { AccessRequestsService, type AppInfoLookup } from './access-requests/service.js';
import { LoginService } from './auth/login.js';
import { authRoutes } from './auth/routes.js';
import { requireSession, sessionMiddleware } from './auth/sessions.js';
import { UsersService } from './auth/users.js';
import type { AppDeps, AppState } from './http/context.js';
import { appCors } from './http/cors.js';
import { errorMiddleware } from './http/errors-middleware.js';
import { type AnyRouteDef, defineRoute, mountRoutes } from './http/route.js';
import { z } from 'zod';
import { allowedHosts, allowedOrigins, hostCheck, sameOriginOnly, securityHeaders } from './http/security.js';
import { McpInstancesService } from './mcp/instances.js';
import { mcpInstanceRoutes } from './mcp/routes.js';
import { buildOpenApi } from './openapi/document.js';
import { mountHomeUi } from './ui/home.js';
import { mountLoginUi } from './ui/login.js';
import { VERSION } from './version.js';

const healthResponse = z.object({ status: z.literal('ok'), version: z.string() });

export interface App {
  koa: Koa<AppState>;
  users: UsersService;
  requests: AccessRequestsService;
  instances: McpInstancesService;
  routes: AnyRouteDef[];
  openApi: () => Record<string, unknown>;
}

/** Wires every feature onto one Koa app. `port` is read lazily: it is known only once listening. */
export function createApp(deps: AppDeps, opts: { sessionKeys: string[]; port: () => number; appInfo?: AppInfoLookup }): App {
  const koa = new Koa<AppState>({ proxy: false });
  const users = new UsersService(deps.store, deps.clock);
  const login = new LoginService(users, deps.clock);
  const instances = new McpInstancesService(deps.store, deps.box, deps.clock);
  const requests = new AccessRequestsService(deps.store, deps.clock, deps.logger, opts.appInfo);

  let hosts: Set<string> | null = null;
  let origins: Set<string> | null = null;
  const hostSet = () => (hosts ??= allowedHosts(deps.baseUrl(), opts.port()));
  const originSet = () => (origins ??= allowedOrigins(hostSet(), deps.baseUrl()));
  const sameOrigin = sameOriginOnly(originSet);
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
    ...authRoutes(deps, users, login, sameOrigin),
    ...accessRequestRoutes(deps, requests, (u) => instances.listOwned(u)),
    ...mcpInstanceRoutes(instances),
  ];
  let openApiDoc: Record<string, unknown> | null = null;
  const openApi = () => (openApiDoc ??= buildOpenApi(routes, { version: VERSION, serverUrl: deps.baseUrl() }));

  const router = new Router<AppState>();
  mountRoutes(router, routes, { session: authenticateSession });
  router.get('/svc/v1/openapi.json', function serveOpenApi(ctx) {
    ctx.body = openApi();
  });
  router.get('/', function root(ctx) {
    ctx.redirect('/ui');
  });
  mountLoginUi(router, deps, login, sameOrigin);
  mountHomeUi(router, deps, requests);

  koa.use(async function tagRequest(ctx, next) {
    ctx.state.requestId = randomUUID();
    const started = performance.now();
    try {
      await next();
    } finally {
      deps.logger.debug({ requestId: ctx.state.requestId, method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round(performance.now() - started) }, 'request');
    }
  });
  koa.use(errorMiddleware(deps.logger, deps.config.bodyLimit));
  koa.use(securityHeaders);
  koa.use(hostCheck(hostSet));
  koa.use(appCors);
  koa.use(
    koaSwagger({
      routePrefix: '/swagger-ui',
      title: 'svc API',
      swaggerOptions: { url: '/svc/v1/openapi.json' },
    }) as unknown as Middleware<AppState>,
  );
  koa.use(
    koaBody({
      json: true,
      urlencoded: true,
      text: false,
      multipart: false,
      jsonStrict: true,
      jsonLimit: deps.config.bodyLimit,
      formLimit: 64 * 1024,
      parsedMethods: [HttpMethodEnum.POST, HttpMethodEnum.PUT, HttpMethodEnum.PATCH, HttpMethodEnum.DELETE],
    }) as unknown as Middleware<AppState>,
  );
  koa.use(sessionMiddleware(koa, deps, opts.sessionKeys));
  koa.use(router.routes());
  koa.use(router.allowedMethods());

  return { koa, users, requests, instances, routes, openApi };
}
