import { z } from 'zod';

export const activityKinds = ['models', 'chat', 'completions', 'embeddings', 'responses', 'messages', 'mcp'] as const;
export const activityOutcomes = ['ok', 'error', 'refused'] as const;

/** One call made with a grant's credential: names, counts, sizes and times, never content. */
export const activityEvent = z
  .object({
    id: z.string().describe('Increasing: a later event has a larger number'),
    time: z.string().describe('When the call came in (ISO 8601)'),
    access_request_id: z.string(),
    app_client_id: z.string(),
    user: z.string().nullable().describe("The grant's approver, by username"),
    kind: z.enum(activityKinds),
    endpoint: z.string().describe('The route called, e.g. /v1/chat/completions or /svc/v1/apps/mcps/{id}/mcp'),
    model: z.string().optional(),
    instance_id: z.string().optional(),
    mcp_method: z.string().optional().describe('The JSON-RPC method of an MCP call: tools/call, tools/list, ...'),
    tool: z.string().optional(),
    status: z.number().int().describe('The HTTP status svc answered'),
    outcome: z.enum(activityOutcomes).describe('ok; error: the upstream failed or answered a JSON-RPC error; refused: svc said no'),
    reason: z.string().optional().describe("Refused: svc's error code"),
    duration_ms: z.number().int(),
    tokens_in: z
      .number()
      .int()
      .optional()
      .describe("From the upstream's usage; estimated by svc (tokens_estimated) for a stream that ended without one; absent where neither is known"),
    tokens_out: z.number().int().optional(),
    tokens_estimated: z
      .literal(true)
      .optional()
      .describe('The tokens are svc\'s estimate, not the upstream\'s count: a stream the app left, or whose upstream sent no usage (a token a streamed chunk, and one per 4 bytes of the request)'),
  })
  .meta({ id: 'ActivityEvent' });
export type ActivityEvent = z.infer<typeof activityEvent>;

export const activityQuery = z.object({
  grant: z.string().max(100).optional().describe('An access request id (or a unique prefix of 6 or more characters)'),
  since: z.string().max(40).optional().describe('ISO 8601 time, or a duration back from now: 30s, 15m, 1h, 7d'),
  after: z.coerce.number().int().min(0).optional().describe('Only events with a larger id (for following)'),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});
/** An event as the API answers it: with the app's name as every other surface says it. */
export const activityEventView = activityEvent
  .extend({
    app_name: z.string().optional().describe('The app as the other surfaces name it (an API key: API key "its name"; a registered client: its name); absent when svc knows no name for the client id'),
  })
  .meta({ id: 'ActivityEventView' });
export type ActivityEventView = z.infer<typeof activityEventView>;
export const activityList = z.object({ data: z.array(activityEventView) }).meta({ id: 'ActivityList' });

const positive = z.number().int().positive().max(1e12);
/** What the person sets on a grant; null (or absent) means none. */
export const grantLimits = z
  .object({
    requests_per_minute: positive.nullable().optional().describe('Calls a minute; beyond it 429 grant_rate_limited'),
    tokens_per_day: positive.nullable().optional().describe("Upstream tokens (in + out) a local calendar day; beyond it 429 grant_token_budget_exhausted"),
  })
  .strict()
  .meta({ id: 'GrantLimits' });
export type GrantLimitsInput = z.infer<typeof grantLimits>;

export const grantUsage = z
  .object({
    calls: z.number().int(),
    refused: z.number().int(),
    tokens_in: z.number().int(),
    tokens_out: z.number().int(),
    last_used_at: z.string().nullable(),
    today: z.object({ calls: z.number().int(), tokens: z.number().int() }),
  })
  .meta({ id: 'GrantUsage', description: 'Counted over the activity svc keeps (see --activity-retention-days and --activity-max-events)' });

export type GrantUsage = z.infer<typeof grantUsage>;

export const storedLimits = z.object({ requests_per_minute: z.number().int().nullable(), tokens_per_day: z.number().int().nullable() }).meta({ id: 'GrantLimitsSet' });

/** A duration back from now (`15m`) or a time; answers ms since the epoch, or null when neither. */
export function parseSince(value: string, now: number): number | null {
  const m = /^(\d{1,9})(s|m|h|d)$/.exec(value);
  if (m) return now - Number(m[1]) * { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 's' | 'm' | 'h' | 'd'];
  const t = Date.parse(value);
  return Number.isNaN(t) ? null : t;
}
