import type Router from '@koa/router';
import type { Middleware } from 'koa';
import type { z } from 'zod';
import type { AppContext, AppState } from './context.js';
import { parseOrThrow } from './validate.js';
import type { AppRole } from '../store/vocabulary.js';

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';
/** `either`: a Bearer token when an Authorization header is present, else the session. */
export type AuthMode = 'none' | 'session' | 'bearer' | 'either';

type Infer<S> = S extends z.ZodType ? z.output<S> : undefined;

export interface ResponseDoc {
  description: string;
  schema?: z.ZodType;
  contentType?: string;
}

/**
 * One endpoint: its schemas validate the request, type the handler's input and generate the
 * OpenAPI document, so the three can never drift apart.
 */
export interface RouteDef<B extends z.ZodType | undefined = undefined, Q extends z.ZodType | undefined = undefined, P extends z.ZodType | undefined = undefined> {
  method: HttpMethod;
  /** OpenAPI-style path: /svc/v1/things/{id} */
  path: string;
  /** the router's path when it differs from `path`, e.g. `/v1/models/*id` for an id that may hold slashes */
  mountPath?: string;
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  auth: AuthMode;
  /**
   * `data`: a call apps make on every request (the proxies), served on the lean stack with no
   * sessions, body parser, UI or OAuth middleware. Default: the control plane.
   */
  plane?: 'data';
  /** for bearer routes: the least grant role (default scope_user_user) */
  appRole?: AppRole;
  body?: B;
  /** the handler reads and validates the body itself (streaming proxies); `body` then only documents it */
  rawBody?: boolean;
  query?: Q;
  params?: P;
  responses: Record<number, ResponseDoc>;
  /** error statuses this endpoint can answer, documented with the shared error schema */
  errors?: number[];
  /**
   * The answer is a stream with no end of its own (the MCP GET stream): it counts against a
   * grant's open streams rather than its calls in flight, and ends at once when svc stops.
   */
  stream?: boolean;
  /** runs before validation, e.g. rate limiting */
  before?: Middleware<AppState>[];
  handler: (ctx: AppContext, input: { body: Infer<B>; query: Infer<Q>; params: Infer<P> }) => Promise<unknown> | unknown;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyRouteDef = RouteDef<any, any, any>;

export function defineRoute<B extends z.ZodType | undefined = undefined, Q extends z.ZodType | undefined = undefined, P extends z.ZodType | undefined = undefined>(
  def: RouteDef<B, Q, P>,
): RouteDef<B, Q, P> {
  return def;
}

export const koaPath = (openApiPath: string) => openApiPath.replace(/\{([^}]+)\}/g, ':$1');

/** Marks a request the router matched to a stream route, for what runs after it (grant limits, the proxy). */
const markStream: Middleware<AppState> = function markStream(ctx, next) {
  ctx.state.stream = true;
  return next();
};

/** The role check of a route's auth mode, given the least role it needs (supplied by auth/, which http/ does not know). */
export type RoleGuards = Partial<Record<'bearer' | 'either', (role: AppRole) => Middleware<AppState>>>;

/** A route's middleware as it runs: stream mark, its own `before`, authentication, the role check, then validation and the handler. */
function routeChain(route: AnyRouteDef, authenticate: Partial<Record<AuthMode, Middleware<AppState>>>, guards: RoleGuards): Middleware<AppState>[] {
  const auth = authenticate[route.auth];
  if (route.auth !== 'none' && !auth) throw new Error(`no authenticator for ${route.auth} (${route.operationId})`);
  const stack: Middleware<AppState>[] = [...(route.stream ? [markStream] : []), ...(route.before ?? []), ...(auth ? [auth] : [])];
  if (route.auth === 'bearer' || route.auth === 'either') {
    const guard = guards[route.auth];
    if (!guard) throw new Error(`no role guard for ${route.auth} (${route.operationId})`);
    stack.push(guard(route.appRole ?? 'scope_user_user'));
  }
  const parseParams = route.params ? paramsParser(route.params) : undefined;
  const handle: Middleware<AppState> = async function validateAndHandle(ctx) {
    const input = {
      params: parseParams ? parseParams(ctx.params) : undefined,
      query: route.query ? parseOrThrow(route.query, ctx.query, 'query') : undefined,
      body: route.body && !route.rawBody ? parseOrThrow(route.body, (ctx.request as { body?: unknown }).body, 'body') : undefined,
    };
    const result = await route.handler(ctx as AppContext, input as never);
    if (result !== undefined) ctx.body = result;
  };
  return [...stack, handle];
}

/** How many parameter values a route keeps the parse of; past it they are forgotten all at once. */
const PARAMS_REMEMBERED = 256;
/** A value longer than this is parsed every time, never kept, so what a route keeps stays small. */
const PARAM_REMEMBERED_CHARS = 200;

/**
 * A route's path parameters parsed by its schema, the parse of a path with one parameter kept
 * for the next request with the same value. The MCP proxy's calls all name the same few
 * instances, and the parse is the call's only one by zod: done cold on every call it cost more
 * than the rest of the check (docs/performance.md). Only a value the schema accepted is kept, its
 * output is frozen (no handler changes it for the next), and the map is bounded in count and size.
 */
function paramsParser(schema: z.ZodType): (value: unknown) => unknown {
  const seen = new Map<string, unknown>();
  return function parseParams(value) {
    const names = value && typeof value === 'object' ? Object.keys(value) : [];
    const only = names.length === 1 ? (value as Record<string, unknown>)[names[0]] : undefined;
    if (typeof only !== 'string' || only.length > PARAM_REMEMBERED_CHARS) return parseOrThrow(schema, value, 'path');
    const key = `${names[0]}=${only}`;
    const known = seen.get(key);
    if (known !== undefined) return known;
    const parsed = parseOrThrow(schema, value, 'path');
    if (seen.size >= PARAMS_REMEMBERED) seen.clear();
    seen.set(key, Object.freeze(parsed));
    return parsed;
  };
}

