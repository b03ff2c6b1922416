import type { z } from 'zod';
import { conflict, forbidden, invalidBody, notFound } from '../errors.js';
import type { Clock } from '../http/context.js';
import type { Logger } from '../log.js';
import type { CachedTool, ToolHints } from '../store/records.js';
import type { Repositories } from '../store/repositories.js';
import type { AccessRequestRecord, McpInstanceRecord, ToolChoice, ToolPolicy, UserRecord } from '../store/schema.js';
import type { grantToolChoices, HeldCallView, reviewTool, ToolPoliciesInput } from './policy-schemas.js';
import { afterChoiceChange, inForce, isRemembered, pruned, withApproval, without } from './remembered.js';
import { toolAllowed, type McpToolsService } from './tools.js';

/**
 * The person's tool choices on a grant: for each granted MCP instance, each tool is allow, ask or
 * deny. What the person did not set follows the tool's annotations as the instance's own tool
 * list reports them, and the owner's --allow-tools list stands above both.
 */

type ReviewTool = z.infer<typeof reviewTool>;
type GrantToolChoices = z.infer<typeof grantToolChoices>;

/** A tool that says it destroys and does not say it only reads waits for the person; every other runs. */
export function defaultChoice(hints: ToolHints | undefined): ToolChoice {
  return hints?.destructiveHint === true && hints.readOnlyHint !== true ? 'ask' : 'allow';
}

const own = <T>(obj: Record<string, T> | undefined, key: string): T | undefined => (obj && Object.hasOwn(obj, key) ? obj[key] : undefined);

/** What the owner and the person decided for a tool, before annotations are looked at; undefined: the annotations decide. */
export function setChoice(record: Pick<AccessRequestRecord, 'tool_policies'> | undefined, instance: McpInstanceRecord, tool: string): ToolChoice | undefined {
  if (!toolAllowed(instance, tool)) return 'deny';
  const policy = own(record?.tool_policies, instance.id);
  return own(policy?.tools, tool) ?? policy?.default;
}

export function effectiveChoice(record: Pick<AccessRequestRecord, 'tool_policies'> | undefined, instance: McpInstanceRecord, tool: string, hints: ToolHints | undefined): ToolChoice {
  return setChoice(record, instance, tool) ?? defaultChoice(hints);
}

/**
 * Which tools a tools/list answer shows this grant: all but the denied ones. Null when nothing is
 * denied, so the answer passes untouched. Annotations never deny, so this needs no lookup.
 */
export function listFilter(record: Pick<AccessRequestRecord, 'tool_policies'>, instance: McpInstanceRecord): ((tool: string) => boolean) | null {
  const policy = own(record.tool_policies, instance.id);
  const denies = policy?.default === 'deny' || Object.values(policy?.tools ?? {}).includes('deny');
  if (instance.allow_tools === null && !denies) return null;
  return (tool) => setChoice(record, instance, tool) !== 'deny';
}

/**
 * Stored policies from what a body set, merged onto `current`: a null removes that choice, an
 * instance left with nothing goes. Objects are built from entries, so no tool name can reach a
 * prototype.
 */
export function mergePolicies(current: Record<string, ToolPolicy> | undefined, input: ToolPoliciesInput): Record<string, ToolPolicy> {
  const out = new Map<string, ToolPolicy>(Object.entries(current ?? {}));
  for (const [instanceId, change] of Object.entries(input)) {
    const before = out.get(instanceId) ?? {};
    const tools = new Map<string, ToolChoice>(Object.entries(before.tools ?? {}));
    for (const [name, choice] of Object.entries(change.tools ?? {})) {
      if (choice === null) tools.delete(name);
      else tools.set(name, choice);
    }
    const fallback = change.default === undefined ? before.default : (change.default ?? undefined);
    const next: ToolPolicy = { ...(fallback ? { default: fallback } : {}), ...(tools.size > 0 ? { tools: Object.fromEntries(tools) } : {}) };
    if (next.default || next.tools) out.set(instanceId, next);
    else out.delete(instanceId);
  }
  return Object.fromEntries(out);
}

/** Sets a grant's remembered approvals; none left, the field goes. */
function setRemembered(r: AccessRequestRecord, remembered: AccessRequestRecord['remembered']): void {
  if (remembered) r.remembered = remembered;
  else delete r.remembered;
}

