import type { z } from 'zod';
import type { accessRequestSummary, approveBody, approveResponse, denyResponse, reviewResponse } from '../access-requests/schemas.js';
import type { activityEvent, grantLimits } from '../activity/schemas.js';
import type { HeldCallView } from '../mcp/policy-schemas.js';
import { APP_ROLE_NAMES } from '../auth/roles.js';
import { type AppRole, appRoles } from '../store/schema.js';

/** One row of `GET /svc/v1/access-requests?status=draft`. */
export type PendingRequest = z.infer<typeof accessRequestSummary>;
/** `GET /svc/v1/access-requests/{id}/review`. */
export type ReviewData = z.infer<typeof reviewResponse>;
export type ApproveRequest = z.input<typeof approveBody>;
/** An approval's answer; a sign-in approved without the instances it was for is a denial. */
export type ApproveResult = z.infer<typeof approveResponse> | z.infer<typeof denyResponse>;
export type DenyResult = z.infer<typeof denyResponse>;
/** One active grant, as `GET /svc/v1/access-requests?status=approved` answers it (with usage and limits). */
export type GrantSummary = z.infer<typeof accessRequestSummary>;
export type ActivityEvent = z.infer<typeof activityEvent>;
export type GrantLimits = z.input<typeof grantLimits>;
/** One row of `GET /svc/v1/calls?status=pending`: a tool call waiting for the reviewer. */
export type HeldCall = HeldCallView;
export type { AppRole };

/**
 * What the terminal UI needs from the daemon. The CLI passes one backed by DaemonClient (the
 * CLI's session over HTTP); tests pass that too, or a fake. Failures are thrown as errors with a
 * `message` and, for daemon answers, the `code` and `status` of the error shape (AppError; decisions: Errors).
 */
export interface ReviewClient {
  listPending(): Promise<PendingRequest[]>;
  review(id: string): Promise<ReviewData>;
  approve(id: string, body: ApproveRequest): Promise<ApproveResult>;
  deny(id: string): Promise<DenyResult>;
  /** The Apps view (Tab): the reviewer's active grants, one's activity, revoke and limits. */
  listGrants?(): Promise<GrantSummary[]>;
  activity?(grantId: string): Promise<ActivityEvent[]>;
  revoke?(id: string): Promise<void>;
  setLimits?(id: string, limits: GrantLimits): Promise<void>;
  /** Held tool calls waiting for this reviewer; a client without them (an older daemon's) has none. */
  heldCalls?(): Promise<HeldCall[]>;
  approveCall?(id: string): Promise<HeldCall>;
  denyCall?(id: string): Promise<HeldCall>;
  /** the approved grants this reviewer may change, and the change of one's tool choices */
  approvedGrants?(): Promise<PendingRequest[]>;
  setTools?(id: string, body: Record<string, { tools: Record<string, 'allow' | 'ask' | 'deny' | null> }>): Promise<unknown>;
  /** ends remembered approvals of a grant: of one tool of one instance, or all */
  forgetRemembered?(id: string, which?: { instance_id: string; tool: string }): Promise<unknown>;
}

/** Lowest first: `r` cycles through these up to max_grantable_role. */
export const ROLES: readonly AppRole[] = appRoles;

export const ROLE_NAMES: Record<AppRole, string> = APP_ROLE_NAMES;
