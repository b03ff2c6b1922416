import type { AppDeps } from '../http/context.js';
import { type AnyRouteDef, defineRoute } from '../http/route.js';
import type { ApiKeyRecord, AccessRequestRecord } from '../store/schema.js';
import { createdKey, createKeyBody, keyList, keyParams, revokedKey } from './schemas.js';
import { type ApiKeysService, keyClientId, keyStatus } from './service.js';

export function apiKeyRoutes(deps: AppDeps, keys: ApiKeysService): AnyRouteDef[] {
  const usernameOf = async (userId: string) => (await deps.repos.users.get(userId))?.username ?? null;
  const view = async (key: ApiKeyRecord, request: AccessRequestRecord | undefined) => ({
    id: key.id,
    name: key.name,
    role: request?.approved_role ?? 'scope_user_user',
    status: keyStatus(key, request, deps.clock()),
    access_request_id: key.access_request_id,
    app_client_id: keyClientId(key.id),
    mcp_servers: request?.approved?.mcp_servers ?? [],
    created_at: key.created_at,
    expires_at: key.expires_at,
    revoked_at: key.revoked_at ?? request?.revoked_at ?? null,
    user: await usernameOf(key.user_id),
  });
  return [
    defineRoute({
      method: 'post',
      path: '/svc/v1/keys',
      operationId: 'createApiKey',
      summary: 'Create an API key: an access request made and approved by you at once (same privilege rules); the key is in this answer only',
      tags: ['keys'],
      auth: 'session',
      body: createKeyBody,
      responses: { 201: { description: 'Created; `key` is never shown again', schema: createdKey } },
      errors: [400, 401, 403, 409],
      async handler(ctx, { body }) {
        const user = ctx.state.user!;
        const { key, record, request } = await keys.create(user, body);
        deps.logger.info({ apiKey: record.id, accessRequest: request.id, user: user.id, role: request.approved_role }, 'API key created');
        ctx.status = 201;
        return { ...(await view(record, request)), key };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/svc/v1/keys',
      operationId: 'listApiKeys',
      summary: 'Your API keys (admins: everyone\'s), newest first; never the keys themselves',
      tags: ['keys'],
      auth: 'session',
      responses: { 200: { description: 'Keys', schema: keyList } },
      errors: [401],
      async handler(ctx) {
        return { data: await Promise.all((await keys.list(ctx.state.user!)).map(async (k) => view(k, await keys.requestOf(k)))) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/svc/v1/keys/{id}/revoke',
      operationId: 'revokeApiKey',
      summary: 'Revoke an API key and its access request (its owner or an admin); it fails on its next call',
      tags: ['keys'],
      auth: 'session',
      params: keyParams,
      responses: { 200: { description: 'Revoked', schema: revokedKey } },
      errors: [400, 401, 403, 404, 409],
      async handler(ctx, { params }) {
        const key = await keys.revoke(ctx.state.user!, params.id);
        deps.logger.info({ apiKey: key.id, accessRequest: key.access_request_id, user: ctx.state.user!.id }, 'API key revoked');
        return { id: key.id, status: 'revoked' as const, access_request_id: key.access_request_id };
      },
    }),
  ];
}
