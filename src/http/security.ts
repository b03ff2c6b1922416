import type { Middleware } from 'koa';
import { AppError, forbidden } from '../errors.js';
import type { AppContext, AppState } from './context.js';
import { answeredCors } from './cors.js';

const LOOPBACK_NAMES = ['127.0.0.1', 'localhost', '[::1]'];

/**
 * The hosts the daemon answers to: the base URL's host and, on the bound port, the loopback
 * names. Anything else is refused, which stops DNS-rebinding pages from talking to svc, and keeps
 * a forged Host header out of every URL svc builds (review_url comes from the base URL anyway).
 */
export function allowedHosts(baseUrl: string, port: number): Set<string> {
  const base = new URL(baseUrl);
  const hosts = new Set<string>([base.host.toLowerCase()]);
  if (!base.port) hosts.add(base.hostname.toLowerCase());
  for (const name of LOOPBACK_NAMES) hosts.add(`${name}:${port}`);
  return hosts;
}

export function allowedOrigins(hosts: Set<string>, baseUrl: string): Set<string> {
  const origins = new Set<string>([new URL(baseUrl).origin]);
  for (const host of hosts) origins.add(`http://${host}`);
  return origins;
}

/** A Host header naming none of `hosts` is refused (see allowedHosts). */
export function refuseUnknownHost(ctx: Pick<AppContext, 'get'>, hosts: Set<string>): void {
  const host = (ctx.get('Host') || '').toLowerCase();
  if (!hosts.has(host)) {
    throw new AppError('invalid_host', 'Unknown Host header; use the address svc prints at start (or set --base-url).');
  }
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Refuses state-changing calls that a browser sends from another site. Browsers always send
 * Origin on cross-origin POST/PUT/DELETE and Sec-Fetch-Site on modern engines; non-browser
 * clients (the CLI, scripts) send neither and are not at risk of CSRF.
 */
export function sameOriginOnly(origins: Set<string>): Middleware<AppState> {
  return async function refuseCrossOrigin(ctx, next) {
    if (!SAFE_METHODS.has(ctx.method)) {
      const site = ctx.get('Sec-Fetch-Site');
      const origin = ctx.get('Origin');
      if ((site && site !== 'same-origin' && site !== 'none') || (origin && !origins.has(origin.toLowerCase()))) {
        throw forbidden('Cross-origin requests may not change state.', 'cross_origin');
      }
    }
    await next();
  };
}

/** Headers every response carries; pages set their own CSP on top. */
export function setSecurityHeaders(ctx: Pick<AppContext, 'set'>): void {
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('Referrer-Policy', 'no-referrer');
  ctx.set('X-Frame-Options', 'DENY');
  ctx.set('Cache-Control', 'no-store');
}

/**
 * What every request passes after the error catch, in one step: the security headers, the Host
 * check and CORS for the app endpoints (a preflight is answered here). One middleware rather
 * than three, since each layer of Koa's chain costs a call, a closure and a promise per request.
 */
export function guardRequests(hosts: Set<string>): Middleware<AppState> {
  return function guardRequest(ctx, next) {
    setSecurityHeaders(ctx);
    refuseUnknownHost(ctx, hosts);
    if (answeredCors(ctx)) return;
    return next();
  };
}
