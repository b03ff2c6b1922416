import { type AnyRouteDef, defineRoute } from '../http/route.js';
import { type McpInstancesService, toPublicInstance } from './instances.js';
import { createInstanceBody, instanceList, instanceParams, instanceResponse, updateInstanceBody } from './schemas.js';

/** The owner's MCP instance registry (session). The app-facing /svc/v1/apps/mcps routes are separate. */
export function mcpInstanceRoutes(instances: McpInstancesService, baseUrl: () => string): AnyRouteDef[] {
  const view = (m: Parameters<typeof toPublicInstance>[0]) => toPublicInstance(m, baseUrl(), instances.processesOf(m));
  return [
    defineRoute({
      method: 'get',
      path: '/svc/v1/mcps',
      operationId: 'listMcpInstances',
      summary: 'Your MCP server instances',
      tags: ['mcp'],
      auth: 'session',
      responses: { 200: { description: 'Instances', schema: instanceList } },
      errors: [401],
      handler: async (ctx) => ({ data: (await instances.listOwned(ctx.state.user!)).map(view) }),
    }),
    defineRoute({
      method: 'post',
      path: '/svc/v1/mcps',
      operationId: 'createMcpInstance',
      summary: 'Register an MCP server instance: an HTTP server at a URL, or (admins only) a command svc runs; header and env values are stored encrypted and never shown again',
      tags: ['mcp'],
      auth: 'session',
      body: createInstanceBody,
      responses: { 201: { description: 'Created', schema: instanceResponse } },
      errors: [400, 401, 403],
      async handler(ctx, { body }) {
        const instance = await instances.create(ctx.state.user!, body);
        ctx.status = 201;
        return { instance: view(instance) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/svc/v1/mcps/{id}',
      operationId: 'getMcpInstance',
      summary: 'One of your MCP server instances',
      tags: ['mcp'],
      auth: 'session',
      params: instanceParams,
      responses: { 200: { description: 'The instance', schema: instanceResponse } },
      errors: [401, 404],
      handler: async (ctx, { params }) => ({ instance: view(await instances.getOwned(ctx.state.user!, params.id)) }),
    }),
    defineRoute({
      method: 'patch',
      path: '/svc/v1/mcps/{id}',
      operationId: 'updateMcpInstance',
      summary: "Enable, disable, rename, or change the headers or tool allow-list of an instance; a command instance's command, env or URL (admins only)",
      tags: ['mcp'],
      auth: 'session',
      params: instanceParams,
      body: updateInstanceBody,
      responses: { 200: { description: 'Updated', schema: instanceResponse } },
      errors: [400, 401, 403, 404],
      async handler(ctx, { params, body }) {
        return { instance: view(await instances.update(ctx.state.user!, params.id, body)) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/svc/v1/mcps/{id}',
      operationId: 'removeMcpInstance',
      summary: 'Remove an instance (grants that named it lose it); a command instance: admins only',
      tags: ['mcp'],
      auth: 'session',
      params: instanceParams,
      responses: { 204: { description: 'Removed' } },
      errors: [401, 403, 404],
      async handler(ctx, { params }) {
        await instances.remove(ctx.state.user!, params.id);
        ctx.status = 204;
      },
    }),
  ];
}
