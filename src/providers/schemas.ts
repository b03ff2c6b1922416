import { z } from 'zod';
import { httpUrl } from '../http/urls.js';

export const providerName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]{0,39}$/, 'a provider name is 1-40 lowercase letters, digits, dash or underscore');
export const modelName = z.string().min(1).max(200).regex(/^[^\0-\x1f\x7f]+$/, 'must be printable');

export const providerApi = z.enum(['chat', 'messages']);
export const providerAuthHeader = z.enum(['x-api-key', 'authorization']);

export const createProviderBody = z.strictObject({
  name: providerName,
  base_url: httpUrl.describe('OpenAI-compatible base URL, e.g. http://127.0.0.1:11434/v1'),
  api_key: z.string().min(1).max(4096).regex(/^[^\r\n\0]*$/, 'must be one line').optional().describe('Stored encrypted; never shown again'),
  models: z.array(modelName).max(500).optional().describe('Models to offer even if the provider does not list them'),
  timeout_ms: z.number().int().min(100).max(600_000).optional().describe('Upstream inactivity timeout; default 120000'),
  api: providerApi.optional().describe("How apps' /v1/messages calls reach it: chat (default) translates them onto its /chat/completions; messages passes them through to its own /messages"),
  auth_header: providerAuthHeader.optional().describe('A messages provider: the header its key goes in, x-api-key (default, as Anthropic) or authorization (Bearer)'),
});

export const provider = z
  .object({
    name: z.string(),
    base_url: z.string(),
    has_api_key: z.boolean(),
    models: z.array(z.string()).describe('Explicit models'),
    discovered_models: z.array(z.string()).describe('From the provider\'s GET /models at the last refresh'),
    discovered_at: z.string().nullable(),
    discovery_error: z.string().nullable(),
    timeout_ms: z.number(),
    created_at: z.string(),
    api: providerApi,
    auth_header: providerAuthHeader,
  })
  .meta({ id: 'Provider' });

export const providerParams = z.object({ name: z.string().max(100) });