const CONTROL = /\p{Cc}/u;
const EDGE_SPACE = /^\s|\s$/u;

/**
 * Why a called tool name is refused before any choice is looked up, or null. A control character
 * (a NUL above all: a C string ends there) or whitespace at an end (Python's `strip()`, Go's
 * `TrimSpace`) makes a name that a server may read as another: no tool is named so.
 */
export function toolNameFault(name: string): string | null {
  if (CONTROL.test(name)) return 'has a control character';
  if (EDGE_SPACE.test(name)) return 'begins or ends with whitespace';
  return null;
}

/**
 * A tool name as a loose server may match it: cut at a NUL, compatibility-normalized, without
 * invisible characters or whitespace at its ends, in one case.
 */
export function foldName(name: string): string {
  const nul = name.indexOf('\u0000');
  const cut = nul === -1 ? name : name.slice(0, nul);
  return cut.normalize('NFKC').replace(/\p{Cf}/gu, '').trim().toLowerCase().toUpperCase();
}

const STRICTNESS: Record<ToolChoice, number> = { allow: 0, ask: 1, deny: 2 };
const stricter = (a: ToolChoice, b: ToolChoice): ToolChoice => (STRICTNESS[b] > STRICTNESS[a] ? b : a);

/** The instance ids a grant names. */
export const grantedIds = (record: Pick<AccessRequestRecord, 'approved'>) => new Set(record.approved?.mcp_servers.flatMap((s) => s.instance_ids) ?? []);

/** Tool choices may name only instances the grant (or the approval being made) includes. */
export function checkPolicyInstances(input: ToolPoliciesInput, granted: Set<string>): void {
  for (const id of Object.keys(input)) {
    if (!granted.has(id)) throw invalidBody(`tool_policies names MCP instance ${id.slice(0, 100)}, which this grant does not include.`, `tool_policies.${id.slice(0, 100)}`);
  }
}

/** How long a tool list that lacks a called tool counts as current (a server may add tools). */
const LIST_FRESH_MS = 60_000;
/** After a failed fetch of an instance's list, how long svc waits before it tries again. */
const FAILED_FETCH_PAUSE_MS = 30_000;
/** The most tools a review lists per instance. */
const REVIEW_TOOLS = 500;

export class ToolPolicies {
  private readonly failedAt = new Map<string, number>();
  private readonly fetching = new Map<string, Promise<void>>();

  constructor(
    private readonly repos: Repositories,
    private readonly tools: McpToolsService,
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** how long a review may wait for an instance's tool list */
    private readonly reviewFetchMs: number,
  ) {}

  /**
   * Fetches the instance's list into the cache, once at a time per instance. A review does not try
   * again soon after a failure (it would wait on a dead server at every look); a call always tries,
   * since it goes to that server anyway, and a list that failed during the review must not leave a
   * destructive tool without its question once the server is back.
   */
  private fetch(instance: McpInstanceRecord, timeoutMs?: number, forCall = false): Promise<void> {
    const failed = this.failedAt.get(instance.id);
    if (!instance.enabled || (!forCall && failed !== undefined && this.clock() - failed < FAILED_FETCH_PAUSE_MS)) return Promise.resolve();
    let running = this.fetching.get(instance.id);
    if (!running) {
      running = this.tools
        .refresh(instance, timeoutMs)
        .then(
          () => void this.failedAt.delete(instance.id),
          (err: Error) => {
            this.failedAt.set(instance.id, this.clock());
            this.logger.warn({ instance: instance.id, err: err.message }, 'could not fetch the tool list of an MCP instance');
          },
        )
        .finally(() => this.fetching.delete(instance.id));
      this.fetching.set(instance.id, running);
    }
    return running;
  }

  /**
   * A tool's annotations from the instance's list; fetched when svc has no list, or its list lacks
   * the tool and is over a minute old. Undefined when the list cannot be had or does not name it:
   * then the call goes to the very server that could not say, under the default for no hints.
   */
  async hintsFor(instance: McpInstanceRecord, tool: string): Promise<ToolHints | undefined> {
    const find = async () => {
      const cache = await this.repos.mcpTools.get(instance.id);
      return { cache, tool: cache?.tools.find((t) => t.name === tool) };
    };
    const before = await find();
    if (before.tool) return before.tool.annotations ?? {};
    if (before.cache && this.clock() - Date.parse(before.cache.refreshed_at) < LIST_FRESH_MS) return undefined;
    await this.fetch(instance, undefined, true);
    const after = (await find()).tool;
    return after ? (after.annotations ?? {}) : undefined;
  }

