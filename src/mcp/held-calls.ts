import { randomUUID } from 'node:crypto';
import { conflict, notFound } from '../errors.js';
import type { Clock } from '../http/context.js';
import type { Logger } from '../log.js';
import type { AccessRequestRecord, McpInstanceRecord, UserRecord } from '../store/schema.js';
import type { HeldCallView } from './policy-schemas.js';

/**
 * Tool calls waiting for the person's yes or no. They live in this process only: a call held when
 * svc stops is answered as failed and forgotten, so no later start can ever run it. A decision is
 * one synchronous check-and-set, so of two decisions exactly one finds the call pending, and an
 * approval binds to the one call it was shown: its grant, instance, tool and arguments.
 */

export type HeldOutcome = 'approved' | 'denied' | 'expired' | 'failed';

interface Entry {
  view: HeldCallView;
  /** the grant's approver: who may decide (besides an admin) */
  userId: string | null;
  settle: (outcome: HeldOutcome) => void;
  timer: NodeJS.Timeout | null;
  started: number;
}

export interface HoldInput {
  record: AccessRequestRecord;
  instance: McpInstanceRecord;
  tool: string;
  arguments: unknown;
  appName: string | null;
  /** the grant's approver, by username */
  user: string | null;
  via: 'mcp' | 'rest';
}

/** Decided calls are kept this long (and at most HISTORY of them) for the lists; the log keeps every decision. */
const HISTORY_MS = 60 * 60 * 1000;
const HISTORY = 500;

const rememberKey = (grant: string, instance: string, tool: string) => JSON.stringify([grant, instance, tool]);

export class HeldCalls {
  private readonly entries = new Map<string, Entry>();
  /** grant, instance and tool -> until when (ms) they run without asking */
  private readonly remembered = new Map<string, number>();
  private readonly listeners: ((call: HeldCallView) => void)[] = [];

  constructor(
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** how long a call waits for a decision */
    private readonly timeoutMs: number,
  ) {}

  /** Called with each newly held call (notifications). */
  onHeld(fn: (call: HeldCallView) => void): void {
    this.listeners.push(fn);
  }

  private iso(ms = this.clock()): string {
    return new Date(ms).toISOString();
  }

  /** Whether the person approved this tool of this grant and instance with remember_minutes, still in force. */
  isRemembered(grantId: string, instanceId: string, tool: string): boolean {
    const key = rememberKey(grantId, instanceId, tool);
    const until = this.remembered.get(key);
    if (until === undefined) return false;
    if (until > this.clock()) return true;
    this.remembered.delete(key);
    return false;
  }

  /** Holds a call: answers its view and the outcome it will come to (never rejected). */
  hold(input: HoldInput): { call: HeldCallView; outcome: Promise<HeldOutcome> } {
    this.prune();
    const now = this.clock();
    let settle!: (o: HeldOutcome) => void;
    const outcome = new Promise<HeldOutcome>((resolve) => (settle = resolve));
    const view: HeldCallView = {
      id: randomUUID(),
      status: 'pending',
      access_request_id: input.record.id,
      app_client_id: input.record.app_client_id,
      app_name: input.appName,
      user: input.user,
      instance_id: input.instance.id,
      instance_name: input.instance.name,
      tool: input.tool,
      arguments: input.arguments,
      via: input.via,
      created_at: this.iso(now),
      expires_at: this.iso(now + this.timeoutMs),
      decided_at: null,
      decided_by: null,
      waited_ms: null,
      remember_until: null,
      reason: null,
    };
    const entry: Entry = { view, userId: input.record.user_id, settle, timer: null, started: now };
    entry.timer = setTimeout(() => this.end(entry, 'expired', 'nobody answered in time'), this.timeoutMs);
    entry.timer.unref();
    this.entries.set(view.id, entry);
    this.logger.info({ call: view.id, accessRequest: view.access_request_id, instance: view.instance_id, tool: view.tool.slice(0, 100) }, 'tool call held for the person');
    for (const fn of this.listeners) {
      try {
        fn({ ...view });
      } catch {
        /* a listener's failure is not the call's */
      }
    }
    return { call: { ...view }, outcome };
  }

