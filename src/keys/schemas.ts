import { z } from 'zod';
import { appRole, MAX_MCP_SERVERS } from '../access-requests/schemas.js';
import { mcpServerUrl } from '../http/urls.js';

/** The longest lifetime `expires_in` accepts: ten years (seconds). */
export const MAX_KEY_LIFETIME_S = 10 * 365 * 24 * 3600;

export const keyName = z.string().trim().min(1).max(100).regex(/^[^\0-\x1f\x7f]+$/, 'must be printable');

const grantedServers = z
  .array(z.object({ url: mcpServerUrl, instance_ids: z.array(z.string().max(100)).min(1).max(100) }))
  .max(MAX_MCP_SERVERS)
  .describe('MCP instances the key may use, per server URL: your own, enabled instances of that URL');

export const createKeyBody = z
  .strictObject({
    name: keyName.describe('What the key is for, e.g. "Open WebUI"; shown in lists, never secret'),
    role: appRole.default('scope_user_user').describe('The grant role; at most what you may grant (scope_user_power_user needs a power_user account)'),
    mcp_servers: grantedServers.default([]),
    expires_in: z
      .number()
      .int()
      .min(60)
      .max(MAX_KEY_LIFETIME_S)
      .nullable()
      .default(null)
      .describe('Seconds until the key stops working; null or left out: it never expires (revoke it instead)'),
  })
  .meta({ id: 'CreateApiKey' });

export const apiKeyStatus = z.enum(['active', 'expired', 'revoked']).meta({ id: 'ApiKeyStatus' });

export const apiKeyView = z
  .object({
    id: z.uuid(),
    name: z.string(),
    role: appRole.describe('The role of its grant'),
    status: apiKeyStatus.describe('revoked also when its access request was revoked'),
    access_request_id: z.uuid().describe('The approved access request the key stands on; revoking it ends the key too'),
    app_client_id: z.string().describe('svc-key:<id>, as the access request shows it'),
    mcp_servers: z.array(z.object({ url: z.string(), instance_ids: z.array(z.string()) })),
    created_at: z.string(),
    expires_at: z.string().nullable().describe('null: never expires'),
    revoked_at: z.string().nullable(),
    user: z.string().nullable().describe("The owner's username"),
  })
  .meta({ id: 'ApiKey', description: 'An API key; the key itself is never shown again after creation' });

export const createdKey = apiKeyView
  .extend({ key: z.string().describe('svc_...: shown only in this answer; only its sha256 is stored') })
  .meta({ id: 'CreatedApiKey' });

export const keyParams = z.object({ id: z.string().max(100).describe('The key id, or a unique prefix of 6 or more characters') });
export const keyList = z.object({ data: z.array(apiKeyView) });
export const revokedKey = z.object({ id: z.uuid(), status: z.literal('revoked'), access_request_id: z.uuid() });