  /**
   * This grant's choice for one tool of one of its instances. A name the instance does not list
   * that reads as one it lists, or as one the person chose for, in another case, width or with
   * invisible characters, or with whitespace at an end or text after a NUL (`DELETE_NOTE`,
   * `ｄelete_note`) gets the strictest of their choices: a server that matches names loosely
   * would run that tool.
   */
  async choose(record: AccessRequestRecord, instance: McpInstanceRecord, tool: string): Promise<ToolChoice> {
    // the endpoints refuse such a name first; whatever asks here gets no other answer
    if (toolNameFault(tool) !== null) return 'deny';
    const set = setChoice(record, instance, tool);
    // hints are found for a tool the instance lists (undefined: it does not)
    const hints = set === undefined ? await this.hintsFor(instance, tool) : undefined;
    let choice = set ?? defaultChoice(hints);
    if (choice === 'deny' || hints !== undefined) return choice;
    const listed = (await this.repos.mcpTools.get(instance.id))?.tools ?? [];
    if (listed.some((t) => t.name === tool)) return choice;
    const folded = foldName(tool);
    for (const t of listed) if (foldName(t.name) === folded) choice = stricter(choice, effectiveChoice(record, instance, t.name, t.annotations));
    for (const name of Object.keys(own(record.tool_policies, instance.id)?.tools ?? {})) {
      if (name !== tool && foldName(name) === folded) choice = stricter(choice, setChoice(record, instance, name) ?? choice);
    }
    return choice;
  }

  private toolView(record: Pick<AccessRequestRecord, 'tool_policies'> | undefined, instance: McpInstanceRecord, t: CachedTool): ReviewTool {
    const allowed = toolAllowed(instance, t.name);
    return {
      name: t.name,
      ...(t.description ? { description: t.description.slice(0, 500) } : {}),
      ...(t.annotations ? { annotations: t.annotations } : {}),
      default_choice: allowed ? defaultChoice(t.annotations) : 'deny',
      choice: effectiveChoice(record, instance, t.name, t.annotations),
      ...(allowed ? {} : { owner_denied: true }),
    };
  }

  /**
   * Each instance's tools as a review shows them. For a request still to decide, an enabled
   * instance whose list svc never fetched is fetched now (briefly: a server that does not answer
   * is shown as unknown, and its tools get their default when called).
   */
  async forReview(record: AccessRequestRecord, instances: McpInstanceRecord[]): Promise<Map<string, { tools_known: boolean; tools: ReviewTool[] }>> {
    if (record.status === 'draft') {
      const missing: McpInstanceRecord[] = [];
      for (const m of instances) if (m.enabled && !(await this.repos.mcpTools.get(m.id))) missing.push(m);
      await Promise.all(missing.map((m) => this.fetch(m, this.reviewFetchMs)));
    }
    const out = new Map<string, { tools_known: boolean; tools: ReviewTool[] }>();
    for (const m of instances) {
      const cache = await this.repos.mcpTools.get(m.id);
      out.set(m.id, { tools_known: cache !== undefined, tools: (cache?.tools ?? []).slice(0, REVIEW_TOOLS).map((t) => this.toolView(record, m, t)) });
    }
    return out;
  }

  /**
   * The grant's choices in force, per instance it names: the review data of an approved request.
   * For a grant in force, an instance whose list svc never had is fetched (briefly), as for a review.
   */
  async grantChoices(record: AccessRequestRecord): Promise<GrantToolChoices[]> {
    const out: GrantToolChoices[] = [];
    if (record.status === 'approved') {
      const missing: McpInstanceRecord[] = [];
      for (const id of grantedIds(record)) {
        const m = await this.repos.mcpInstances.get(id);
        if (m?.enabled && !(await this.repos.mcpTools.get(id))) missing.push(m);
      }
      await Promise.all(missing.map((m) => this.fetch(m, this.reviewFetchMs)));
    }
    for (const id of grantedIds(record)) {
      const instance = await this.repos.mcpInstances.get(id);
      const policy = own(record.tool_policies, id);
      const cache = instance ? await this.repos.mcpTools.get(id) : undefined;
      out.push({
        instance_id: id,
        instance_name: instance?.name ?? null,
        default: policy?.default ?? null,
        tools_known: cache !== undefined,
        tools: instance ? (cache?.tools ?? []).slice(0, REVIEW_TOOLS).map((t) => this.toolView(record, instance, t)) : [],
        choices: { ...(policy?.tools ?? {}) },
        remembered: inForce(record, instance, this.clock()),
      });
    }
    return out;
  }

