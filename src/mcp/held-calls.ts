import { randomUUID } from 'node:crypto';
import { AppError, conflict, notFound } from '../errors.js';
import type { Clock } from '../http/context.js';
import type { Logger } from '../log.js';
import type { HeldCallRepository, SharedHeldCall } from '../store/repositories.js';
import type { AccessRequestRecord, McpInstanceRecord, UserRecord } from '../store/schema.js';
import type { HeldCallView } from './policy-schemas.js';

/**
 * Tool calls waiting for the person's yes or no. The app's request waits in the process that
 * holds it, and nowhere else: a call held when svc stops is answered as failed, so no later start
 * can ever run it. An approval binds to the one call it was shown: its grant, instance, tool and
 * arguments.
 *
 * On one svc the calls are kept in this process, and a decision is one synchronous check-and-set.
 * On a team server every replica must see them, so they are also kept in the shared store
 * (`HeldCallRepository`): a decision taken on any replica is one conditional write there, and the
 * holding replica hears it through the store's change notices and answers the app at once. A
 * pending call past its expiry counts as expired everywhere, even when the replica that held it
 * died before it could say so. Of two decisions, or a decision and the expiry, exactly one wins.
 */

export type HeldOutcome = 'approved' | 'denied' | 'expired' | 'failed';

interface Entry {
  view: HeldCallView;
  /** the grant's approver: who may decide (besides an admin) */
  userId: string | null;
  settle: (outcome: HeldOutcome) => void;
  timer: NodeJS.Timeout | null;
  started: number;
  /** whether the waiting request was given its outcome */
  settled: boolean;
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

/**
 * The most a held call may carry, as JSON: its arguments, and its tool's name. A person reads
 * every character before saying yes, and svc keeps each call (in memory, and on a team server in
 * the shared store) for an hour after it ends; without a bound an app that ends its own calls
 * could make svc keep HISTORY times the proxy's body limit (gigabytes).
 */
export const MAX_HELD_ARGUMENTS = 64 * 1024;
export const MAX_HELD_TOOL_NAME = 256;

/** The longest progress token an approved call carries upstream; a longer one is dropped. */
const MAX_PROGRESS_TOKEN = 256;

/**
 * The members of `_meta` that go on with an approved call: what the protocol itself puts there to
 * describe the connection (the stateless 2026-07-28 era sends its version, the client and its
 * capabilities with every request, and a server refuses a request without them), never what asks
 * anything of the tool. Anything else (a vendor's key, `io.modelcontextprotocol/related-task`) is
 * dropped.
 */
const CONNECTION_META = ['io.modelcontextprotocol/protocolVersion', 'io.modelcontextprotocol/clientInfo', 'io.modelcontextprotocol/clientCapabilities', 'io.modelcontextprotocol/logLevel'];

/**
 * The JSON-RPC message an approved call is sent upstream as: the tool and the arguments the person
 * was shown (`{}` when the app gave none, as shown), and of `_meta` only a progress token (a string
 * or a safe integer, bounded), which names the server's progress notifications, and the
 * connection's own members (CONNECTION_META). Every other key the app put in the message, its
 * `params` or `_meta` goes nowhere: a server may act on any of them, and the person never saw them.
 */
export function sentAsShown(id: string | number | null | undefined, tool: string, shownArguments: unknown, meta: unknown): Record<string, unknown> {
  const given = meta && typeof meta === 'object' && !Array.isArray(meta) ? (meta as Record<string, unknown>) : {};
  const kept: [string, unknown][] = CONNECTION_META.filter((k) => Object.hasOwn(given, k)).map((k) => [k, given[k]]);
  const token = Object.hasOwn(given, 'progressToken') ? given.progressToken : undefined;
  if ((typeof token === 'string' && token.length <= MAX_PROGRESS_TOKEN) || Number.isSafeInteger(token)) kept.unshift(['progressToken', token]);
  const params = { name: tool, arguments: shownArguments, ...(kept.length > 0 ? { _meta: Object.fromEntries(kept) } : {}) };
  return { jsonrpc: '2.0', id: id ?? null, method: 'tools/call', params };
}

/** How often the shared store's history is trimmed (at most). */
const PRUNE_SHARED_MS = 60_000;

const notPending = (status: string) => conflict('not_pending', `This call is already ${status}; it cannot be decided again.`);

export class HeldCalls {
  /** the calls this process holds (and, without a shared store, the recent history the lists show) */
  private readonly entries = new Map<string, Entry>();
  private readonly listeners: ((call: HeldCallView) => void)[] = [];

  constructor(
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** how long a call waits for a decision */
    private readonly timeoutMs: number,
    /** where a team server's replicas share held calls; absent, they live in this process only */
    private readonly shared?: HeldCallRepository,
    /** keeps an approval's remember_minutes on its grant (ToolPolicies.remember) */
    private readonly rememberOnGrant?: (view: HeldCallView) => Promise<void>,
  ) {
    shared?.onChange((id, record) => this.heard(id, record));
  }

