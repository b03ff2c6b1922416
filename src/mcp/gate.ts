import type { BearerGrant } from '../http/context.js';
import type { Repositories } from '../store/repositories.js';
import type { McpInstanceRecord, ToolChoice } from '../store/schema.js';
import type { HeldCalls, HeldOutcome } from './held-calls.js';
import { grantedIds, listFilter, type ToolPolicies } from './policies.js';
import type { HeldCallView } from './policy-schemas.js';
import type { SessionIds } from './session-ids.js';

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
  /** whether a call of this gate (one request's) was held for the person: a call they approved runs once, never again on a retry */
  readonly held: boolean;
  /** holds a call for the person's decision */
  hold(tool: string, args: unknown, via: 'mcp' | 'rest'): Promise<{ call: HeldCallView; outcome: Promise<HeldOutcome> }>;
  /** ends a held call that will not run (the app went away, the grant ended) */
  fail(callId: string, reason: string): void;
  /**
   * Why an approved held call may no longer go (null: it may), read again when it is about to: the
   * grant ended, or the instance was disabled, deleted or left the grant, or the tool is now denied
   * (the owner's allow-list or the grant's choices). A call can wait for a minute; all of that can
   * change meanwhile, and a person's yes is to the call, not to what the owner since turned off.
   */
  whyNotNow(tool: string): Promise<string | null>;
  /** the server's id of the MCP session the app names, or null when it is not this grant's (session-ids.ts) */
  sessionForServer(appSessionId: string): string | null;
  /** the id the app is given for a session the server named in its answer to this grant */
  sessionForApp(serverSessionId: string): string;
  /** the server's id of the stream event the app names in `Last-Event-ID`, or null when it is not this grant's */
  eventForServer(appEventId: string): string | null;
  /** the id the app is given for an event of a stream the server sends this grant */
  eventForApp(serverEventId: string): string;
}

export interface GateDeps {
  policies: ToolPolicies;
  held: HeldCalls;
  repos: Repositories;
  appName: (clientId: string) => Promise<string | null>;
  sessions: SessionIds;
  /** the same binding for the ids of stream events */
  events: SessionIds;
}

export function toolGate(deps: GateDeps, grant: BearerGrant, instance: McpInstanceRecord): ToolGate {
  const record = grant.record;
  // One literal, `held` in it from the start: the request's gate keeps one shape (a copy that
  // adds a field costs a slow property definition at every call).
  const gate: ToolGate & { held: boolean } = {
    held: false,
    async choose(tool) {
      const choice = await deps.policies.choose(record, instance, tool);
      return choice === 'ask' && deps.policies.remembered(record, instance, tool) ? 'allow' : choice;
    },
    visible: listFilter(record, instance),
    async hold(tool, args, via) {
      gate.held = true;
      const appName = await deps.appName(grant.clientId).catch(() => null);
      return deps.held.hold({ record, instance, tool, arguments: args, appName, user: grant.user.username, via });
    },
    fail: (id, reason) => deps.held.fail(id, reason),
    async whyNotNow(tool) {
      const [fresh, now] = await Promise.all([deps.repos.accessRequests.get(record.id), deps.repos.mcpInstances.get(instance.id)]);
      if (fresh?.status !== 'approved') return 'the grant ended before the call could run';
      if (!now || now.owner_id !== grant.user.id || !grantedIds(fresh).has(now.id)) return 'the instance is gone from the grant';
      if (!now.enabled) return 'the instance was disabled before the call could run';
      // as the call was chosen: a name spelt another way than a tool now denied is denied too
      if ((await deps.policies.choose(fresh, now, tool)) === 'deny') return 'the tool was denied before the call could run';
      return null;
    },
    sessionForServer: (appSessionId) => deps.sessions.forServer(instance.id, record.id, appSessionId),
    sessionForApp: (serverSessionId) => deps.sessions.forApp(instance.id, record.id, serverSessionId),
    eventForServer: (appEventId) => deps.events.forServer(instance.id, record.id, appEventId),
    eventForApp: (serverEventId) => deps.events.forApp(instance.id, record.id, serverEventId),
  };
  return gate;
}
