import type { ToolChoice, ToolPolicy } from '../store/schema.js';

/**
 * The policy a review surface sends for one instance, from what the person picked: only what
 * differs from what the tool would get anyway (its annotations, or the instance default the person
 * set), so a server that later marks a tool destructive still gets asked about it.
 */
export function policyFromPicks(tools: { name: string; default_choice: ToolChoice; owner_denied?: boolean }[], picked: ReadonlyMap<string, ToolChoice>, fallback?: ToolChoice | null): ToolPolicy | undefined {
  const out = new Map<string, ToolChoice>();
  const known = new Map(tools.map((t) => [t.name, t]));
  for (const [name, choice] of picked) {
    const tool = known.get(name);
    if (tool?.owner_denied) continue;
    const otherwise = fallback ?? tool?.default_choice;
    if (choice !== otherwise) out.set(name, choice);
  }
  if (!fallback && out.size === 0) return undefined;
  return { ...(fallback ? { default: fallback } : {}), ...(out.size > 0 ? { tools: Object.fromEntries(out) } : {}) };
}

export const CHOICE_LABELS: Record<ToolChoice, string> = { allow: 'Allow', ask: 'Ask each time', deny: 'Deny' };

/** A tool's annotations in a few words, for the review surfaces. */
export function hintWords(hints: { readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean; openWorldHint?: boolean } | undefined): string[] {
  if (!hints) return [];
  const words: string[] = [];
  if (hints.readOnlyHint) words.push('read-only');
  if (hints.destructiveHint === true && !hints.readOnlyHint) words.push('destructive');
  if (hints.destructiveHint === false && !hints.readOnlyHint) words.push('not destructive');
  if (hints.idempotentHint) words.push('idempotent');
  if (hints.openWorldHint) words.push('open world');
  return words;
}
