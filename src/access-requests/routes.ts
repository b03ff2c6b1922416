import type { Middleware } from 'koa';
import type { AppDeps, AppState } from '../http/context.js';
import { RateLimiter } from '../http/rate-limit.js';
import { type AnyRouteDef, defineRoute } from '../http/route.js';
import { resourceNeedsPowerUser } from '../oauth/resources.js';
import type { AccessRequestRecord, AppRole, McpInstanceRecord, UserRecord } from '../store/schema.js';
import { appDisplayName, type ClientKind } from './client-kinds.js';
import {
  accessRequestId,
  approveBody,
  approveResponse,
  createAccessRequestBody,
  createdAccessRequest,
  denyResponse,
  listQuery,
  listResponse,
  pollQuery,
  pollResponse,
  reviewResponse,
  revokeResponse,
} from './schemas.js';
import { type AccessRequestsService, decisionRedirect, scopeFor } from './service.js';

const MINUTE = 60_000;

/** Per-client and per-address limits for the endpoints that need no credential (decisions: Access requests). */
function unauthenticatedLimit(deps: AppDeps, clientIdOf: (ctx: Parameters<Middleware<AppState>>[0]) => unknown): Middleware<AppState> {
  const perClient = new RateLimiter(deps.config.rateLimitClient, MINUTE, deps.clock);
  const perAddress = new RateLimiter(deps.config.rateLimitAddress, MINUTE, deps.clock);
  return async function rateLimitUnauthenticated(ctx, next) {
    perAddress.hit(ctx.ip);
    const clientId = clientIdOf(ctx);
    if (typeof clientId === 'string' && clientId.length > 0 && clientId.length <= 255) perClient.hit(clientId);
    await next();
  };
}

/** The origin a redirect URI sends the person to (a private-use scheme has none: the scheme then). */
function originOf(uri: string): string {
  try {
    const url = new URL(uri);
    return url.origin !== 'null' ? url.origin : `${url.protocol}//${url.host}`;
  } catch {
    return uri.slice(0, 200);
  }
}

/**
 * Polls: every local app shares 127.0.0.1, so a per-address cap would let one app's polls starve
 * every other's, and a client id is public, so a per-client cap could be spent by anyone. A poll
 * is limited per (address, request id) instead, which only the app that made the request can
 * spend. Polls that find nothing (guessed or stale ids) count against the per-address limit, so
 * guessing stays bounded without touching the budget of good polls.
 */
function pollLimit(deps: AppDeps): Middleware<AppState> {
  const perRequest = new RateLimiter(deps.config.rateLimitPoll, MINUTE, deps.clock);
  const missesPerAddress = new RateLimiter(deps.config.rateLimitAddress, MINUTE, deps.clock);
  return async function rateLimitPoll(ctx, next) {
    const key = `${ctx.ip} ${String(ctx.params.id ?? '').slice(0, 100)}`;
    perRequest.check(key);
    try {
      await next();
    } catch (err) {
      if ((err as { status?: number }).status === 404) missesPerAddress.hit(ctx.ip);
      throw err;
    }
    // counted only for requests that exist, so the table holds no more keys than real requests
    perRequest.hit(key);
  };
}

export type AppInfo = Awaited<ReturnType<AccessRequestsService['appInfoFor']>>;

/**
 * How svc knows the client, whatever flow the request came by: from the registry (added by an
 * admin, or registered itself), else by the metadata document the authorization server fetched
 * for it. A client id alone, as any app may send to request-access, proves nothing.
 */
function clientKindOf(record: AccessRequestRecord, app: AppInfo): ClientKind | undefined {
  if (app?.kind) return app.kind;
  return record.authorize?.client_kind === 'metadata_document' ? 'metadata_document' : undefined;
}

/** The client as every review surface shows it: its name, and whether that name is vouched for. */
export function clientView(record: AccessRequestRecord, app: AppInfo) {
  const kind = clientKindOf(record, app);
  const name = app?.name ?? record.authorize?.client_name;
  return {
    ...(name ? { app_name: appDisplayName(name) } : {}),
    // vouched for: an admin registered it, or it is one of svc's own API keys
    app_registered: app !== undefined && kind !== 'dynamic',
    ...(kind ? { client_kind: kind } : {}),
  };
}

/**
 * The role every review surface starts from: the lowest that serves what the request is for. A
 * sign-in whose token is bound to MCP proxy URLs or the model endpoints can use nothing a Power
 * User adds, so User; otherwise the requested role, capped at what this reviewer may grant.
 */
function suggestedRole(record: AccessRequestRecord, cap: AppRole, base: string): AppRole {
  const resources = record.authorize?.resources;
  if (!resources) return cap;
  const needsPowerUser = resources.length === 0 || resources.some((r) => resourceNeedsPowerUser(base, r));
  return needsPowerUser ? cap : 'scope_user_user';
}

