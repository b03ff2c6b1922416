import { resourceNeedsPowerUser } from '../oauth/resources.js';
import type { AccessRequestRecord, AppRole, McpInstanceRecord, UserRecord } from '../store/schema.js';
import { appDisplayName, type ClientKind } from './client-kinds.js';
import type { AccessRequestsService } from './service.js';
import type { grantToolChoices, reviewTool } from '../mcp/policy-schemas.js';
import type { z } from 'zod';

type ReviewTool = z.infer<typeof reviewTool>;
type GrantToolChoices = z.infer<typeof grantToolChoices>;

/** What a review shows of tools: each instance's tools with their choices, and a grant's choices in force. */
export interface ToolReview {
  forReview(record: AccessRequestRecord, instances: McpInstanceRecord[]): Promise<Map<string, { tools_known: boolean; tools: ReviewTool[] }>>;
  grantChoices(record: AccessRequestRecord): Promise<GrantToolChoices[]>;
}

/**
 * What the review surfaces show of a request: the client as the registry knows it, and the whole
 * review data. Apart from the routes, so the pages and the API build them alike without the pages
 * reaching into a routes file.
 */

/** The origin a redirect URI sends the person to (a private-use scheme has none: the scheme then). */
function originOf(uri: string): string {
  try {
    const url = new URL(uri);
    return url.origin !== 'null' ? url.origin : `${url.protocol}//${url.host}`;
  } catch {
    return uri.slice(0, 200);
  }
}

export type AppInfo = Awaited<ReturnType<AccessRequestsService['appInfoFor']>>;

/**
 * How svc knows the client, whatever flow the request came by: from the registry (added by an
 * admin, or registered itself), else by the metadata document the authorization server fetched
 * for it. A client id alone, as any app may send to request-access, proves nothing.
 */
function clientKindOf(record: AccessRequestRecord, app: AppInfo): ClientKind | undefined {
  if (app?.kind) return app.kind;
  return record.authorize?.client_kind === 'metadata_document' ? 'metadata_document' : undefined;
}

/** The client as every review surface shows it: its name, and whether that name is vouched for. */
export function clientView(record: AccessRequestRecord, app: AppInfo) {
  const kind = clientKindOf(record, app);
  const name = app?.name ?? record.authorize?.client_name;
  return {
    ...(name ? { app_name: appDisplayName(name) } : {}),
    // vouched for: an admin registered it, or it is one of svc's own API keys
    app_registered: app !== undefined && kind !== 'dynamic',
    ...(kind ? { client_kind: kind } : {}),
  };
}

/**
 * The role every review surface starts from: the lowest that serves what the request is for. A
 * sign-in whose token is bound to MCP proxy URLs or the model endpoints can use nothing a Power
 * User adds, so User; otherwise the requested role, capped at what this reviewer may grant.
 */
function suggestedRole(record: AccessRequestRecord, cap: AppRole, base: string): AppRole {
  const resources = record.authorize?.resources;
  if (!resources) return cap;
  const needsPowerUser = resources.length === 0 || resources.some((r) => resourceNeedsPowerUser(base, r));
  return needsPowerUser ? cap : 'scope_user_user';
}

export async function reviewView(service: AccessRequestsService, record: AccessRequestRecord, reviewer: UserRecord, now: number, owned: McpInstanceRecord[], base: string, tools?: ToolReview) {
  const app = await service.appInfoFor(record);
  const requestedUrls = new Set(record.requested.mcp_servers.map((s) => s.url));
  const toolsOf = tools ? await tools.forReview(record, owned.filter((m) => requestedUrls.has(m.url))) : undefined;
  const granted = record.status === 'approved' || record.status === 'revoked';
  const choices = tools && granted ? await tools.grantChoices(record) : undefined;
  const cap = service.maxGrantable(record, reviewer);
  const { app_name, ...client } = clientView(record, app);
  return {
    id: record.id,
    app_client_id: record.app_client_id,
    ...(app_name ? { app_name } : {}),
    ...(app?.description ? { app_description: app.description } : {}),
    ...client,
    flow_type: record.flow_type,
    ...(record.redirect_url ? { redirect_url: record.redirect_url } : {}),
    status: record.status,
    requested_role: record.requested_role,
    requested: record.requested,
    created_at: record.created_at,
    expires_at: record.expires_at,
    expires_in_seconds: record.status === 'draft' ? Math.max(0, Math.floor((Date.parse(record.expires_at) - now) / 1000)) : 0,
    max_grantable_role: cap,
    suggested_role: suggestedRole(record, cap, base),
    ...(record.approved_role ? { approved_role: record.approved_role } : {}),
    ...(record.approved ? { approved: record.approved } : {}),
    ...(record.authorize ? { redirect_origin: originOf(record.authorize.redirect_uri) } : {}),
    ...(record.authorize?.suggested_instance_ids.length ? { sign_in_instance_ids: record.authorize.suggested_instance_ids } : {}),
    ...(record.replaced_by ? { replaced_by: record.replaced_by } : {}),
    ...(await service.figuresOf(record)),
    ...(record.decided_at ? { decided_at: record.decided_at } : {}),
    ...(record.revoked_at ? { revoked_at: record.revoked_at } : {}),
    mcp_servers: record.requested.mcp_servers.map(({ url }) => {
      const mine = owned.filter((m) => m.url === url);
      // The one default every surface starts from: the instance the app's request named (an MCP
      // host's resource), else the first enabled one.
      const suggested = mine.find((m) => m.enabled && record.authorize?.suggested_instance_ids.includes(m.id));
      const pick = (suggested ?? mine.find((m) => m.enabled))?.id;
      return { url, instances: mine.map((m) => ({ id: m.id, name: m.name, url: m.url, enabled: m.enabled, selected: m.id === pick, ...(m.oauth?.status === 'needs_sign_in' ? { needs_sign_in: true } : {}), ...toolsOf?.get(m.id) })) };
    }),
    ...(granted && tools ? { tool_policies: record.tool_policies ?? {}, tool_choices: choices } : {}),
  };
}

