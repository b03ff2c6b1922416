import { z } from 'zod';
import type { AppDeps } from '../http/context.js';
import { defineRoute } from '../http/route.js';
import { appRoles } from '../store/schema.js';

export const PROTECTED_RESOURCE_PATH = '/.well-known/oauth-protected-resource';

const metadata = z.object({
  resource: z.string(),
  authorization_servers: z.array(z.string()),
  bearer_methods_supported: z.array(z.string()),
  scopes_supported: z.array(z.string()),
  resource_name: z.string(),
  resource_documentation: z.string(),
});

/** RFC 9728 metadata, named by every 401's WWW-Authenticate so an app can find the issuer. */
export function protectedResourceRoute(deps: AppDeps, issuer: string) {
  return defineRoute({
    method: 'get',
    path: PROTECTED_RESOURCE_PATH,
    operationId: 'protectedResourceMetadata',
    summary: 'OAuth 2.0 Protected Resource Metadata (RFC 9728)',
    tags: ['oauth'],
    auth: 'none',
    responses: { 200: { description: 'Metadata', schema: metadata } },
    handler: () => ({
      resource: deps.config.audience ?? deps.baseUrl(),
      authorization_servers: [issuer],
      bearer_methods_supported: ['header'],
      scopes_supported: ['scope_access_request:<id>', ...appRoles],
      resource_name: 'svc',
      resource_documentation: `${deps.baseUrl()}/swagger-ui`,
    }),
  });
}
