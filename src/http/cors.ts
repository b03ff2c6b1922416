import type { Middleware } from 'koa';
import type { AppState } from './context.js';

// RFC 9728 metadata is read by browser-based MCP clients too.
const APP_PREFIXES = ['/svc/v1/apps/', '/v1/', '/.well-known/oauth-protected-resource'];

/**
 * Apps may run in a browser on their own origin, so the app-facing endpoints answer CORS without
 * credentials: a page can send a Bearer token it holds, but never ride on the user's cookie.
 */
export const appCors: Middleware<AppState> = async function corsForApps(ctx, next) {
  if (!APP_PREFIXES.some((p) => ctx.path.startsWith(p)) || !ctx.get('Origin')) return next();
  ctx.set('Access-Control-Allow-Origin', '*');
  ctx.set('Access-Control-Expose-Headers', 'WWW-Authenticate, Retry-After, Mcp-Session-Id, Mcp-Protocol-Version, X-Request-Id, Request-Id');
  if (ctx.method === 'OPTIONS') {
    ctx.set('Access-Control-Allow-Methods', 'GET, POST, PUT, DELETE, OPTIONS');
    ctx.set('Access-Control-Allow-Headers', 'Authorization, X-Api-Key, Anthropic-Version, Anthropic-Beta, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID');
    ctx.set('Access-Control-Max-Age', '600');
    ctx.status = 204;
    return;
  }
  await next();
};
