import { z } from 'zod';
import { codesFor } from '../errors.js';
import type { AnyRouteDef } from '../http/route.js';

export const errorSchema = z
  .object({
    error: z.object({
      message: z.string(),
      type: z.string().describe('invalid_request_error, authentication_error, forbidden_error, not_found_error, conflict_error, rate_limit_error, upstream_error, server_error'),
      code: z.string().describe('Stable machine-readable code, e.g. invalid_body, unsupported_version, privilege_escalation'),
      param: z.string().optional(),
    }),
  })
  .meta({ id: 'Error' });

const statusText: Record<number, string> = {
  400: 'Invalid request (see error.code)',
  401: 'Not logged in / invalid credentials',
  403: 'Not allowed (see error.code)',
  404: 'Not found',
  405: 'Method not allowed here (Allow)',
  409: 'Conflict: already processed or expired',
  413: 'Body too large',
  415: 'Unsupported media type',
  429: 'Rate limited (Retry-After)',
  502: 'Upstream unreachable, broken off or refusing svc (upstream_unavailable, upstream_rejected)',
  503: 'Unavailable for now (Retry-After)',
  504: 'Upstream did not answer in time (upstream_timeout)',
};

type JsonSchema = Record<string, unknown>;

/**
 * OpenAPI 3.1 from the same zod schemas that validate requests. Schemas that carry a meta `id`
 * become shared components; the rest are inlined.
 */
export function buildOpenApi(routes: AnyRouteDef[], info: { version: string; serverUrl: string }): JsonSchema {
  const components: Record<string, JsonSchema> = {};

  const convert = (schema: z.ZodType, io: 'input' | 'output'): JsonSchema => {
    const json = z.toJSONSchema(schema, {
      target: 'draft-2020-12',
      io,
      unrepresentable: 'any',
      reused: 'inline',
      override: (c) => {
        delete (c.jsonSchema as JsonSchema).$schema;
      },
      cycles: 'ref',
    }) as JsonSchema & { $defs?: Record<string, JsonSchema> };
    for (const [name, def] of Object.entries(json.$defs ?? {})) components[name] = rewriteRefs(def);
    delete json.$defs;
    delete json.$schema;
    return rewriteRefs(json);
  };

  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const parameters: unknown[] = [];
    for (const [where, schema] of [
      ['path', route.params],
      ['query', route.query],
    ] as const) {
      if (!schema) continue;
      const json = convert(schema, 'input') as { properties?: Record<string, JsonSchema>; required?: string[] };
      for (const [name, prop] of Object.entries(json.properties ?? {})) {
        parameters.push({ name, in: where, required: where === 'path' || (json.required ?? []).includes(name), schema: prop });
      }
    }
    const responses: Record<string, unknown> = {};
    for (const [status, doc] of Object.entries(route.responses)) {
      responses[status] = doc.schema
        ? { description: doc.description, content: { [doc.contentType ?? 'application/json']: { schema: convert(doc.schema, 'output') } } }
        : { description: doc.description };
    }
    for (const status of route.errors ?? []) {
      responses[String(status)] = {
        // the codes this status can carry, from the one catalogue (src/errors.ts)
        description: `${statusText[status] ?? 'Error'}. Codes: ${codesFor(Number(status)).join(', ') || 'see error.code'}`,
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      };
    }
    const operation: Record<string, unknown> = {
      operationId: route.operationId,
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      tags: route.tags,
      security:
        route.auth === 'session' ? [{ session: [] }] : route.auth === 'bearer' ? [{ bearer: [] }] : route.auth === 'either' ? [{ session: [] }, { bearer: [] }] : [],
      ...(parameters.length ? { parameters } : {}),
      ...(route.body ? { requestBody: { required: true, content: { 'application/json': { schema: convert(route.body, 'input') } } } } : {}),
      responses,
    };
    paths[route.path] ??= {};
    paths[route.path][route.method] = operation;
  }
  components.Error = convert(errorSchema, 'output');
  delete components.Error.id;

  return {
    openapi: '3.1.0',
    info: {
      title: 'svc',
      version: info.version,
      description:
        'Consent-based, scoped access for third-party apps to local AI. Every error is `{"error": {"message", "type", "code", "param"?}}`.',
    },
    servers: [{ url: info.serverUrl }],
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        session: { type: 'apiKey', in: 'cookie', name: 'svc_session', description: 'Set by POST /svc/v1/auth/login or /ui/login' },
        bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
      },
    },
  };
}

/** zod emits `#/$defs/X`; OpenAPI wants `#/components/schemas/X`. */
function rewriteRefs<T>(value: T): T {
  if (Array.isArray(value)) return value.map(rewriteRefs) as T;
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      out[k] = k === '$ref' && typeof v === 'string' ? v.replace('#/$defs/', '#/components/schemas/') : rewriteRefs(v);
    }
    return out as T;
  }
  return value;
}
