import type { AppDeps } from '../http/context.js';
import { type AnyRouteDef, defineRoute } from '../http/route.js';
import type { HeldCalls } from './held-calls.js';
import type { ToolPolicies } from './policies.js';
import { approveCallBody, callIdParam, forgetQuery, heldCall, heldCallList, heldCallQuery, setToolsResponse, toolPolicies } from './policy-schemas.js';
import { z } from 'zod';

const requestId = z.object({ id: z.string().max(100) });

/**
 * The person's side of tool choices and held calls: the session API that `svc calls`, `svc
 * requests tools`, `svc review` and the /ui/calls page all use. Only a grant's approver (or an
 * admin) sees or decides its calls; to anyone else they do not exist (404). An app's token is
 * no session, so no app can decide its own calls.
 */
export function callRoutes(deps: AppDeps, held: HeldCalls, policies: ToolPolicies): AnyRouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/svc/v1/calls',
      operationId: 'listHeldCalls',
      summary: 'Tool calls held for your decision (and those decided in the last hour), newest first',
      description: 'A call of a tool whose choice is ask waits here until its grant\'s approver (or an admin) approves or denies it, or --call-approval-timeout passes. A call waits in the daemon that holds the app\'s request: one held when that daemon stops is never run. On a team server every replica lists and decides every held call.',
      tags: ['calls'],
      auth: 'session',
      query: heldCallQuery,
      responses: { 200: { description: 'Held calls', schema: heldCallList } },
      errors: [400, 401],
      handler: async (ctx, { query }) => ({ data: await held.list(ctx.state.user!, query.status) }),
    }),
    defineRoute({
      method: 'post',
      path: '/svc/v1/calls/{id}/approve',
      operationId: 'approveHeldCall',
      summary: 'Send a held tool call upstream, exactly as held, once; the app gets the upstream\'s answer',
      tags: ['calls'],
      auth: 'session',
      params: callIdParam,
      body: approveCallBody,
      responses: { 200: { description: 'Approved', schema: heldCall } },
      errors: [400, 401, 403, 404, 409],
      handler: (ctx, { params, body }) => held.decide(ctx.state.user!, params.id, 'approved', body?.remember_minutes),
    }),
    defineRoute({
      method: 'post',
      path: '/svc/v1/calls/{id}/deny',
      operationId: 'denyHeldCall',
      summary: 'Decline a held tool call: the app gets a tool result (isError) saying the person declined',
      tags: ['calls'],
      auth: 'session',
      params: callIdParam,
      responses: { 200: { description: 'Denied', schema: heldCall } },
      errors: [401, 403, 404, 409],
      handler: (ctx, { params }) => held.decide(ctx.state.user!, params.id, 'denied'),
    }),
    defineRoute({
      method: 'put',
      path: '/svc/v1/access-requests/{id}/tools',
      operationId: 'setGrantTools',
      summary: "Change a grant's tool choices (its approver or an admin); the next call is held to them",
      description: 'Merges into the choices in force: a default or a tool given here replaces the one set; null removes it (back to the annotations, or to the default).',
      tags: ['review'],
      auth: 'session',
      params: requestId,
      body: toolPolicies,
      responses: { 200: { description: 'The choices now in force', schema: setToolsResponse } },
      errors: [400, 401, 403, 404, 409],
      async handler(ctx, { params, body }) {
        const r = await policies.set(ctx.state.user!, params.id, body);
        deps.logger.info({ accessRequest: r.id, user: ctx.state.user!.id, instances: Object.keys(body).length }, 'grant tool choices set');
        return { id: r.id, tool_policies: r.tool_policies ?? {}, tool_choices: await policies.grantChoices(r) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/svc/v1/access-requests/{id}/remembered',
      operationId: 'forgetRememberedApprovals',
      summary: "End a grant's remembered approvals (its approver or an admin): the next call of each tool is held again",
      description:
        "All of the grant's, or one instance's (instance_id), or one tool's of it (instance_id and tool). They are listed in each instance's tool_choices as remembered. A change of a tool's choice, of an instance's default, or of the instance ends them too.",
      tags: ['review'],
      auth: 'session',
      params: requestId,
      query: forgetQuery,
      responses: { 200: { description: 'The choices now in force, with the approvals still remembered', schema: setToolsResponse } },
      errors: [400, 401, 403, 404],
      async handler(ctx, { params, query }) {
        const r = await policies.forget(ctx.state.user!, params.id, query);
        deps.logger.info({ accessRequest: r.id, user: ctx.state.user!.id, instance: query.instance_id ?? null, tool: query.tool?.slice(0, 100) ?? null }, 'remembered approvals ended');
        return { id: r.id, tool_policies: r.tool_policies ?? {}, tool_choices: await policies.grantChoices(r) };
      },
    }),
  ];
}
