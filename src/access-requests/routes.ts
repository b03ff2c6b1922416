import type { AppDeps } from '../http/context.js';
import { type AnyRouteDef, defineRoute } from '../http/route.js';
import type { AccessRequestRecord, McpInstanceRecord, UserRecord } from '../store/schema.js';
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
import { pollLimit, unauthenticatedLimit } from './limits.js';
import { type AccessRequestsService, decisionRedirect, scopeFor } from './service.js';
import { clientView, reviewView, type ToolReview } from './views.js';

type OwnedInstances = (u: UserRecord) => Promise<McpInstanceRecord[]>;

/** The access-request endpoints: the app's (ask, poll) and the person's (list, review, decide, revoke). */
export function accessRequestRoutes(deps: AppDeps, service: AccessRequestsService, ownedInstances: OwnedInstances, tools?: ToolReview): AnyRouteDef[] {
  return [
    createAccessRequestRoute(deps, service),
    pollAccessRequestRoute(deps, service),
    listAccessRequestsRoute(deps, service),
    reviewAccessRequestRoute(deps, service, ownedInstances, tools),
    approveAccessRequestRoute(deps, service),
    denyAccessRequestRoute(deps, service),
    revokeAccessRequestRoute(deps, service),
  ];
}

/** An app asks for access, with no credential; the person reviews it at the answer's review_url. */
function createAccessRequestRoute(deps: AppDeps, service: AccessRequestsService): AnyRouteDef {
  return defineRoute({
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
  });
}

/** The app polls its own request until it is decided. */
function pollAccessRequestRoute(deps: AppDeps, service: AccessRequestsService): AnyRouteDef {
  return defineRoute({
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
  });
}

/** The requests a signed-in person may see. */
function listAccessRequestsRoute(deps: AppDeps, service: AccessRequestsService): AnyRouteDef {
  return defineRoute({
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
      return { data: await listedRequests(deps, service, rows) };
    },
  });
}

/**
 * The requests as the list shows them: the app as it is known, the figures, and who decided it.
 * What each row needs from the store is read once for the list (the usage in one read, each app
 * and each person once), so a long list costs a few reads, not a few per row.
 */
async function listedRequests(deps: AppDeps, service: AccessRequestsService, rows: AccessRequestRecord[]) {
  const figures = await service.figuresOfMany(rows);
  const once = <T>(fetch: (key: string) => Promise<T>) => {
    const seen = new Map<string, Promise<T>>();
    return (key: string) => seen.get(key) ?? seen.set(key, fetch(key)).get(key)!;
  };
  const firstOf = new Map(rows.map((r) => [r.app_client_id, r] as const));
  const appOf = once((clientId) => service.appInfoFor(firstOf.get(clientId)!));
  const usernameOf = once(async (userId) => (await deps.repos.users.get(userId))?.username ?? null);
  return Promise.all(
    rows.map(async (r) => ({
      id: r.id,
      app_client_id: r.app_client_id,
      ...clientView(r, await appOf(r.app_client_id)),
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
      ...figures.get(r.id),
      user: r.user_id ? await usernameOf(r.user_id) : null,
    })),
  );
}

/** What the review page shows of one request. */
function reviewAccessRequestRoute(deps: AppDeps, service: AccessRequestsService, ownedInstances: OwnedInstances, tools?: ToolReview): AnyRouteDef {
  return defineRoute({
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
  });
}

/** The person approves, with a role and the instances granted. */
function approveAccessRequestRoute(deps: AppDeps, service: AccessRequestsService): AnyRouteDef {
  return defineRoute({
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
  });
}

/** The person denies. */
function denyAccessRequestRoute(deps: AppDeps, service: AccessRequestsService): AnyRouteDef {
  return defineRoute({
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
  });
}

/** The approver or an admin revokes an approved grant. */
function revokeAccessRequestRoute(deps: AppDeps, service: AccessRequestsService): AnyRouteDef {
  return defineRoute({
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
  });
}
