import { z } from 'zod';
import { type AnyRouteDef, defineRoute } from '../http/route.js';
import { createProviderBody, provider, providerParams } from './schemas.js';
import { type ProvidersService, toPublicProvider } from './service.js';

/** Provider management (session, power user and above). Keys go in, never out. */
export function providerRoutes(providers: ProvidersService): AnyRouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/svc/v1/providers',
      operationId: 'listProviders',
      summary: 'Upstream OpenAI-compatible model servers',
      tags: ['providers'],
      auth: 'session',
      responses: { 200: { description: 'Providers', schema: z.object({ data: z.array(provider) }) } },
      errors: [401, 403],
      async handler(ctx) {
        providers.requirePowerUser(ctx.state.user!);
        return { data: (await providers.list()).map(toPublicProvider) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/svc/v1/providers',
      operationId: 'createProvider',
      summary: 'Add a provider; its models are discovered from its GET /models',
      tags: ['providers'],
      auth: 'session',
      body: createProviderBody,
      responses: { 201: { description: 'Added', schema: z.object({ provider }) } },
      errors: [400, 401, 403, 409],
      async handler(ctx, { body }) {
        const p = await providers.create(ctx.state.user!, body);
        ctx.status = 201;
        return { provider: toPublicProvider(p) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/svc/v1/providers/{name}/refresh',
      operationId: 'refreshProvider',
      summary: "Ask the provider for its models again",
      tags: ['providers'],
      auth: 'session',
      params: providerParams,
      responses: { 200: { description: 'Refreshed (see discovery_error)', schema: z.object({ provider }) } },
      errors: [401, 403, 404],
      async handler(ctx, { params }) {
        return { provider: toPublicProvider(await providers.refresh(ctx.state.user!, params.name)) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/svc/v1/providers/{name}',
      operationId: 'removeProvider',
      summary: 'Remove a provider and the aliases that point at it',
      tags: ['providers'],
      auth: 'session',
      params: providerParams,
      responses: { 204: { description: 'Removed' } },
      errors: [401, 403, 404],
      async handler(ctx, { params }) {
        await providers.remove(ctx.state.user!, params.name);
        ctx.status = 204;
      },
    }),
  ];
}