export async function reviewView(service: AccessRequestsService, record: AccessRequestRecord, reviewer: UserRecord, now: number, owned: McpInstanceRecord[], base: string) {
  const app = await service.appInfoFor(record);
  const cap = service.maxGrantable(record, reviewer);
  const { app_name, ...client } = clientView(record, app);
  return {
    id: record.id,
    app_client_id: record.app_client_id,
    ...(app_name ? { app_name } : {}),
    ...(app?.description ? { app_description: app.description } : {}),
    ...client,
    flow_type: record.flow_type,
    ...(record.redirect_url ? { redirect_url: record.redirect_url } : {}),
    status: record.status,
    requested_role: record.requested_role,
    requested: record.requested,
    created_at: record.created_at,
    expires_at: record.expires_at,
    expires_in_seconds: record.status === 'draft' ? Math.max(0, Math.floor((Date.parse(record.expires_at) - now) / 1000)) : 0,
    max_grantable_role: cap,
    suggested_role: suggestedRole(record, cap, base),
    ...(record.approved_role ? { approved_role: record.approved_role } : {}),
    ...(record.approved ? { approved: record.approved } : {}),
    ...(record.authorize ? { redirect_origin: originOf(record.authorize.redirect_uri) } : {}),
    ...(record.authorize?.suggested_instance_ids.length ? { sign_in_instance_ids: record.authorize.suggested_instance_ids } : {}),
    ...(record.replaced_by ? { replaced_by: record.replaced_by } : {}),
    ...service.figuresOf(record),
    ...(record.decided_at ? { decided_at: record.decided_at } : {}),
    ...(record.revoked_at ? { revoked_at: record.revoked_at } : {}),
    mcp_servers: record.requested.mcp_servers.map(({ url }) => {
      const mine = owned.filter((m) => m.url === url);
      // The one default every surface starts from: the instance the app's request named (an MCP
      // host's resource), else the first enabled one.
      const suggested = mine.find((m) => m.enabled && record.authorize?.suggested_instance_ids.includes(m.id));
      const pick = (suggested ?? mine.find((m) => m.enabled))?.id;
      return { url, instances: mine.map((m) => ({ id: m.id, name: m.name, url: m.url, enabled: m.enabled, selected: m.id === pick })) };
    }),
  };
}

