import { z } from 'zod';
import { type AnyRouteDef, defineRoute } from '../http/route.js';
import { createClientBody, oauthClient, type OAuthClientsService, toPublicClient } from './clients.js';

const clientParams = z.object({ client_id: z.string().max(200) });

/**
 * The authorization server's client registry (admins only). It lives under /admin/v1, apart from
 * the /svc/v1 API, because it configures the embedded issuer rather than svc's resources.
 */
export function oauthClientRoutes(clients: OAuthClientsService): AnyRouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/admin/v1/clients',
      operationId: 'listOAuthClients',
      summary: 'Registered OAuth clients of the embedded authorization server (admin)',
      tags: ['admin'],
      auth: 'session',
      responses: { 200: { description: 'Clients', schema: z.object({ data: z.array(oauthClient) }) } },
      errors: [401, 403],
      handler: async (ctx) => ({ data: (await clients.list(ctx.state.user!)).map(toPublicClient) }),
    }),
    defineRoute({
      method: 'post',
      path: '/admin/v1/clients',
      operationId: 'createOAuthClient',
      summary: 'Register an OAuth client; a confidential client\'s secret is shown in this answer only',
      tags: ['admin'],
      auth: 'session',
      body: createClientBody,
      responses: {
        201: { description: 'Registered', schema: z.object({ client: oauthClient, client_secret: z.string().optional() }) },
      },
      errors: [400, 401, 403],
      async handler(ctx, { body }) {
        const { client, secret } = await clients.create(ctx.state.user!, body);
        ctx.status = 201;
        return { client: toPublicClient(client), ...(secret ? { client_secret: secret } : {}) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/admin/v1/clients/{client_id}',
      operationId: 'removeOAuthClient',
      summary: 'Remove a client: its approved grants are revoked and its drafts fail',
      tags: ['admin'],
      auth: 'session',
      params: clientParams,
      responses: { 204: { description: 'Removed' } },
      errors: [401, 403, 404],
      async handler(ctx, { params }) {
        await clients.remove(ctx.state.user!, params.client_id);
        ctx.status = 204;
      },
    }),
  ];
}