  /** Changes a grant's tool choices (its approver or an admin; anyone else: 404); the next call is held to them. */
  async set(actor: UserRecord, id: string, input: ToolPoliciesInput): Promise<AccessRequestRecord> {
    const mayDecide = (r: AccessRequestRecord) => r.user_id !== null && (r.user_id === actor.id || actor.role === 'admin');
    const current = /^[0-9a-f-]{36}$/i.test(id) ? await this.repos.accessRequests.get(id) : undefined;
    if (!current || !mayDecide(current)) throw notFound('No such access request.');
    // nothing to change is no change: no write
    if (Object.keys(input).length === 0 && current.status === 'approved') return current;
    const record = await this.repos.accessRequests.update(id, (r) => {
      if (!mayDecide(r)) throw notFound('No such access request.');
      if (r.status !== 'approved') throw conflict('not_approved', `Only an approved grant has tool choices to change; this one is ${r.status}.`);
      if (r.user_id !== actor.id && actor.role !== 'admin') throw forbidden("Only the grant's approver or an admin can change its tool choices.");
      checkPolicyInstances(input, grantedIds(r));
      const before = r.tool_policies;
      r.tool_policies = mergePolicies(before, input);
      // a remembered yes was given to the choice as it stood: a change of it ends the yes
      setRemembered(r, afterChoiceChange(pruned(r.remembered, this.clock()), before, r.tool_policies, foldName));
      r.updated_at = new Date(this.clock()).toISOString();
    });
    if (!record) throw notFound('No such access request.');
    return record;
  }

  /** Whether the person said to let this tool of this grant and instance run without asking, still in force. */
  remembered(record: AccessRequestRecord, instance: McpInstanceRecord, tool: string): boolean {
    return record.remembered !== undefined && isRemembered(record, instance, tool, this.clock());
  }

  /**
   * Keeps an approval's remember_minutes on its grant (still approved, the instance still in it),
   * for the next calls of the same tool of that grant and instance.
   */
  async remember(view: HeldCallView): Promise<void> {
    if (view.status !== 'approved' || !view.remember_until || !view.decided_by) return;
    const instance = await this.repos.mcpInstances.get(view.instance_id);
    if (!instance) return;
    const approval = { until: view.remember_until, by: view.decided_by, call_id: view.id, instance_at: instance.updated_at };
    await this.repos.accessRequests.update(view.access_request_id, (r) => {
      if (r.status !== 'approved' || !grantedIds(r).has(instance.id)) return;
      setRemembered(r, withApproval(pruned(r.remembered, this.clock()), instance.id, view.tool, approval));
    });
  }

  /**
   * Ends a grant's remembered approvals: of one tool of one instance, of an instance, or all (its
   * approver or an admin; anyone else: 404). The next call of each is held again.
   */
  async forget(actor: UserRecord, id: string, which: { instance_id?: string; tool?: string }): Promise<AccessRequestRecord> {
    const mayDecide = (r: AccessRequestRecord) => r.user_id !== null && (r.user_id === actor.id || actor.role === 'admin');
    const current = /^[0-9a-f-]{36}$/i.test(id) ? await this.repos.accessRequests.get(id) : undefined;
    if (!current || !mayDecide(current)) throw notFound('No such access request.');
    if (which.tool !== undefined && which.instance_id === undefined) throw invalidBody('Name the instance of the tool too (instance_id).', 'instance_id');
    if (current.remembered === undefined) return current;
    const record = await this.repos.accessRequests.update(id, (r) => {
      if (!mayDecide(r)) throw notFound('No such access request.');
      setRemembered(r, without(pruned(r.remembered, this.clock()), which.instance_id, which.tool));
    });
    if (!record) throw notFound('No such access request.');
    return record;
  }
}
