import { z } from 'zod';
import type { ErrorCode } from '../errors.js';
import { hasUnsafeUrlCharacter, mcpServerUrl } from '../http/urls.js';
import { clientKinds } from './client-kinds.js';
import { grantLimits, grantUsage, storedLimits } from '../activity/schemas.js';
import { accessRequestStatuses, appRoles } from '../store/schema.js';
import { grantToolChoices, reviewTool, toolPolicies } from '../mcp/policy-schemas.js';

export const MAX_MCP_SERVERS = 32;
export const DRAFT_LIFETIME_MS = 10 * 60 * 1000;

export const appRole = z.enum(appRoles).meta({ id: 'AppRole', description: 'scope_user_user (User) or scope_user_power_user (Power User)' });
export const accessRequestStatus = z.enum(accessRequestStatuses).meta({ id: 'AccessRequestStatus' });

/** A custom issue whose `params.code` becomes the error's wire code (see parseOrThrow). */
const coded = (code: ErrorCode, message: string) => ({ code: 'custom' as const, message, params: { code } });

export const appClientId = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces')
  .describe('OAuth client identifier of the app');

export const requestedEnvelope = z
  .object({
    version: z
      .unknown()
      .superRefine((v, ctx) => {
        if (v !== '1') ctx.addIssue(coded('unsupported_version', 'requested.version must be the string "1"'));
      })
      .transform(() => '1' as const)
      .meta({ type: 'string', enum: ['1'], description: 'Envelope version; only "1" is supported' }),
    mcp_servers: z
      .array(z.object({ url: mcpServerUrl }))
      .max(MAX_MCP_SERVERS, `at most ${MAX_MCP_SERVERS} MCP servers`)
      .optional()
      .transform((servers) => {
        const urls = [...new Set((servers ?? []).map((s) => s.url))];
        return urls.map((url) => ({ url }));
      }),
  })
  .meta({ id: 'RequestedResources', description: 'Versioned resource envelope' });

export const redirectUrl = z
  .string()
  .max(2048)
  .superRefine((value, ctx) => {
    // The WHATWG parser silently drops tabs and newlines and trims controls; what is stored and
    // later shown to the person must be exactly what was checked, so such URLs are refused.
    if (hasUnsafeUrlCharacter(value)) {
      ctx.addIssue(coded('invalid_redirect_url', 'redirect_url must not contain control, whitespace or invisible characters'));
      return;
    }
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      ctx.addIssue(coded('invalid_redirect_url', 'redirect_url must be an absolute URL'));
      return;
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') ctx.addIssue(coded('invalid_redirect_url', 'redirect_url must be http or https'));
    else if (url.username || url.password) ctx.addIssue(coded('invalid_redirect_url', 'redirect_url must not carry credentials'));
    else if (value.includes('#')) ctx.addIssue(coded('invalid_redirect_url', 'redirect_url must not have a fragment'));
  })
  .meta({ format: 'uri' });

export const createAccessRequestBody = z
  .object({
    app_client_id: appClientId,
    flow_type: z.enum(['popup', 'redirect']),
    requested_role: appRole,
    requested: requestedEnvelope,
    redirect_url: redirectUrl.optional(),
  })
  .superRefine((body, ctx) => {
    if (body.flow_type === 'redirect' && !body.redirect_url) {
      ctx.addIssue({ ...coded('missing_redirect_url', 'redirect_url is required when flow_type is redirect'), path: ['redirect_url'] });
    }
  })
  .meta({ id: 'CreateAccessRequest' });

export const createdAccessRequest = z.object({
  id: z.uuid(),
  status: z.literal('draft'),
  review_url: z.string().meta({ format: 'uri' }),
});

export const accessRequestId = z.object({ id: z.string().max(100) });
export const pollQuery = z.object({ app_client_id: appClientId });

export const pollResponse = z
  .object({
    id: z.uuid(),
    status: accessRequestStatus,
    requested_role: appRole,
    approved_role: appRole.optional().describe('Only when approved'),
    access_request_scope: z.string().optional().describe('scope_access_request:<id>; only when approved'),
  })
  .meta({ id: 'AccessRequestPoll' });

export const approvedEnvelope = z.object({
  version: z
    .unknown()
    .superRefine((v, ctx) => {
      if (v !== '1') ctx.addIssue(coded('unsupported_version', 'approved.version must be the string "1"'));
    })
    .transform(() => '1' as const)
    .meta({ type: 'string', enum: ['1'] }),
  mcp_servers: z
    .array(z.object({ url: mcpServerUrl, instance_ids: z.array(z.string().max(100)).max(100) }))
    .max(MAX_MCP_SERVERS)
    .default([]),
});

export const approveBody = z
  .object({
    approved_role: appRole,
    approved: approvedEnvelope.optional(),
    limits: grantLimits.optional().describe('Limits on the grant from the start; change them later with PUT .../limits'),
    tool_policies: toolPolicies.optional().describe('Tool choices for the granted instances (only those); change them later with PUT .../tools'),
  })
  .meta({ id: 'ApproveAccessRequest', description: 'A URL left out, or with no instance ids, is not granted.' });

export const approveResponse = z.object({
  id: z.uuid(),
  status: z.literal('approved'),
  approved_role: appRole,
  access_request_scope: z.string(),
  flow_type: z.enum(['popup', 'redirect']),
  redirect_url: z.string().optional(),
});