export function accessRequestRoutes(deps: AppDeps, service: AccessRequestsService, ownedInstances: (u: UserRecord) => Promise<McpInstanceRecord[]>): AnyRouteDef[] {
  const usernameOf = async (userId: string | null) => (userId ? ((await deps.repos.users.get(userId))?.username ?? null) : null);
  return [
    defineRoute({
      method: 'post',
      path: '/svc/v1/apps/request-access',
      operationId: 'createAccessRequest',
      summary: 'An app asks for access; the user reviews it at review_url',
      description:
        'Limits: at most 32 MCP server URLs of at most 2,048 characters each; rate-limited per app_client_id and per address; ' +
        'undecided drafts are capped per app_client_id (default 20, `--max-drafts-per-client`) and in all (default 1,000, `--max-drafts`): ' +
        'beyond either, 429 `too_many_drafts` with Retry-After and nothing stored. Decided requests are kept for `--request-retention-days` (7; revoked ones `--revoked-retention-days`, 30).',
      tags: ['apps'],
      auth: 'none',
      before: [unauthenticatedLimit(deps, (ctx) => (ctx.request as { body?: { app_client_id?: unknown } }).body?.app_client_id)],
      body: createAccessRequestBody,
      responses: { 201: { description: 'Created in draft; expires in 10 minutes', schema: createdAccessRequest } },
      errors: [400, 413, 429],
      async handler(ctx, { body }) {
        const record = await service.create(body);
        deps.logger.info({ accessRequest: record.id }, 'access request created');
        ctx.status = 201;
        const reviewUrl = new URL('/ui/apps/access-requests/review', deps.baseUrl());
        reviewUrl.searchParams.set('id', record.id);
        return { id: record.id, status: 'draft', review_url: reviewUrl.href };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/svc/v1/apps/access-requests/{id}',
      operationId: 'pollAccessRequest',
      summary: "The app polls its request; another client's id gets 404",
      description: 'Rate-limited per (address, request id) (--rate-limit-poll, 120 a minute); polls that find no request also count per address (--rate-limit-address).',
      tags: ['apps'],
      auth: 'none',
      before: [pollLimit(deps)],
      params: accessRequestId,
      query: pollQuery,
      responses: { 200: { description: 'Status; approved_role and access_request_scope only when approved', schema: pollResponse } },
      errors: [400, 404, 429],
      async handler(_ctx, { params, query }) {
        const r = await service.poll(params.id, query.app_client_id);
        return {
          id: r.id,
          status: r.status,
          requested_role: r.requested_role,
          ...(r.status === 'approved' ? { approved_role: r.approved_role!, access_request_scope: scopeFor(r.id) } : {}),
        };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/svc/v1/access-requests',
      operationId: 'listAccessRequests',
      summary: 'Requests you may see: every draft, and the ones you decided (admins: all)',
      tags: ['review'],
      auth: 'session',
      query: listQuery,
      responses: { 200: { description: 'Newest first', schema: listResponse } },
      errors: [400, 401],
      async handler(ctx, { query }) {
        const rows = await service.list(ctx.state.user!, query.status);
        return {
          data: await Promise.all(rows.map(async (r) => {
            const client = clientView(r, await service.appInfoFor(r));
            return {
              id: r.id,
              app_client_id: r.app_client_id,
              ...client,
              flow_type: r.flow_type,
              ...(r.redirect_url ? { redirect_url: r.redirect_url } : {}),
              status: r.status,
              requested_role: r.requested_role,
              approved_role: r.approved_role,
              requested: r.requested,
              approved: r.approved,
              created_at: r.created_at,
              expires_at: r.expires_at,
              decided_at: r.decided_at,
              ...(r.replaced_by ? { replaced_by: r.replaced_by } : {}),
              ...service.figuresOf(r),
              user: await usernameOf(r.user_id),
            };
          })),
        };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/svc/v1/access-requests/{id}/review',
      operationId: 'reviewAccessRequest',
      summary: "What the review page shows: the request, and your own instances of each requested URL",
      tags: ['review'],
      auth: 'session',
      params: accessRequestId,
      responses: { 200: { description: 'Review data', schema: reviewResponse } },
      errors: [401, 404],
      async handler(ctx, { params }) {
        const user = ctx.state.user!;
        const record = await service.getVisible(user, params.id);
        return reviewView(service, record, user, deps.clock(), await ownedInstances(user), deps.baseUrl());
      },
    }),
    defineRoute({
      method: 'put',
      path: '/svc/v1/access-requests/{id}/approve',
      operationId: 'approveAccessRequest',
      summary: 'Approve with a role and per-URL instances (at most what was requested and what you may grant)',
      tags: ['review'],
      auth: 'session',
      params: accessRequestId,
      body: approveBody,
      responses: {
        200: {
          description:
            "Approved; you become the grant's user. A sign-in made at the authorization endpoint for MCP instances (see sign_in_instance_ids) approved with none of them is denied instead, and the answer says so.",
          schema: approveResponse.or(denyResponse),
        },
      },
      errors: [400, 401, 403, 404, 409],
      async handler(ctx, { params, body }) {
        const r = await service.approve(ctx.state.user!, params.id, body);
        const redirect = decisionRedirect(r);
        if (r.status === 'denied') {
          deps.logger.info({ accessRequest: r.id, user: ctx.state.user!.id }, 'sign-in approved without the instances it was for: denied');
          return { id: r.id, status: 'denied' as const, flow_type: r.flow_type, ...(redirect ? { redirect_url: redirect } : {}) };
        }
        deps.logger.info({ accessRequest: r.id, user: ctx.state.user!.id, role: r.approved_role }, 'access request approved');
        return {
          id: r.id,
          status: 'approved' as const,
          approved_role: r.approved_role!,
          access_request_scope: scopeFor(r.id),
          flow_type: r.flow_type,
          ...(redirect ? { redirect_url: redirect } : {}),
        };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/svc/v1/access-requests/{id}/deny',
      operationId: 'denyAccessRequest',
      summary: 'Deny a request (empty body)',
      tags: ['review'],
      auth: 'session',
      params: accessRequestId,
      responses: { 200: { description: 'Denied', schema: denyResponse } },
      errors: [401, 404, 409],
      async handler(ctx, { params }) {
        const r = await service.deny(ctx.state.user!, params.id);
        deps.logger.info({ accessRequest: r.id, user: ctx.state.user!.id }, 'access request denied');
        const redirect = decisionRedirect(r);
        return { id: r.id, status: 'denied', flow_type: r.flow_type, ...(redirect ? { redirect_url: redirect } : {}) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/svc/v1/access-requests/{id}/revoke',
      operationId: 'revokeAccessRequest',
      summary: 'Revoke an approved grant (its approver or an admin); its tokens stop on their next call',
      tags: ['review'],
      auth: 'session',
      params: accessRequestId,
      responses: { 200: { description: 'Revoked', schema: revokeResponse } },
      errors: [401, 403, 404, 409],
      async handler(ctx, { params }) {
        const r = await service.revoke(ctx.state.user!, params.id);
        deps.logger.info({ accessRequest: r.id, user: ctx.state.user!.id }, 'access request revoked');
        return { id: r.id, status: 'revoked' };
      },
    }),
  ];
}
