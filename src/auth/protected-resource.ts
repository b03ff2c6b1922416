import { z } from 'zod';
import type { AppDeps } from '../http/context.js';
import { defineRoute } from '../http/route.js';
import { mcpProxyInstance, mcpProxyPath } from '../oauth/resources.js';
import { appRoles } from '../store/schema.js';

export const PROTECTED_RESOURCE_PATH = '/.well-known/oauth-protected-resource';

/**
 * The RFC 9728 document that describes the resource a request path belongs to: an MCP proxy URL
 * has its own path-suffixed document (MCP hosts bind their token to that URL); everything else
 * is described by the base document.
 */
export function metadataUrlFor(base: string, path: string): string {
  const instanceId = mcpProxyInstance(path);
  return `${base}${PROTECTED_RESOURCE_PATH}${instanceId ? mcpProxyPath(instanceId) : ''}`;
}

const metadata = z.object({
  resource: z.string(),
  authorization_servers: z.array(z.string()),
  bearer_methods_supported: z.array(z.string()),
  scopes_supported: z.array(z.string()),
  resource_name: z.string(),
  resource_documentation: z.string(),
});

const describe = (deps: AppDeps, issuer: string, resource: string, name: string, scopes: readonly string[] = appRoles) => ({
  resource,
  authorization_servers: [issuer],
  bearer_methods_supported: ['header'],
  // The roles a client may ask for here; the token it gets carries the access request it was approved as.
  scopes_supported: [...scopes],
  resource_name: name,
  resource_documentation: `${deps.baseUrl()}/swagger-ui`,
});

/**
 * RFC 9728 metadata, named by every 401's WWW-Authenticate so an app can find the issuer: one for
 * the whole service, one per MCP proxy URL. Served with open CORS (app-cors), like the AS's.
 */
export function protectedResourceRoutes(deps: AppDeps, issuer: string) {
  return [
    defineRoute({
      method: 'get',
      path: PROTECTED_RESOURCE_PATH,
      operationId: 'protectedResourceMetadata',
      summary: 'OAuth 2.0 Protected Resource Metadata (RFC 9728) of the whole service',
      tags: ['oauth'],
      auth: 'none',
      responses: { 200: { description: 'Metadata', schema: metadata } },
      handler: () => describe(deps, issuer, deps.config.audience ?? deps.baseUrl(), 'svc'),
    }),
    defineRoute({
      method: 'get',
      path: `${PROTECTED_RESOURCE_PATH}/svc/v1/apps/mcps/{id}/mcp`,
      operationId: 'mcpProtectedResourceMetadata',
      summary: "RFC 9728 metadata of one MCP proxy URL: its `resource` is that URL, so a host's token is bound to it",
      tags: ['oauth'],
      auth: 'none',
      params: z.object({ id: z.string().regex(/^[A-Za-z0-9-]{1,100}$/) }),
      responses: { 200: { description: 'Metadata', schema: metadata } },
      errors: [400],
      // A token bound to an MCP proxy URL is used there only, where User is all any call needs;
      // hosts ask for every scope listed, so Power User is not offered.
      handler: (_ctx, { params }) => describe(deps, issuer, `${deps.baseUrl()}${mcpProxyPath(params.id)}`, `svc MCP proxy ${params.id}`, ['scope_user_user']),
    }),
  ];
}
