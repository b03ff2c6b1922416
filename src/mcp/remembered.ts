import type { AccessRequestRecord, McpInstanceRecord, RememberedApproval, ToolPolicy } from '../store/schema.js';

/**
 * Approvals the person said to remember (`remember_minutes` on a held call): a tool of one grant
 * and instance runs without asking until then. They are kept on the grant, beside its tool choices,
 * so that:
 * - every replica of a team server reads them with the grant (whose cached copy every replica drops
 *   when it changes), with nothing of them in any one replica's memory;
 * - a change of the tool's choice, or of the instance's default, ends them in the same write; the
 *   owner editing the instance ends them too (the approval names the instance as it was);
 * - the person sees them with the grant's tool choices, and can end them there.
 */

export type Remembered = Record<string, Record<string, RememberedApproval>>;

const own = <T>(obj: Record<string, T> | undefined, key: string): T | undefined => (obj && Object.hasOwn(obj, key) ? obj[key] : undefined);

/** Whether a remembered approval lets this tool of this grant and instance run now without asking. */
export function isRemembered(record: Pick<AccessRequestRecord, 'remembered'>, instance: McpInstanceRecord, tool: string, now: number): boolean {
  const r = own(own(record.remembered, instance.id), tool);
  return r !== undefined && r.instance_at === instance.updated_at && Date.parse(r.until) > now;
}

/** `remembered` keeping only what `keep` says, with no empty instance; undefined when nothing is left. */
function filtered(remembered: Remembered | undefined, keep: (instanceId: string, tool: string, r: RememberedApproval) => boolean): Remembered | undefined {
  const out: [string, Record<string, RememberedApproval>][] = [];
  for (const [instanceId, tools] of Object.entries(remembered ?? {})) {
    const kept = Object.entries(tools).filter(([tool, r]) => keep(instanceId, tool, r));
    if (kept.length > 0) out.push([instanceId, Object.fromEntries(kept)]);
  }
  return out.length > 0 ? Object.fromEntries(out) : undefined;
}

/** Without the approvals whose time is over. */
export const pruned = (remembered: Remembered | undefined, now: number) => filtered(remembered, (_i, _t, r) => Date.parse(r.until) > now);

/** With one more (or a longer) approval. */
export function withApproval(remembered: Remembered | undefined, instanceId: string, tool: string, approval: RememberedApproval): Remembered {
  const tools = Object.entries(own(remembered, instanceId) ?? {}).filter(([name]) => name !== tool);
  const others = Object.entries(remembered ?? {}).filter(([id]) => id !== instanceId);
  return Object.fromEntries([...others, [instanceId, Object.fromEntries([...tools, [tool, approval]])]]);
}

/** Without the approvals of `instanceId` (all instances when absent) and of `tool` (all tools when absent). */
export const without = (remembered: Remembered | undefined, instanceId?: string, tool?: string) =>
  filtered(remembered, (i, t) => !((instanceId === undefined || i === instanceId) && (tool === undefined || t === tool)));

/**
 * What is left after the tool choices went from `before` to `after`: an instance whose default
 * changed loses all of its approvals, and a tool whose own choice changed loses its own, and so do
 * the names that read as it (`fold`), since a choice of one reaches the calls of the other.
 */
export function afterChoiceChange(
  remembered: Remembered | undefined,
  before: Record<string, ToolPolicy> | undefined,
  after: Record<string, ToolPolicy> | undefined,
  fold: (name: string) => string,
): Remembered | undefined {
  const changed = new Map<string, { all: boolean; folded: Set<string> }>();
  for (const instanceId of Object.keys(remembered ?? {})) {
    const b = own(before, instanceId);
    const a = own(after, instanceId);
    const names = new Set([...Object.keys(b?.tools ?? {}), ...Object.keys(a?.tools ?? {})]);
    const folded = new Set([...names].filter((n) => own(b?.tools, n) !== own(a?.tools, n)).map(fold));
    changed.set(instanceId, { all: b?.default !== a?.default, folded });
  }
  return filtered(remembered, (i, tool) => {
    const c = changed.get(i);
    return !c || (!c.all && !c.folded.has(fold(tool)));
  });
}

/** One instance's approvals in force, as the grant's tool choices list them. */
export function inForce(record: Pick<AccessRequestRecord, 'remembered'>, instance: McpInstanceRecord | undefined, now: number) {
  if (!instance) return [];
  return Object.entries(own(record.remembered, instance.id) ?? {})
    .filter(([, r]) => r.instance_at === instance.updated_at && Date.parse(r.until) > now)
    .map(([tool, r]) => ({ tool, until: r.until, approved_by: r.by, call_id: r.call_id }))
    .sort((a, b) => a.tool.localeCompare(b.tool));
}
