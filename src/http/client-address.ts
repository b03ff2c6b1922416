import net from 'node:net';
import type { Middleware } from 'koa';
import type { AppState } from './context.js';

/**
 * Behind a reverse proxy or load balancer every connection comes from the proxy, so per-address
 * limits and the login backoff would count everyone as one address: one person's wrong
 * passwords would slow everyone's logins. With `--trust-proxy` the address is the one the proxy
 * saw: the last entry of X-Forwarded-For, the one the proxy itself appended (entries before it
 * are whatever the client sent, and could be anything). Only the address is taken from the
 * proxy: Host and the scheme are still checked as sent, so a forwarded header cannot widen them.
 * An entry that is not an IP address is ignored.
 */
export function addressFromProxy(): Middleware<AppState> {
  return function clientAddressFromProxy(ctx, next) {
    const forwarded = ctx.get('x-forwarded-for');
    if (forwarded) {
      const last = forwarded.slice(forwarded.lastIndexOf(',') + 1).trim();
      if (net.isIP(last)) ctx.request.ip = last;
    }
    return next();
  };
}
