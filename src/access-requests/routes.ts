import type { Middleware } from 'koa';
import type { AppDeps, AppState } from '../http/context.js';
import { RateLimiter } from '../http/rate-limit.js';
import { type AnyRouteDef, defineRoute } from '../http/route.js';
import type { McpInstanceRecord, UserRecord } from '../store/schema.js';
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
import { clientView, reviewView, type ToolReview } from './views.js';

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

export function accessRequestRoutes(deps: AppDeps, service: AccessRequestsService, ownedInstances: (u: UserRecord) => Promise<McpInstanceRecord[]>, tools?: ToolReview): AnyRouteDef[] {
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
              ...(await service.figuresOf(r)),
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
        return reviewView(service, record, user, deps.clock(), await ownedInstances(user), deps.baseUrl(), tools);
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