/**
 * Mounts routes on a router; `authenticate` supplies the middleware for each auth mode, and
 * `guards` the role check that follows it.
 */
export function mountRoutes(
  router: Router<AppState>,
  routes: AnyRouteDef[],
  authenticate: Partial<Record<AuthMode, Middleware<AppState>>>,
  guards: RoleGuards = {},
): void {
  for (const route of routes) {
    (router as unknown as Record<HttpMethod, (path: string, ...mw: Middleware<AppState>[]) => void>)[route.method](route.mountPath ?? koaPath(route.path), ...routeChain(route, authenticate, guards));
  }
}

/** Runs `chain` as one middleware, as koa-compose does: each `next` the one after, the last the caller's. */
function composed(chain: Middleware<AppState>[]): Middleware<AppState> {
  return function runChain(ctx, next) {
    let last = -1;
    const step = (i: number): Promise<void> => {
      if (i <= last) return Promise.reject(new Error('next() called more than once'));
      last = i;
      const fn = i < chain.length ? chain[i] : next;
      try {
        return Promise.resolve(fn(ctx, () => step(i + 1)));
      } catch (err) {
        return Promise.reject(err);
      }
    };
    return step(0);
  };
}

/** A text as the router decodes a path parameter: percent-decoded, or as it came when that fails. */
function decodedParam(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** A route whose path has one parameter segment: what comes before and after it. */
interface OneParamRoute {
  method: string;
  prefix: string;
  suffix: string;
  name: string;
  chain: Middleware<AppState>;
}

/**
 * The data plane's routes as dispatch takes them: each as one middleware worked out at start.
 * The router matches every route's pattern in turn and composes the matched chain anew for each
 * request; the data plane's calls are nearly all to a few paths, fixed (`/v1/chat/completions`)
 * or with one parameter segment (`/svc/v1/apps/mcps/{id}/mcp`), so those are found here first,
 * by one lookup or a prefix and a suffix, and the router sees only the rest (another spelling, a
 * trailing slash, a `*` path, a method that is not allowed), which it answers as before.
 */
export function exactRouteDispatch(
  routes: AnyRouteDef[],
  authenticate: Partial<Record<AuthMode, Middleware<AppState>>>,
  guards: RoleGuards = {},
): Middleware<AppState> {
  const byCall = new Map<string, Middleware<AppState>>();
  const withParam: OneParamRoute[] = [];
  for (const route of routes) {
    const path = route.mountPath ?? koaPath(route.path);
    const params = path.split('/').filter((seg) => seg.startsWith(':'));
    if (/[*{(?+]/.test(path) || params.length > 1 || (params.length === 1 && !/^:[A-Za-z_]+$/.test(params[0]))) continue;
    const method = route.method.toUpperCase();
    const handle = routeChain(route, authenticate, guards);
    if (params.length === 0) {
      byCall.set(`${method} ${path}`, composed([enterRoute(path, () => ({})), ...handle]));
      continue;
    }
    const at = path.indexOf(params[0]);
    const one: OneParamRoute = { method, prefix: path.slice(0, at), suffix: path.slice(at + params[0].length), name: params[0].slice(1), chain: undefined as never };
    one.chain = composed([enterRoute(path, (p) => ({ [one.name]: decodedParam(p.slice(one.prefix.length, p.length - one.suffix.length)) })), ...handle]);
    withParam.push(one);
  }
  return function dispatchExactRoute(ctx, next) {
    const path = ctx.path;
    const chain = byCall.get(`${ctx.method} ${path}`);
    if (chain) return chain(ctx, next);
    for (const r of withParam) {
      if (r.method !== ctx.method || path.length <= r.prefix.length + r.suffix.length || !path.startsWith(r.prefix) || !path.endsWith(r.suffix)) continue;
      // the parameter is one segment, as the router's pattern takes it
      const slash = path.indexOf('/', r.prefix.length);
      if (slash !== -1 && slash < path.length - r.suffix.length) continue;
      return r.chain(ctx, next);
    }
    return next();
  };
}

/** What the router sets on a match: the route's pattern and the path's parameters. */
function enterRoute(pattern: string, paramsOf: (path: string) => Record<string, string>): Middleware<AppState> {
  return function enterRoute(ctx, next) {
    const routed = ctx as AppContext & { _matchedRoute?: string; routerPath?: string };
    ctx.params = paramsOf(ctx.path);
    routed._matchedRoute = pattern;
    routed.routerPath = pattern;
    return next();
  };
}

/**
 * Whether a request path belongs to one of `routes`, as the router would match it (a path
 * parameter is one segment; a `*name` mount path takes the rest; a trailing slash is allowed).
 * The daemon picks a request's plane with it, before either stack runs.
 */
export function routePathMatcher(routes: Pick<RouteDef, 'path' | 'mountPath'>[]): (path: string) => boolean {
  const escape = (s: string) => s.replace(/[.+?^$()|[\]\\]/g, '\\$&');
  const patterns = [...new Set(routes.map((r) => r.mountPath ?? r.path))].map((p) => {
    const body = p
      .split('/')
      .map((seg) => (/^\{[^}]+\}$/.test(seg) || /^:/.test(seg) ? '[^/]+' : /^\*/.test(seg) ? '.+' : escape(seg)))
      .join('/');
    return new RegExp(`^${body}/?$`);
  });
  return (path) => patterns.some((re) => re.test(path));
}
