import { z } from 'zod';

/** The schemas of tool choices and held calls: shared by the routes, the access-request approval and the CLI's types. */

export const TOOL_CHOICES = ['allow', 'ask', 'deny'] as const;

export const toolChoice = z
  .enum(TOOL_CHOICES)
  .meta({ id: 'ToolChoice', description: 'allow: runs; ask: held until the person approves that very call; deny: refused, and left out of tools/list' });

/** At most this many tool names one instance's choices may name (a server with more still works: its default covers them). */
export const MAX_TOOL_CHOICES = 1000;

const toolName = z.string().min(1).max(256);

export const toolPolicy = z
  .strictObject({
    default: toolChoice.nullable().optional().describe("Every tool of the instance without a choice of its own; null: back to the tools' annotations"),
    tools: z
      .record(toolName, toolChoice.nullable())
      .refine((tools) => Object.keys(tools).length <= MAX_TOOL_CHOICES, `at most ${MAX_TOOL_CHOICES} tools`)
      .optional()
      .describe('A choice per tool name; null: back to the default'),
  })
  .meta({ id: 'ToolPolicy' });

export const toolPolicies = z
  .record(z.string().min(1).max(100), toolPolicy)
  .refine((all) => Object.keys(all).length <= 100, 'at most 100 instances')
  .meta({
    id: 'ToolPolicies',
    description:
      "Per granted MCP instance id. A tool without a choice of its own takes the instance's default, else its annotations: destructiveHint true and not read-only is ask, anything else allow. A tool outside the owner's --allow-tools list is always deny.",
  });
export type ToolPoliciesInput = z.infer<typeof toolPolicies>;

export const toolHintsSchema = z
  .object({
    title: z.string().optional(),
    readOnlyHint: z.boolean().optional(),
    destructiveHint: z.boolean().optional(),
    idempotentHint: z.boolean().optional(),
    openWorldHint: z.boolean().optional(),
  })
  .meta({ id: 'ToolAnnotations', description: "The hints the MCP server gives for a tool (its tools/list), as svc keeps them" });

export const reviewTool = z
  .object({
    name: z.string(),
    description: z.string().optional(),
    annotations: toolHintsSchema.optional(),
    default_choice: toolChoice.describe("What the tool gets from its annotations and the owner's allow-list alone"),
    choice: toolChoice.describe('The choice in force (for a draft: what approving as it stands would set)'),
    owner_denied: z.boolean().optional().describe("Outside the instance owner's --allow-tools list: always deny, whatever is chosen"),
  })
  .meta({ id: 'ReviewTool' });

export const rememberedApproval = z
  .object({
    tool: z.string(),
    until: z.string().describe('Until when the tool runs without asking'),
    approved_by: z.string().describe('Who approved, by username'),
    call_id: z.string().describe('The held call whose approval this was'),
  })
  .meta({ id: 'RememberedApproval' });

export const forgetQuery = z.strictObject({
  instance_id: z.string().max(100).optional().describe('Only this instance\'s (all instances when absent)'),
  tool: z.string().max(256).optional().describe('Only this tool of instance_id (all its tools when absent)'),
});

export const grantToolChoices = z
  .object({
    instance_id: z.string(),
    instance_name: z.string().nullable().describe('null: the instance no longer exists'),
    default: toolChoice.nullable().describe("The person's default for this instance; null: each tool's annotations decide"),
    tools_known: z.boolean().describe('Whether svc has the instance\'s tool list (from a refresh or a review)'),
    tools: z.array(reviewTool),
    choices: z.record(z.string(), toolChoice).describe('The choices the person set, by tool name (including tools not in the list)'),
    remembered: z
      .array(rememberedApproval)
      .describe("Approvals remembered with remember_minutes and still in force: each tool runs without asking until then. A change of the tool's choice, of this default, or of the instance ends them; DELETE .../remembered ends them at once"),
  })
  .meta({ id: 'GrantToolChoices' });

export const setToolsResponse = z.object({ id: z.uuid(), tool_policies: toolPolicies, tool_choices: z.array(grantToolChoices) }).meta({ id: 'GrantTools' });

export const heldCallStatuses = ['pending', 'approved', 'denied', 'expired', 'failed'] as const;

export const heldCall = z
  .object({
    id: z.uuid(),
    status: z.enum(heldCallStatuses),
    access_request_id: z.string(),
    app_client_id: z.string(),
    app_name: z.string().nullable(),
    user: z.string().nullable().describe("The grant's approver, by username: who decides"),
    instance_id: z.string(),
    instance_name: z.string(),
    tool: z.string(),
    arguments: z.unknown().describe('The arguments exactly as they will go upstream if approved (app-supplied: escape them)'),
    via: z.enum(['mcp', 'rest']).describe('The Streamable HTTP proxy or the REST execute endpoint'),
    created_at: z.string(),
    expires_at: z.string(),
    decided_at: z.string().nullable(),
    decided_by: z.string().nullable().describe('Who approved or denied it, by username'),
    waited_ms: z.number().int().nullable().describe('How long the call waited for its outcome'),
    remember_until: z.string().nullable().describe('Approved with remember_minutes: until when this tool of this grant and instance runs without asking'),
    reason: z.string().nullable().describe('failed: why (the app went away, svc stopped, the grant ended, the instance or tool was turned off)'),
  })
  .meta({ id: 'HeldCall' });
export type HeldCallView = z.infer<typeof heldCall>;

export const heldCallList = z.object({ data: z.array(heldCall) }).meta({ id: 'HeldCallList' });
export const heldCallQuery = z.object({ status: z.enum(heldCallStatuses).optional() });
export const callIdParam = z.object({ id: z.string().min(1).max(100) });
export const approveCallBody = z
  .strictObject({
    remember_minutes: z.number().int().min(1).max(1440).optional().describe('Also let this tool of this grant and instance run without asking for this many minutes'),
  })
  .meta({ id: 'ApproveHeldCall' });
