import { z } from 'zod';
import { type AnyRouteDef, defineRoute } from '../http/route.js';
import type { AppContext } from '../http/context.js';
import { type AliasActor, alias, aliasId, type ModelCatalog, putAliasBody } from './catalog.js';
import { type ModelDownloads, type PullActor, pullBody, pullJob } from './downloads.js';

const aliasParams = z.object({ id: aliasId });

/** The user behind the call: the app token's approver, or the session's user. */
function aliasActor(ctx: AppContext): AliasActor {
  if (ctx.state.grant) return { userId: ctx.state.grant.user.id, adminSession: false };
  return { userId: ctx.state.user!.id, adminSession: ctx.state.user!.role === 'admin' };
}

const OWNERSHIP = 'An alias belongs to the user who created it: only that user (their session or apps) may replace or remove it, and an admin through their own session. No one else may take a model id that another user\'s alias or a provider already serves (409 model_id_taken).';

/** Model alias management (decisions: The OpenAI proxy): a power user's session or a scope_user_power_user token. */
export function modelAliasRoutes(catalog: ModelCatalog): AnyRouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/svc/v1/models',
      operationId: 'listModelAliases',
      summary: 'Model aliases: public model ids mapped to a provider, an upstream model and default parameters',
      tags: ['models'],
      auth: 'either',
      appRole: 'scope_user_power_user',
      responses: { 200: { description: 'Aliases', schema: z.object({ data: z.array(alias) }) } },
      errors: [401, 403],
      handler: async (ctx) => ({ data: await catalog.listFor(aliasActor(ctx)) }),
    }),
    defineRoute({
      method: 'get',
      path: '/svc/v1/models/available',
      operationId: 'listAvailableModels',
      summary: 'Every model id you (or an app of yours) can call, as /v1/models lists them, each marked alias or provider model',
      tags: ['models'],
      auth: 'either',
      appRole: 'scope_user_user',
      responses: {
        200: {
          description: 'Models',
          schema: z.object({ data: z.array(z.object({ id: z.string(), kind: z.enum(['alias', 'provider']), owned_by: z.string() })) }),
        },
      },
      errors: [401, 403],
      handler: async () => {
        const aliases = new Set((await catalog.listAliases()).map((a) => a.id));
        return { data: (await catalog.listPublic()).map((m) => ({ id: m.id, kind: aliases.has(m.id) ? ('alias' as const) : ('provider' as const), owned_by: m.owned_by })) };
      },
    }),
    defineRoute({
      method: 'put',
      path: '/svc/v1/models/{id}',
      operationId: 'putModelAlias',
      summary: 'Create or replace an alias',
      description: OWNERSHIP,
      tags: ['models'],
      auth: 'either',
      appRole: 'scope_user_power_user',
      params: aliasParams,
      body: putAliasBody,
      responses: { 200: { description: 'The alias', schema: z.object({ alias }) } },
      errors: [400, 401, 403, 404, 409],
      async handler(ctx, { params, body }) {
        const actor = aliasActor(ctx);
        return { alias: catalog.view(await catalog.putAlias(params.id, body, actor), actor) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/svc/v1/models/{id}',
      operationId: 'removeModelAlias',
      summary: 'Remove an alias',
      description: OWNERSHIP,
      tags: ['models'],
      auth: 'either',
      appRole: 'scope_user_power_user',
      params: aliasParams,
      responses: { 204: { description: 'Removed' } },
      errors: [401, 403, 404],
      async handler(ctx, { params }) {
        await catalog.removeAlias(params.id, aliasActor(ctx));
        ctx.status = 204;
      },
    }),
  ];
}

const pullParams = z.object({ id: z.string().max(100) });

function pullActor(ctx: AppContext): PullActor {
  if (ctx.state.grant) return { userId: ctx.state.grant.user.id, app: true, adminSession: false };
  return { userId: ctx.state.user!.id, app: false, adminSession: ctx.state.user!.role === 'admin' };
}

const PULL_RULES =
  'Each download belongs to its user and is visible only to them (their session and their apps). A download started by an app token reaches only public addresses: loopback, link-local, private (RFC 1918, ULA, CGNAT), unspecified and multicast addresses are refused, on the address a host name resolves to when connecting and on every redirect (400 address_not_allowed for such an IP literal; the job fails for a host name). Apps see only whether a job succeeded. A user\'s downloads share a disk quota (svc serve --download-quota, default 50GiB): 409 download_quota_exceeded when it is already used up; a download that would exceed it fails.';

/** Model file downloads (power user: session or scope_user_power_user token). */
export function modelDownloadRoutes(downloads: ModelDownloads): AnyRouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: '/svc/v1/models/files/pull',
      operationId: 'pullModelFile',
      summary: 'Download a model file into <data-dir>/models (resumable, checksum verified); poll the job for progress',
      tags: ['models'],
      auth: 'either',
      appRole: 'scope_user_power_user',
      description: PULL_RULES,
      body: pullBody,
      responses: { 202: { description: 'Accepted; the job runs in the background', schema: pullJob } },
      errors: [400, 401, 403, 409],
      async handler(ctx, { body }) {
        const actor = pullActor(ctx);
        const job = await downloads.start(body, actor);
        ctx.status = 202;
        ctx.set('Location', `/svc/v1/models/files/pull/${job.id}`);
        return downloads.view(job, actor);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/svc/v1/models/files/pull/{id}',
      operationId: 'getModelPull',
      summary: 'Progress of a download',
      tags: ['models'],
      auth: 'either',
      appRole: 'scope_user_power_user',
      params: pullParams,
      responses: { 200: { description: 'The job', schema: pullJob } },
      errors: [401, 403, 404],
      handler: (ctx, { params }) => downloads.get(params.id, pullActor(ctx)),
    }),
    defineRoute({
      method: 'get',
      path: '/svc/v1/models/files/pulls',
      operationId: 'listModelPulls',
      summary: 'Your downloads',
      tags: ['models'],
      auth: 'either',
      appRole: 'scope_user_power_user',
      responses: { 200: { description: 'Jobs', schema: z.object({ data: z.array(pullJob) }) } },
      errors: [401, 403],
      handler: async (ctx) => ({ data: await downloads.list(pullActor(ctx)) }),
    }),
  ];
}
