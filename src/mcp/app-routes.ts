import { z } from 'zod';
import { notFound } from '../errors.js';
import type { AppContext } from '../http/context.js';
import { type AnyRouteDef, defineRoute } from '../http/route.js';
import type { McpInstanceRecord } from '../store/schema.js';
import type { McpInstancesService } from './instances.js';
import { instanceParams } from './schemas.js';

export const appMcpInstance = z
  .object({
    id: z.string(),
    name: z.string(),
    url: z.string(),
    enabled: z.boolean(),
    tools: z.array(z.object({ name: z.string(), description: z.string().optional(), input_schema: z.unknown() })).optional(),
  })
  .meta({ id: 'AppMcpInstance' });

/** The instances a Bearer call's grant names that still exist; never another user's. */
export function grantedInstances(ctx: AppContext, instances: McpInstancesService): McpInstanceRecord[] {
  const grant = ctx.state.grant!;
  const ids = new Set(grant.record.approved?.mcp_servers.flatMap((s) => s.instance_ids) ?? []);
  return instances.listOwned(grant.user).filter((m) => ids.has(m.id));
}

export function grantedInstance(ctx: AppContext, instances: McpInstancesService, id: string): McpInstanceRecord {
  const found = grantedInstances(ctx, instances).find((m) => m.id === id);
  if (!found) throw notFound('No MCP instance with that id in this grant.');
  return found;
}

const toAppInstance = (m: McpInstanceRecord) => ({ id: m.id, name: m.name, url: m.url, enabled: m.enabled });

/** App-facing MCP instance endpoints (SPEC 4.4); any app token (scope_user_user or above). */
export function appMcpRoutes(instances: McpInstancesService): AnyRouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/svc/v1/apps/mcps',
      operationId: 'listAppMcpInstances',
      summary: "The MCP instances in this token's grant",
      tags: ['apps'],
      auth: 'bearer',
      responses: { 200: { description: 'Instances', schema: z.object({ data: z.array(appMcpInstance) }) } },
      errors: [401, 403],
      handler: (ctx) => ({ data: grantedInstances(ctx, instances).map(toAppInstance) }),
    }),
    defineRoute({
      method: 'get',
      path: '/svc/v1/apps/mcps/{id}',
      operationId: 'getAppMcpInstance',
      summary: "One MCP instance of this token's grant (others are 404)",
      tags: ['apps'],
      auth: 'bearer',
      params: instanceParams,
      responses: { 200: { description: 'The instance', schema: appMcpInstance } },
      errors: [401, 403, 404],
      handler: (ctx, { params }) => toAppInstance(grantedInstance(ctx, instances, params.id)),
    }),
  ];
}