  /** Called with each newly held call (notifications). */
  onHeld(fn: (call: HeldCallView) => void): void {
    this.listeners.push(fn);
  }

  private iso(ms = this.clock()): string {
    return new Date(ms).toISOString();
  }

  /**
   * Holds a call: answers its view and the outcome it will come to (never rejected). With a shared
   * store the call is stored before it is shown to anyone; a store that cannot take it refuses the
   * call (it never runs unasked).
   */
  async hold(input: HoldInput): Promise<{ call: HeldCallView; outcome: Promise<HeldOutcome> }> {
    const size = JSON.stringify(input.arguments ?? {}).length;
    if (size > MAX_HELD_ARGUMENTS || input.tool.length > MAX_HELD_TOOL_NAME) {
      throw new AppError(
        'payload_too_large',
        `A call that waits for the person's approval may carry at most ${MAX_HELD_ARGUMENTS} characters of arguments and a tool name of ${MAX_HELD_TOOL_NAME}; this one has ${size} and ${input.tool.length}. It was not held and did not run.`,
      );
    }
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
    const entry: Entry = { view, userId: input.record.user_id, settle, timer: null, started: now, settled: false };
    // Known here before it is stored, so a decision heard the moment it is stored finds it waiting.
    this.entries.set(view.id, entry);
    if (this.shared) {
      try {
        await this.shared.put({ id: view.id, user_id: entry.userId, view });
      } catch (err) {
        this.entries.delete(view.id);
        throw err;
      }
    }
    entry.timer = setTimeout(() => this.end(entry, 'expired', 'nobody answered in time'), this.timeoutMs);
    entry.timer.unref();
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

  private visible(userId: string | null, actor: UserRecord): boolean {
    return actor.role === 'admin' || (userId !== null && userId === actor.id);
  }

  /** Gives the waiting request its outcome, once. */
  private settle(entry: Entry, outcome: HeldOutcome): void {
    if (entry.timer) clearTimeout(entry.timer);
    if (entry.settled) return;
    entry.settled = true;
    entry.settle(outcome);
  }

  /** Ends a pending call with an outcome nobody decided (expired, failed); a decided one is left as it is. */
  private end(entry: Entry, status: 'expired' | 'failed', reason: string): void {
    if (entry.view.status !== 'pending') return;
    const now = this.clock();
    entry.view = { ...entry.view, status, waited_ms: now - entry.started, reason };
    this.logger.info({ call: entry.view.id, accessRequest: entry.view.access_request_id, tool: entry.view.tool.slice(0, 100), waitedMs: now - entry.started, reason }, `held tool call ${status}`);
    if (!this.shared) return this.settle(entry, status);
    // A decision another replica stored first wins; the store unreachable, the call fails closed.
    const ended = entry.view;
    this.shared
      .update(ended.id, (r) => {
        if (r.view.status === 'pending') r.view = ended;
      })
      .then(
        (stored) => {
          const final = stored?.view.status as HeldCallView['status'] | undefined;
          if (final === 'approved' || final === 'denied') entry.view = stored!.view as HeldCallView;
          this.settle(entry, final === 'approved' || final === 'denied' ? final : status);
        },
        (err: Error) => {
          this.logger.warn({ call: ended.id, err: err.message }, 'could not store the end of a held call; it does not run');
          this.settle(entry, status);
        },
      );
  }

  /** The decided view of a pending call. */
  private decided(view: HeldCallView, actor: UserRecord, decision: 'approved' | 'denied', rememberMinutes: number | undefined): HeldCallView {
    const now = this.clock();
    const rememberUntil = decision === 'approved' && rememberMinutes ? now + rememberMinutes * 60_000 : null;
    return {
      ...view,
      status: decision,
      decided_at: this.iso(now),
      decided_by: actor.username,
      waited_ms: now - Date.parse(view.created_at),
      remember_until: rememberUntil === null ? null : this.iso(rememberUntil),
    };
  }

  /**
   * The person's decision: the grant's approver or an admin (anyone else: 404, as if there were no
   * such call). Only a pending call can be decided, once (409 not_pending).
   */
  async decide(actor: UserRecord, id: string, decision: 'approved' | 'denied', rememberMinutes?: number): Promise<HeldCallView> {
    let view: HeldCallView;
    if (this.shared) {
      const stored = await this.shared.update(id, (r) => {
        if (!this.visible(r.user_id, actor)) throw notFound('No such held call.');
        const now = this.effective(r);
        if (now.status !== 'pending') throw notPending(now.status);
        r.view = this.decided(now, actor, decision, rememberMinutes);
      });
      if (!stored) throw notFound('No such held call.');
      view = stored.view as HeldCallView;
      this.heard(id, stored);
    } else {
      const entry = this.entries.get(id);
      if (!entry || !this.visible(entry.userId, actor)) throw notFound('No such held call.');
      if (entry.view.status !== 'pending') throw notPending(entry.view.status);
      view = entry.view = this.decided(entry.view, actor, decision, rememberMinutes);
      this.settle(entry, decision);
    }
    await this.remember(view);
    this.logger.info(
      { call: id, accessRequest: view.access_request_id, tool: view.tool.slice(0, 100), decidedBy: actor.id, waitedMs: view.waited_ms, rememberMinutes: rememberMinutes ?? null },
      `held tool call ${decision}`,
    );
    return { ...view };
  }

  /**
   * Keeps an approval's remember_minutes on its grant, where every replica reads it. The call runs
   * either way; a yes that could not be kept is only not remembered (and logged).
   */
  private async remember(view: HeldCallView): Promise<void> {
    if (view.status !== 'approved' || !view.remember_until || !this.rememberOnGrant) return;
    await this.rememberOnGrant(view).catch((err: Error) => this.logger.warn({ call: view.id, err: err.message }, 'could not keep a remembered approval on its grant'));
  }

  /** A held call's change stored by any replica (this one too): a decision reaches the request waiting here. */
  private heard(id: string, record: SharedHeldCall | undefined): void {
    if (!record) return;
    const view = record.view as HeldCallView;
    const entry = this.entries.get(id);
    if (!entry || entry.settled || (view.status !== 'approved' && view.status !== 'denied')) return;
    entry.view = view;
    this.settle(entry, view.status);
  }

  /** A stored call as it stands now: pending past its expiry is expired, whoever was to say so. */
  private effective(record: SharedHeldCall): HeldCallView {
    const view = record.view as HeldCallView;
    if (view.status !== 'pending' || Date.parse(view.expires_at) > this.clock()) return view;
    return { ...view, status: 'expired', reason: 'nobody answered in time' };
  }

  /** A call that will not run after all: the app went away, svc stops, or its grant, instance or tool was ended before it could be sent. */
  fail(id: string, reason: string): void {
    const entry = this.entries.get(id);
    if (!entry) return;
    if (entry.view.status === 'pending') return this.end(entry, 'failed', reason);
    if (entry.view.status !== 'approved') return;
    entry.view = { ...entry.view, status: 'failed', reason };
    const failed = entry.view;
    this.shared
      ?.update(id, (r) => {
        r.view = failed;
      })
      .catch((err: Error) => this.logger.warn({ call: id, err: err.message }, 'could not store that a held call failed'));
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

  /** The calls `actor` may see (all, or those of `status`), newest first. */
  async list(actor: UserRecord, status?: HeldCallView['status']): Promise<HeldCallView[]> {
    this.prune();
    const views = this.shared
      ? (await this.shared.list()).filter((r) => this.visible(r.user_id, actor)).map((r) => this.effective(r))
      : [...this.entries.values()].filter((e) => this.visible(e.userId, actor)).map((e) => ({ ...e.view }));
    return views.filter((v) => !status || v.status === status).sort((a, b) => b.created_at.localeCompare(a.created_at));
  }

  async get(actor: UserRecord, id: string): Promise<HeldCallView> {
    if (this.shared) {
      const record = await this.shared.get(id);
      if (!record || !this.visible(record.user_id, actor)) throw notFound('No such held call.');
      return { ...this.effective(record) };
    }
    const entry = this.entries.get(id);
    if (!entry || !this.visible(entry.userId, actor)) throw notFound('No such held call.');
    return { ...entry.view };
  }

  async pendingCount(actor: UserRecord): Promise<number> {
    return (await this.list(actor, 'pending')).length;
  }

  /** Forgets decided calls past the history's bounds (in the shared store too, off the request path). */
  private prune(): void {
    const now = this.clock();
    const cutoff = now - HISTORY_MS;
    const decided = [...this.entries.values()].filter((e) => e.view.status !== 'pending');
    const over = decided.length - HISTORY;
    decided.forEach((e, i) => {
      if (i < over || e.started < cutoff) this.entries.delete(e.view.id);
    });
    if (this.shared && now - this.prunedShared > PRUNE_SHARED_MS) {
      this.prunedShared = now;
      void this.pruneShared(cutoff).catch((err: Error) => this.logger.warn({ err: err.message }, 'could not forget old held calls'));
    }
  }

  private prunedShared = 0;

  private async pruneShared(cutoff: number): Promise<void> {
    const records = (await this.shared!.list()).map((r) => this.effective(r)).filter((v) => v.status !== 'pending');
    const over = records.length - HISTORY;
    for (const [i, v] of records.entries()) if (i < over || Date.parse(v.created_at) < cutoff) await this.shared!.delete(v.id);
  }
}
