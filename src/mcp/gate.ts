import type { BearerGrant } from '../http/context.js';
import type { Repositories } from '../store/repositories.js';
import type { McpInstanceRecord, ToolChoice } from '../store/schema.js';
import type { HeldCalls, HeldOutcome } from './held-calls.js';
import { listFilter, type ToolPolicies } from './policies.js';
import type { HeldCallView } from './policy-schemas.js';

/**
 * What the MCP proxy and the REST tool endpoints ask before a tool runs, for one call of one
 * grant on one instance: the tool's choice, which tools a list may show, and the holding of a
 * call the person must approve.
 */
export interface ToolGate {
  /** allow, ask or deny for this grant; an `ask` the person said to remember is allow */
  choose(tool: string): Promise<ToolChoice>;
  /** which tools a tools/list answer may show; null: all of them */
  visible: ((tool: string) => boolean) | null;
  /** holds a call for the person's decision */
  hold(tool: string, args: unknown, via: 'mcp' | 'rest'): Promise<{ call: HeldCallView; outcome: Promise<HeldOutcome> }>;
  /** ends a held call that will not run (the app went away, the grant ended) */
  fail(callId: string, reason: string): void;
  /** whether the grant is still approved, read again when an approved call is about to go */
  stillGranted(): Promise<boolean>;
}

export interface GateDeps {
  policies: ToolPolicies;
  held: HeldCalls;
  repos: Repositories;
  appName: (clientId: string) => Promise<string | null>;
}

export function toolGate(deps: GateDeps, grant: BearerGrant, instance: McpInstanceRecord): ToolGate {
  const record = grant.record;
  return {
    async choose(tool) {
      const choice = await deps.policies.choose(record, instance, tool);
      return choice === 'ask' && deps.held.isRemembered(record.id, instance.id, tool) ? 'allow' : choice;
    },
    visible: listFilter(record, instance),
    async hold(tool, args, via) {
      const appName = await deps.appName(grant.clientId).catch(() => null);
      return deps.held.hold({ record, instance, tool, arguments: args, appName, user: grant.user.username, via });
    },
    fail: (id, reason) => deps.held.fail(id, reason),
    async stillGranted() {
      return (await deps.repos.accessRequests.get(record.id))?.status === 'approved';
    },
  };
}