export const denyResponse = z.object({
  id: z.uuid(),
  status: z.literal('denied'),
  flow_type: z.enum(['popup', 'redirect']),
  redirect_url: z.string().optional(),
});

export const revokeResponse = z.object({ id: z.uuid(), status: z.literal('revoked') });

const clientKind = z
  .enum(clientKinds)
  .optional()
  .describe('How svc knows the client, in every flow: added by an admin (registered), registered itself (dynamic, RFC 7591), or by its metadata document; absent for a client id no registry knows');

const reviewInstance = z.object({
  id: z.string(),
  name: z.string(),
  url: z.string(),
  enabled: z.boolean(),
  selected: z.boolean().describe('Ticked by default on every review surface: the instance the app named, else the first enabled one'),
  tools_known: z.boolean().optional().describe("Whether svc has the instance's tool list; a draft's review fetches it when it can"),
  tools: z.array(reviewTool).optional().describe('Its tools, their annotations and the choice each gets'),
});

export const reviewResponse = z
  .object({
    id: z.uuid(),
    app_client_id: z.string(),
    app_name: z.string().optional(),
    app_description: z.string().optional(),
    app_registered: z
      .boolean()
      .describe('Whether svc vouches for app_name: an admin registered the client (or it is an API key). False for a client that registered itself or is known only by its metadata document (client_kind says which), and for a client id nobody registered, which is whoever says it is'),
    flow_type: z.enum(['popup', 'redirect']),
    redirect_url: z.string().optional().describe('Redirect flow: where the person is sent after the decision'),
    status: accessRequestStatus,
    requested_role: appRole,
    requested: z.object({ version: z.literal('1'), mcp_servers: z.array(z.object({ url: z.string() })) }),
    created_at: z.string(),
    expires_at: z.string(),
    expires_in_seconds: z.number().int().describe('Seconds of draft life left by the server clock; 0 once decided or expired'),
    max_grantable_role: appRole.describe("The highest role this reviewer may grant for this request"),
    suggested_role: appRole.describe(
      'The role every review surface starts from: the lowest that serves the request (User for a sign-in bound to MCP proxy URLs or the model endpoints), else max_grantable_role',
    ),
    client_kind: clientKind,
    redirect_origin: z.string().optional().describe('Requests made at the authorization endpoint: where the app gets its code after the decision'),
    sign_in_instance_ids: z
      .array(z.string())
      .optional()
      .describe('Requests made at the authorization endpoint for MCP proxy URLs: the instances the app signs in for. Approving with none of them denies the sign-in, since its token could reach nothing.'),
    replaced_by: z.string().optional().describe('Revoked because a later sign-in of the same app and person, for the same resources, replaced it: that request'),
    usage: grantUsage.optional().describe('Once approved: what the app did with the grant'),
    limits: storedLimits.optional().describe('Once approved: the limits the person set'),
    decided_at: z.string().optional().describe('When it was approved or denied; absent while undecided'),
    revoked_at: z.string().optional().describe('When it was revoked; only when revoked'),
    approved_role: appRole.optional(),
    approved: z.object({ version: z.literal('1'), mcp_servers: z.array(z.object({ url: z.string(), instance_ids: z.array(z.string()) })) }).optional(),
    mcp_servers: z.array(z.object({ url: z.string(), instances: z.array(reviewInstance) })).describe("Each requested URL with the reviewer's own instances of it"),
    tool_policies: toolPolicies.optional().describe('Once approved: the tool choices the person set'),
    tool_choices: z.array(grantToolChoices).optional().describe("Once approved: each granted instance's tools and the choice in force for each"),
  })
  .meta({ id: 'AccessRequestReview' });

export const accessRequestSummary = z
  .object({
    id: z.uuid(),
    app_client_id: z.string(),
    app_name: z.string().optional(),
    app_registered: z.boolean().describe('Whether svc vouches for app_name: an admin registered the client (or it is an API key); see client_kind'),
    client_kind: clientKind,
    flow_type: z.enum(['popup', 'redirect']),
    redirect_url: z.string().optional().describe('Redirect flow: where the person is sent after the decision'),
    status: accessRequestStatus,
    requested_role: appRole,
    approved_role: appRole.nullable(),
    requested: z.object({ version: z.literal('1'), mcp_servers: z.array(z.object({ url: z.string() })) }),
    approved: z.object({ version: z.literal('1'), mcp_servers: z.array(z.object({ url: z.string(), instance_ids: z.array(z.string()) })) }).nullable(),
    created_at: z.string(),
    expires_at: z.string(),
    decided_at: z.string().nullable(),
    replaced_by: z.string().optional().describe('Revoked because a later sign-in of the same app and person replaced it: that request'),
    usage: grantUsage.optional().describe('Once approved: what the app did with the grant'),
    limits: storedLimits.optional().describe('Once approved: the limits the person set'),
    user: z.string().nullable().describe('Username of the approver (or denier)'),
  })
  .meta({ id: 'AccessRequestSummary' });

export const listQuery = z.object({
  status: z
    .enum([...accessRequestStatuses, 'pending'])
    .optional()
    // the review page and `svc review` call a draft pending: either word finds it
    .transform((s) => (s === 'pending' ? 'draft' : s))
    .describe('Only requests with this status; `pending` is the same as `draft` (the word the review page and `svc review` use)'),
});
export const listResponse = z.object({ data: z.array(accessRequestSummary) });

export const limitsResponse = z.object({ id: z.uuid(), limits: storedLimits });