  private visible(entry: Entry, actor: UserRecord): boolean {
    return actor.role === 'admin' || (entry.userId !== null && entry.userId === actor.id);
  }

  /** Ends a pending call with an outcome nobody decided (expired, failed); a decided one is left as it is. */
  private end(entry: Entry, status: 'expired' | 'failed', reason: string): void {
    if (entry.view.status !== 'pending') return;
    if (entry.timer) clearTimeout(entry.timer);
    const now = this.clock();
    entry.view = { ...entry.view, status, waited_ms: now - entry.started, reason };
    this.logger.info({ call: entry.view.id, accessRequest: entry.view.access_request_id, tool: entry.view.tool.slice(0, 100), waitedMs: now - entry.started, reason }, `held tool call ${status}`);
    entry.settle(status);
  }

  /**
   * The person's decision: the grant's approver or an admin (anyone else: 404, as if there were no
   * such call). Only a pending call can be decided, once (409 not_pending).
   */
  decide(actor: UserRecord, id: string, decision: 'approved' | 'denied', rememberMinutes?: number): HeldCallView {
    const entry = this.entries.get(id);
    if (!entry || !this.visible(entry, actor)) throw notFound('No such held call.');
    if (entry.view.status !== 'pending') throw conflict('not_pending', `This call is already ${entry.view.status}; it cannot be decided again.`);
    if (entry.timer) clearTimeout(entry.timer);
    const now = this.clock();
    const rememberUntil = decision === 'approved' && rememberMinutes ? now + rememberMinutes * 60_000 : null;
    entry.view = {
      ...entry.view,
      status: decision,
      decided_at: this.iso(now),
      decided_by: actor.username,
      waited_ms: now - entry.started,
      remember_until: rememberUntil === null ? null : this.iso(rememberUntil),
    };
    if (rememberUntil !== null) this.remembered.set(rememberKey(entry.view.access_request_id, entry.view.instance_id, entry.view.tool), rememberUntil);
    this.logger.info(
      { call: id, accessRequest: entry.view.access_request_id, tool: entry.view.tool.slice(0, 100), decidedBy: actor.id, waitedMs: entry.view.waited_ms, rememberMinutes: rememberMinutes ?? null },
      `held tool call ${decision}`,
    );
    entry.settle(decision);
    return { ...entry.view };
  }

  /** A call that will not run after all: the app went away, svc stops, or its grant ended before it could be sent. */
  fail(id: string, reason: string): void {
    const entry = this.entries.get(id);
    if (!entry) return;
    if (entry.view.status === 'pending') return this.end(entry, 'failed', reason);
    if (entry.view.status === 'approved') entry.view = { ...entry.view, status: 'failed', reason };
  }

  /** Ends every pending call as failed (svc is stopping): none of them runs, now or after a restart. */
  failAll(reason: string): number {
    let n = 0;
    for (const entry of this.entries.values()) {
      if (entry.view.status !== 'pending') continue;
      this.end(entry, 'failed', reason);
      n++;
    }
    return n;
  }

  list(actor: UserRecord, status?: HeldCallView['status']): HeldCallView[] {
    this.prune();
    return [...this.entries.values()]
      .filter((e) => this.visible(e, actor) && (!status || e.view.status === status))
      .map((e) => ({ ...e.view }))
      .sort((a, b) => b.created_at.localeCompare(a.created_at));
  }

  get(actor: UserRecord, id: string): HeldCallView {
    const entry = this.entries.get(id);
    if (!entry || !this.visible(entry, actor)) throw notFound('No such held call.');
    return { ...entry.view };
  }

  pendingCount(actor: UserRecord): number {
    let n = 0;
    for (const e of this.entries.values()) if (e.view.status === 'pending' && this.visible(e, actor)) n++;
    return n;
  }

  /** Forgets decided calls past the history's bounds. */
  private prune(): void {
    const cutoff = this.clock() - HISTORY_MS;
    const decided = [...this.entries.values()].filter((e) => e.view.status !== 'pending');
    const over = decided.length - HISTORY;
    decided.forEach((e, i) => {
      if (i < over || e.started < cutoff) this.entries.delete(e.view.id);
    });
    for (const [key, until] of this.remembered) if (until <= this.clock()) this.remembered.delete(key);
  }
}
