import { z } from 'zod';
import type { AccessRequestsService } from '../access-requests/service.js';
import { clientView } from '../access-requests/views.js';
import { limitsResponse } from '../access-requests/schemas.js';
import { invalidBody, notFound } from '../errors.js';
import type { AppDeps } from '../http/context.js';
import { type AnyRouteDef, defineRoute } from '../http/route.js';
import type { UserRecord } from '../store/schema.js';
import type { ActivityStore } from './store.js';
import { type ActivityEvent, type ActivityEventView, activityList, activityQuery, grantLimits, parseSince } from './schemas.js';

const idParam = z.object({ id: z.string().min(1).max(100) });

/**
 * What a person may see of the activity: the grants they approved (an admin: every grant). A
 * `grant` named (an id or a unique prefix of 6 or more characters) must be one of those; another
 * person's is 404, as if it did not exist.
 */
async function visibleGrants(deps: AppDeps, user: UserRecord, named?: string): Promise<Set<string> | undefined> {
  if (!named && user.role === 'admin') return undefined;
  const mayRead = (r: { user_id: string | null }) => r.user_id !== null && (user.role === 'admin' || r.user_id === user.id);
  // A whole id (what the pages that poll every second or two send) is one lookup, not a scan of
  // every stored request.
  if (named && /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(named)) {
    const record = await deps.repos.accessRequests.get(named.toLowerCase());
    if (!record || !mayRead(record)) throw notFound('No such grant of yours.');
    return new Set([record.id]);
  }
  const mine = (await deps.repos.accessRequests.list()).filter(mayRead);
  if (!named) return new Set(mine.map((r) => r.id));
  if (named.length < 6) throw invalidBody('grant must be an access request id, or a prefix of at least 6 characters.', 'grant');
  const found = mine.filter((r) => r.id.startsWith(named.toLowerCase()));
  if (found.length === 0) throw notFound('No such grant of yours.');
  if (found.length > 1) throw invalidBody(`The prefix ${named} names ${found.length} grants; give more characters.`, 'grant');
  return new Set([found[0].id]);
}

/**
 * Each event with its app's name, as the grant lists and the review surfaces say it (clientView):
 * one lookup a grant, however many of its events the page holds. The log itself keeps ids only.
 */
async function withNames(deps: AppDeps, requests: AccessRequestsService, events: ActivityEvent[]): Promise<ActivityEventView[]> {
  const names = new Map<string, Promise<string | undefined>>();
  const nameOf = (grantId: string) => {
    let name = names.get(grantId);
    if (!name) {
      name = deps.repos.accessRequests.get(grantId).then(async (record) => (record ? clientView(record, await requests.appInfoFor(record)).app_name : undefined));
      names.set(grantId, name);
    }
    return name;
  };
  return Promise.all(
    events.map(async (e) => {
      const app_name = await nameOf(e.access_request_id);
      return app_name ? { ...e, app_name } : e;
    }),
  );
}

export function activityRoutes(deps: AppDeps, log: ActivityStore, requests: AccessRequestsService): AnyRouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/svc/v1/activity',
      operationId: 'listActivity',
      summary: 'What apps did with your grants, newest first (an admin: every grant)',
      description: 'One event per call made with a grant\'s credential on /v1 and /svc/v1/apps, refusals included. Never content: names, counts, sizes and times.',
      tags: ['activity'],
      auth: 'session',
      query: activityQuery,
      responses: { 200: { description: 'Events, newest first', schema: activityList } },
      errors: [400, 401, 404],
      async handler(ctx, { query }) {
        const since = query.since === undefined ? undefined : parseSince(query.since, deps.clock());
        if (since === null) throw invalidBody('since must be an ISO 8601 time or a duration such as 15m, 1h or 7d.', 'since');
        const grants = await visibleGrants(deps, ctx.state.user!, query.grant);
        return { data: await withNames(deps, requests, await log.list({ grants, since, after: query.after, limit: query.limit })) };
      },
    }),
    defineRoute({
      method: 'put',
      path: '/svc/v1/access-requests/{id}/limits',
      operationId: 'setGrantLimits',
      summary: "Set a grant's limits (its approver or an admin); a field left out stays, null removes it",
      tags: ['review'],
      auth: 'session',
      params: idParam,
      body: grantLimits,
      responses: { 200: { description: 'The limits now in force', schema: limitsResponse } },
      errors: [400, 401, 403, 404, 409],
      async handler(ctx, { params, body }) {
        const r = await requests.setLimits(ctx.state.user!, params.id, body);
        deps.logger.info({ accessRequest: r.id, user: ctx.state.user!.id, limits: r.limits }, 'grant limits set');
        return { id: r.id, limits: requests.limitsOf(r) };
      },
    }),
  ];
}
