import type { Middleware } from 'koa';
import { AppError } from '../errors.js';
import { type ActivityNote, afterAnswer, type AppContext, type AppState, type AttemptedGrant } from '../http/context.js';
import type { Repositories } from '../store/repositories.js';
import type { ActivityStore } from './store.js';
import type { ActivityEvent } from './schemas.js';

/** Error codes that mean the upstream failed (or the app left), not that svc refused. */
const NOT_A_REFUSAL = new Set(['upstream_unavailable', 'upstream_timeout', 'upstream_rejected', 'unsupported_endpoint', 'client_closed', 'issuer_unavailable', 'store_unavailable']);

const KINDS: [RegExp, ActivityEvent['kind']][] = [
  [/^\/v1\/models(\/|$)/, 'models'],
  [/^\/v1\/chat\/completions\/?$/, 'chat'],
  [/^\/v1\/completions\/?$/, 'completions'],
  [/^\/v1\/embeddings\/?$/, 'embeddings'],
  [/^\/v1\/responses(\/|$)/, 'responses'],
  [/^\/v1\/messages(\/|$)/, 'messages'],
  [/^\/svc\/v1\/apps\/mcps(\/|$)/, 'mcp'],
];

/** What kind of app call a path is; undefined for a path that is not an app endpoint. */
export function activityKind(path: string): ActivityEvent['kind'] | undefined {
  for (const [re, kind] of KINDS) if (re.test(path)) return kind;
  return undefined;
}

/** The route as defined (`/svc/v1/apps/mcps/{id}/mcp`), not as called: no ids or tool names in the endpoint. */
function endpointOf(ctx: AppContext, known: Map<string, string>): string {
  const matched = (ctx as AppContext & { _matchedRoute?: unknown })._matchedRoute;
  const route = typeof matched === 'string' ? matched : ctx.path;
  const seen = known.get(route);
  if (seen !== undefined) return seen;
  const endpoint = route.replace(/:([A-Za-z_]+)/g, '{$1}').replace(/\*([A-Za-z_]+)/g, '{$1}').slice(0, 200);
  // only the routes' own patterns are kept: a path as called (an unmatched one) could be anything
  if (typeof matched === 'string' && known.size < 100) known.set(route, endpoint);
  return endpoint;
}

const bounded = (s: string | undefined) => (s === undefined ? undefined : s.slice(0, 200));

/**
 * Records one event for every call of an app endpoint made with a grant's credential, the calls
 * svc refused included (a revoked grant, a role too low, a limit). It runs outside the Bearer
 * check, so it sees those refusals; the event is written off the request path.
 */
export function recordActivity(log: ActivityStore, repos: Repositories, clock: () => number): Middleware<AppState> {
  // the few routes' endpoints as shown, each worked out once
  const endpoints = new Map<string, string>();
  return async function recordCall(ctx, next) {
    const kind = activityKind(ctx.path);
    if (!kind) return next();
    const started = performance.now();
    const time = new Date(clock()).toISOString();
    const instance = kind === 'mcp' ? (ctx.params as Record<string, string> | undefined)?.id : undefined;
    const note: ActivityNote = instance ? { instance_id: instance } : {};
    ctx.state.activity = note;
    const record = (failure?: unknown) => {
      const base = {
        time,
        kind,
        endpoint: endpointOf(ctx, endpoints),
        duration_ms: Math.round(performance.now() - started),
        ...outcomeOf(ctx, failure, note),
        ...(note.model ? { model: bounded(note.model) } : {}),
        ...(note.instance_id ? { instance_id: bounded(note.instance_id) } : {}),
        ...(note.mcp_method ? { mcp_method: bounded(note.mcp_method) } : {}),
        ...(note.tool ? { tool: bounded(note.tool) } : {}),
        ...(note.tokens_in !== undefined ? { tokens_in: note.tokens_in } : {}),
        ...(note.tokens_out !== undefined ? { tokens_out: note.tokens_out } : {}),
        ...(note.tokens_estimated ? { tokens_estimated: true as const } : {}),
      };
      const grant = ctx.state.grant;
      if (grant) {
        const who = { access_request_id: grant.record.id, app_client_id: grant.clientId, user: grant.user.username };
        log.record({ ...base, ...who });
        // each further message of a batch: its own method and tool, the request's outcome
        for (const m of note.more ?? []) {
          const { mcp_method: _m, tool: _t, ...rest } = base;
          log.record({ ...rest, ...(m.mcp_method ? { mcp_method: bounded(m.mcp_method) } : {}), ...(m.tool ? { tool: bounded(m.tool) } : {}), ...who });
        }
      }
      else if (ctx.state.attempted) void recordRefusal(log, repos, ctx.state.attempted, base);
    };
    try {
      await next();
    } catch (err) {
      record(err);
      throw err;
    }
    // a stream's event once it ends, with its whole duration
    afterAnswer(ctx, () => record());
  };
}

/** A refused credential's grant, read off the request path: its app and approver. */
async function recordRefusal(
  log: ActivityStore,
  repos: Repositories,
  attempt: AttemptedGrant | Promise<AttemptedGrant | undefined>,
  base: Omit<ActivityEvent, 'id' | 'access_request_id' | 'app_client_id' | 'user'>,
) {
  const attempted = await Promise.resolve(attempt).catch(() => undefined);
  if (!attempted) return;
  const record = await repos.accessRequests.get(attempted.accessRequestId).catch(() => undefined);
  if (!record) return;
  const user = record.user_id ? await repos.users.get(record.user_id).catch(() => undefined) : undefined;
  log.record({ ...base, access_request_id: record.id, app_client_id: attempted.clientId, user: user?.username ?? null });
}

function outcomeOf(ctx: AppContext, failure: unknown, note: ActivityNote): Pick<ActivityEvent, 'status' | 'outcome' | 'reason'> {
  if (failure !== undefined) {
    const status = failure instanceof AppError ? failure.status : 500;
    const code = failure instanceof AppError ? failure.code : 'server_error';
    if (status < 500 && !NOT_A_REFUSAL.has(code)) return { status, outcome: 'refused', reason: code };
    return { status, outcome: 'error', reason: code };
  }
  const status = ctx.respond === false ? ctx.res.statusCode : ctx.status;
  if (note.refused) return { status, outcome: 'refused', reason: note.refused };
  return { status, outcome: note.failed || status >= 400 ? 'error' : 'ok' };
}
