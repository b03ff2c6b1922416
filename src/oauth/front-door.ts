import type { Middleware } from 'koa';
import type { Config } from '../config.js';
import type { AppState } from '../http/context.js';
import type { RateLimiter } from '../http/rate-limit.js';
import type { OAuthClientsService } from './clients.js';
import { AS_METADATA_PATH, DISCOVERY_PATH, INTERACTION_PATH, OAUTH_PREFIX } from './paths.js';

type Ctx = Parameters<Middleware<AppState>>[0];

const oauthError = (ctx: Ctx, status: number, error: string, description: string) => {
  ctx.status = status;
  ctx.set('Cache-Control', 'no-store');
  ctx.body = { error, error_description: description };
};

/**
 * What every request to the authorization server passes before oidc-provider (`mounted`) sees it:
 * the RFC 8414 metadata path, svc's default scope, CORS and limits on registration. `onIdle` runs
 * whenever the last OAuth request in flight has ended.
 */
export function authorizationServerFrontDoor(opts: {
  mounted: Middleware<AppState>;
  clients: OAuthClientsService;
  registrations: RateLimiter;
  config: Pick<Config, 'dynamicClientMax' | 'dynamicClientMaxPerAddress'>;
  onIdle: () => void;
}): Middleware<AppState> {
  const { mounted, onIdle } = opts;
  let inFlight = 0;
  return async function authorizationServer(ctx, next) {
    if (ctx.path === AS_METADATA_PATH || ctx.path === `${AS_METADATA_PATH}/`) {
      // RFC 8414's location for an issuer with a path; the same document as OIDC discovery.
      ctx.path = `${OAUTH_PREFIX}${DISCOVERY_PATH}`;
    } else if (ctx.path !== OAUTH_PREFIX && !ctx.path.startsWith(`${OAUTH_PREFIX}/`)) {
      return next();
    }
    if (ctx.path.startsWith(INTERACTION_PATH)) return next();
    if (ctx.path === `${OAUTH_PREFIX}/auth` && ctx.method === 'GET' && !ctx.query.scope) {
      // oidc-provider grants nothing to a request that names no scope; for svc such a request
      // (the conformance suite's, many hosts') asks for the User role.
      ctx.querystring = `${ctx.querystring ? `${ctx.querystring}&` : ''}scope=scope_user_user`;
    }
    if (ctx.path === `${OAUTH_PREFIX}/reg` && answerRegistrationPreflight(ctx)) return;
    if (ctx.path === `${OAUTH_PREFIX}/reg` && ctx.method === 'POST' && (await refuseRegistration(opts, ctx))) return;
    inFlight++;
    try {
      return await mounted(ctx, next);
    } finally {
      if (--inFlight === 0) onIdle();
    }
  };
}

/**
 * oidc-provider answers no CORS on registration, and browser-based MCP clients (the Inspector's web
 * UI) register from their own origin: open CORS, no credentials, like discovery. Answers whether
 * the request was a preflight, now answered.
 */
function answerRegistrationPreflight(ctx: Ctx): boolean {
  if (ctx.get('Origin')) ctx.set('Access-Control-Allow-Origin', '*');
  if (ctx.method !== 'OPTIONS') return false;
  ctx.set('Access-Control-Allow-Methods', 'POST');
  ctx.set('Access-Control-Allow-Headers', 'Content-Type, Authorization');
  ctx.set('Access-Control-Max-Age', '600');
  ctx.status = 204;
  return true;
}

/**
 * Anyone may register, so registration is rate-limited per address and capped in number. Answers
 * whether the registration was refused (and the refusal sent).
 */
async function refuseRegistration(
  opts: { clients: OAuthClientsService; registrations: RateLimiter; config: Pick<Config, 'dynamicClientMax' | 'dynamicClientMaxPerAddress'> },
  ctx: Ctx,
): Promise<boolean> {
  try {
    opts.registrations.hit(ctx.ip);
  } catch {
    ctx.set('Retry-After', '60');
    oauthError(ctx, 429, 'rate_limited', 'Too many client registrations from this address; try again in a minute.');
    return true;
  }
  const refused = await opts.clients.registrationRefusal(ctx.ip, { total: opts.config.dynamicClientMax, perAddress: opts.config.dynamicClientMaxPerAddress });
  if (!refused) return false;
  oauthError(ctx, 429, refused.error, refused.description);
  return true;
}
