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

/** A note's name as the event keeps it: absent when empty, else at most 200 characters. */
const named = (s: string | undefined) => (s ? s.slice(0, 200) : undefined);

/** Who a grant's event is of: the grant, its app and its approver. */
export interface EventOwner {
  access_request_id: string;
  app_client_id: string;
  user: string | null;
}

/** What a call's event says before the owner is known (a refused credential's is looked up). */
export type CallEventBase = Omit<ActivityEvent, 'id' | 'access_request_id' | 'app_client_id' | 'user'>;

/**
 * One call's event, built in one literal with every field in the order the log writes them, an
 * absent one undefined (which JSON leaves out): each event has the same shape, so building,
 * counting and writing it stay on V8's fast paths, where spreading optional parts made each a
 * shape of its own. The id is the log's to set. `message`: a further message of a batch, whose
 * method and tool replace the call's.
 */
export function callEvent(base: CallEventBase, owner: EventOwner, message?: { mcp_method?: string; tool?: string }): Omit<ActivityEvent, 'id'> {
  return {
    id: undefined,
    time: base.time,
    kind: base.kind,
    endpoint: base.endpoint,
    duration_ms: base.duration_ms,
    status: base.status,
    outcome: base.outcome,
    reason: base.reason,
    model: base.model,
    instance_id: base.instance_id,
    mcp_method: message ? named(message.mcp_method) : base.mcp_method,
    tool: message ? named(message.tool) : base.tool,
    tokens_in: base.tokens_in,
    tokens_out: base.tokens_out,
    tokens_estimated: base.tokens_estimated,
    access_request_id: owner.access_request_id,
    app_client_id: owner.app_client_id,
    user: owner.user,
  } as Omit<ActivityEvent, 'id'>;
}

/** What a call's note and outcome say of it, in the event's order. */
export function callEventBase(time: string, kind: ActivityEvent['kind'], endpoint: string, durationMs: number, outcome: Outcome, note: ActivityNote): CallEventBase {
  return {
    time,
    kind,
    endpoint,
    duration_ms: durationMs,
    status: outcome.status,
    outcome: outcome.outcome,
    reason: outcome.reason,
    model: named(note.model),
    instance_id: named(note.instance_id),
    mcp_method: named(note.mcp_method),
    tool: named(note.tool),
    tokens_in: note.tokens_in,
    tokens_out: note.tokens_out,
    tokens_estimated: note.tokens_estimated ? true : undefined,
  };
}

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
      const grant = ctx.state.grant;
      if (!grant && !ctx.state.attempted) return;
      const base = callEventBase(time, kind, endpointOf(ctx, endpoints), Math.round(performance.now() - started), outcomeOf(ctx, failure, note), note);
      if (!grant) return void recordRefusal(log, repos, ctx.state.attempted!, base);
      const owner: EventOwner = { access_request_id: grant.record.id, app_client_id: grant.clientId, user: grant.user.username };
      log.record(callEvent(base, owner));
      // each further message of a batch: its own method and tool, the request's outcome
      for (const m of note.more ?? []) log.record(callEvent(base, owner, m));
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
  base: CallEventBase,
) {
  const attempted = await Promise.resolve(attempt).catch(() => undefined);
  if (!attempted) return;
  const record = await repos.accessRequests.get(attempted.accessRequestId).catch(() => undefined);
  if (!record) return;
  const user = record.user_id ? await repos.users.get(record.user_id).catch(() => undefined) : undefined;
  log.record(callEvent(base, { access_request_id: record.id, app_client_id: attempted.clientId, user: user?.username ?? null }));
}

type Outcome = Pick<ActivityEvent, 'status' | 'outcome' | 'reason'>;

function outcomeOf(ctx: AppContext, failure: unknown, note: ActivityNote): Outcome {
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
