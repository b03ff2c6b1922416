import type { IncomingMessage, ServerResponse } from 'node:http';
import Router from '@koa/router';
import Koa, { type Middleware } from 'koa';
import { requireAppRole, requireRoleEither } from '../auth/bearer.js';
import { sessionMiddleware } from '../auth/sessions.js';
import { INSTANCE_HEADER } from '../daemon-info.js';
import type { AppDeps, AppState, ErrorShape } from '../http/context.js';
import { addressFromProxy } from '../http/client-address.js';
import { errorMiddleware } from '../http/errors-middleware.js';
import { type AnyRouteDef, exactRouteDispatch, mountRoutes, routePathMatcher } from '../http/route.js';
import { guardRequests } from '../http/security.js';
import type { Logger } from '../log.js';
import type { AuthorizationServer } from '../oauth/provider.js';
import { swaggerUi } from '../openapi/swagger.js';
import { parseBodies } from './body.js';
import { tagAndLogRequests } from './request-log.js';

/** How a route's declared `auth` is checked. */
export interface Authenticators {
  session: Middleware<AppState>;
  bearer: Middleware<AppState>;
}

/** The routes mounted on the router of their plane, and which paths belong to the data plane. */
export interface PlaneRouters {
  router: Router<AppState>;
  dataRouter: Router<AppState>;
  /** the data plane's routes of a fixed path, dispatched before its router (exactRouteDispatch) */
  exactData: Middleware<AppState>;
  isDataPlane: (path: string) => boolean;
}

/**
 * The data plane (the proxies apps call on every request) runs on its own lean stack: no
 * sessions, no body parser, no UI or OAuth middleware in its path. The rest is the control plane.
 * Each route declares its plane (RouteDef.plane); requests are sent to a plane by the same routes.
 */
export function routersByPlane(routes: AnyRouteDef[], { session, bearer }: Authenticators): PlaneRouters {
  const router = new Router<AppState>();
  const either: Middleware<AppState> = (ctx, next) => (ctx.get('Authorization') ? bearer(ctx, next) : session(ctx, next));
  const dataRoutes = routes.filter((r) => r.plane === 'data');
  const isDataPlane = routePathMatcher(dataRoutes);
  const guards = { bearer: requireAppRole, either: requireRoleEither };
  mountRoutes(router, routes.filter((r) => r.plane !== 'data'), { session, bearer, either }, guards);
  // Case-sensitive, as the endpoints themselves are: the activity, the limits and the error
  // shapes know an endpoint by its exact path, so a router that also took `/v1/Chat/Completions`
  // served calls that none of them saw.
  const dataRouter = new Router<AppState>({ sensitive: true });
  mountRoutes(dataRouter, dataRoutes, { bearer }, guards);
  return { router, dataRouter, exactData: exactRouteDispatch(dataRoutes, { bearer }, guards), isDataPlane };
}

/** What every request passes first, on either plane. */
export function commonMiddleware(logger: Logger, bodyLimit: number, hosts: Set<string>, errorShapes: ErrorShape[] = []): Middleware<AppState>[] {
  // a path's own error shape is known before anything can fail
  return [tagAndLogRequests(logger, errorShapes), errorMiddleware(logger, bodyLimit), guardRequests(hosts)];
}

/** The lean stack of the proxies; `lastStop` answers a path no route serves. */
export function dataPlaneApp(common: Middleware<AppState>[], { dataRouter, exactData }: Pick<PlaneRouters, 'dataRouter' | 'exactData'>, lastStop: Middleware<AppState>): Koa<AppState> {
  const dataPlane = new Koa<AppState>({ proxy: false });
  for (const mw of common) dataPlane.use(mw);
  dataPlane.use(exactData);
  dataPlane.use(dataRouter.routes());
  dataPlane.use(dataRouter.allowedMethods());
  dataPlane.use(lastStop);
  return dataPlane;
}

/** The control plane's stack: the OAuth server, Swagger UI, bodies, sessions, then its routes and pages. */
export function controlPlaneApp(
  deps: AppDeps,
  common: Middleware<AppState>[],
  router: Router<AppState>,
  opts: { authorizationServer: AuthorizationServer | null; sessionKeys: string[] },
): Koa<AppState> {
  const koa = new Koa<AppState>({ proxy: false });
  // the data plane counts nothing per address; the control plane's limits do
  if (deps.config.trustProxy) koa.use(addressFromProxy());
  for (const mw of common) koa.use(mw);
  const instanceId = deps.instanceId;
  if (instanceId) {
    koa.use(function nameInstance(ctx, next) {
      ctx.set(INSTANCE_HEADER, instanceId);
      return next();
    });
  }
  if (opts.authorizationServer) koa.use(opts.authorizationServer.middleware);
  koa.use(swaggerUi('/svc/v1/openapi.json'));
  koa.use(parseBodies(deps.config.bodyLimit));
  koa.use(sessionMiddleware(koa, deps, opts.sessionKeys));
  koa.use(router.routes());
  koa.use(router.allowedMethods());
  return koa;
}

/** Koa's default error logger prints stacks to stderr; ours logs a line (a client that hung up is routine). */
export function logResponseErrors(apps: Koa<AppState>[], logger: Logger): void {
  for (const app of apps) {
    app.silent = true;
    app.on('error', (err: NodeJS.ErrnoException) => {
      // HPE_INVALID_EOF_STATE: the client closed while its body was still coming.
      const routine = err?.code === 'ECONNRESET' || err?.code === 'EPIPE' || err?.code === 'ERR_STREAM_PREMATURE_CLOSE' || err?.code === 'HPE_INVALID_EOF_STATE' || /premature close|aborted/i.test(err?.message ?? '');
      logger[routine ? 'debug' : 'warn']({ err: err?.message, code: err?.code }, 'response error');
    });
  }
}

/** The daemon's request handler: the data plane for the proxies, the control plane for the rest. */
export function dispatchByPlane(control: Koa<AppState>, dataPlane: Koa<AppState>, isDataPlane: (path: string) => boolean) {
  const controlHandler = control.callback();
  const data = dataPlane.callback();
  return (req: IncomingMessage, res: ServerResponse) => {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    // every /v1 path is the OpenAI surface's: one svc does not proxy gets an OpenAI-shaped 404 there
    return isDataPlane(path) || path === '/v1' || path.startsWith('/v1/') ? data(req, res) : controlHandler(req, res);
  };
}
