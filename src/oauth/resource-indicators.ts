import type { AccessRequestsService } from '../access-requests/service.js';
import { ACCESS_REQUEST_SCOPE_PREFIX } from '../auth/bearer.js';
import type { McpInstancesService } from '../mcp/instances.js';
import { appRoles } from '../store/schema.js';
import type { OidcCtx, OidcErrors, OidcModel } from './load.js';
import { resourceTarget } from './resources.js';
import { grantedRequestScope } from './token-claims.js';
import { ACCESS_TOKEN_TTL_S } from './token-family.js';

/** What oidc-provider is told about a resource server: its audience, the scopes it takes, and JWT access tokens. */
export const resourceServerInfo = (canonical: string, scopes: string[]) => ({
  scope: [...new Set([...appRoles, ...scopes])].join(' '),
  audience: canonical,
  accessTokenTTL: ACCESS_TOKEN_TTL_S,
  accessTokenFormat: 'jwt' as const,
  jwt: { sign: { alg: 'ES256' } },
});

export type TargetOf = (resource: string) => Promise<NonNullable<ReturnType<typeof resourceTarget>>>;

/** A resource value of this daemon, normalised, or invalid_target (another origin, an unknown path or instance). */
export function resourceTargets(base: string, instances: McpInstancesService, errors: OidcErrors): TargetOf {
  return async function targetOf(resource: string) {
    const found = resourceTarget(base, resource);
    if (!found) throw new errors.InvalidTarget(`${resource} is not a resource of this svc: use ${base}, ${base}/v1 or an MCP proxy URL (svc mcp list)`);
    if (found.target.kind === 'mcp' && !(await instances.find(found.target.instanceId))) {
      throw new errors.InvalidTarget('no MCP instance has that proxy URL');
    }
    return found;
  };
}

/**
 * oidc-provider's `resourceIndicators` feature (RFC 8707): every token is bound to one resource of
 * this daemon, `audience` when none is named.
 */
export function resourceIndicators(opts: {
  audience: string;
  targetOf: TargetOf;
  requests: AccessRequestsService;
  errors: OidcErrors;
  /** ends a grant and every token of it */
  endTokenFamily: (grantId: string) => Promise<void>;
}) {
  const { audience, targetOf, requests, errors, endTokenFamily } = opts;
  return {
    enabled: true,
    defaultResource: async () => audience,
    useGrantedResource: async () => true,
    async getResourceServerInfo(ctx: OidcCtx, resource: string, client: OidcModel) {
      const { canonical } = await targetOf(resource);
      if (ctx.oidc.route !== 'token') {
        // svc's own flow names the approved request in the scope; a standard client names a role.
        const accountId = ctx.oidc.session?.accountId;
        return resourceServerInfo(canonical, await requests.approvedScopesFor(client.clientId, accountId));
      }
      // At the token endpoint the grant must still stand on an approved access request of this
      // client and user; if not, the whole token family ends here.
      const entities = ctx.oidc.entities as { Grant?: OidcModel; AuthorizationCode?: OidcModel; RefreshToken?: OidcModel };
      const source = entities.AuthorizationCode ?? entities.RefreshToken;
      const grant = entities.Grant ?? (source?.grantId ? await ctx.oidc.provider.Grant.find(source.grantId) : undefined);
      const scope = grantedRequestScope(grant, resource);
      const record = scope ? await requests.get(scope.slice(ACCESS_REQUEST_SCOPE_PREFIX.length)) : undefined;
      if (!scope || !record || record.status !== 'approved' || record.app_client_id !== client.clientId || record.user_id !== source?.accountId) {
        if (source?.grantId) await endTokenFamily(source.grantId);
        throw new errors.InvalidGrant('the access request behind this grant is no longer approved');
      }
      return resourceServerInfo(canonical, [scope]);
    },
  };
}
