/**
 * Which grant began each MCP session (2025-11-25 era: the server names it in `Mcp-Session-Id`)
 * that this daemon saw begin, per instance. A session is the app's: its stream carries what the
 * server sends that app (answers, sampling and elicitation requests, progress), so another grant
 * that learned the id must not use it, though both may reach the same instance.
 *
 * Kept in memory, for at most MAX_SESSIONS (the oldest go first): a session this daemon did not
 * see begin (before a restart, through another replica) is not bound, and passes as before. The
 * id is the server's, a random value an app sees only in its own answers.
 */
export const MAX_SESSIONS = 10_000;

export class SessionOwners {
  private readonly owners = new Map<string, string>();

  constructor(private readonly max = MAX_SESSIONS) {}

  private static key(instanceId: string, sessionId: string): string {
    return `${instanceId}\n${sessionId}`;
  }

  /** Notes `grantId` as the owner of a session the server just named, unless it has one. */
  begun(instanceId: string, sessionId: string, grantId: string): void {
    const key = SessionOwners.key(instanceId, sessionId);
    if (this.owners.has(key)) return;
    this.owners.set(key, grantId);
    if (this.owners.size > this.max) this.owners.delete(this.owners.keys().next().value!);
  }

  /** Whether `grantId` may use the session: it began it, or no owner is known. */
  usableBy(instanceId: string, sessionId: string, grantId: string): boolean {
    const owner = this.owners.get(SessionOwners.key(instanceId, sessionId));
    return owner === undefined || owner === grantId;
  }

  ended(instanceId: string, sessionId: string): void {
    this.owners.delete(SessionOwners.key(instanceId, sessionId));
  }

  get size(): number {
    return this.owners.size;
  }
}
