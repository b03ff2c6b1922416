import { z } from 'zod';
import { type AnyRouteDef, defineRoute } from '../http/route.js';
import { alias, aliasId, type ModelCatalog, putAliasBody } from './catalog.js';
import { type ModelDownloads, pullBody, pullJob } from './downloads.js';

const aliasParams = z.object({ id: aliasId });

/** Model alias management (CONTRACT §8): a power user's session or a scope_user_power_user token. */
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
      handler: () => ({ data: catalog.listAliases() }),
    }),
    defineRoute({
      method: 'put',
      path: '/svc/v1/models/{id}',
      operationId: 'putModelAlias',
      summary: 'Create or replace an alias',
      tags: ['models'],
      auth: 'either',
      appRole: 'scope_user_power_user',
      params: aliasParams,
      body: putAliasBody,
      responses: { 200: { description: 'The alias', schema: z.object({ alias }) } },
      errors: [400, 401, 403, 404, 409],
      async handler(_ctx, { params, body }) {
        return { alias: await catalog.putAlias(params.id, body) };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/svc/v1/models/{id}',
      operationId: 'removeModelAlias',
      summary: 'Remove an alias',
      tags: ['models'],
      auth: 'either',
      appRole: 'scope_user_power_user',
      params: aliasParams,
      responses: { 204: { description: 'Removed' } },
      errors: [401, 403, 404],
      async handler(ctx, { params }) {
        await catalog.removeAlias(params.id);
        ctx.status = 204;
      },
    }),
  ];
}

const pullParams = z.object({ id: z.string().max(100) });

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
      body: pullBody,
      responses: { 202: { description: 'Accepted; the job runs in the background', schema: pullJob } },
      errors: [400, 401, 403, 409],
      async handler(ctx, { body }) {
        const job = await downloads.start(body);
        ctx.status = 202;
        ctx.set('Location', `/svc/v1/models/files/pull/${job.id}`);
        return job;
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
      handler: (_ctx, { params }) => downloads.get(params.id),
    }),
    defineRoute({
      method: 'get',
      path: '/svc/v1/models/files/pulls',
      operationId: 'listModelPulls',
      summary: 'All downloads',
      tags: ['models'],
      auth: 'either',
      appRole: 'scope_user_power_user',
      responses: { 200: { description: 'Jobs', schema: z.object({ data: z.array(pullJob) }) } },
      errors: [401, 403],
      handler: () => ({ data: downloads.list() }),
    }),
  ];
}
