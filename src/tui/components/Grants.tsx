import { Box, Text } from 'ink';
import { hintWords } from '../../mcp/choices.js';
import type { ToolChoice } from '../../store/schema.js';
import { safe, tone, windowFor } from '../format.js';
import type { PendingRequest, ReviewData } from '../types.js';

export interface GrantListProps {
  grants: PendingRequest[];
  cursor: number;
  width: number;
  height: number;
  color: boolean;
}

/** The approved grants whose tool choices the reviewer may change. */
export function GrantList({ grants, cursor, width, height, color }: GrantListProps) {
  if (grants.length === 0) return <Text wrap="truncate-end">No approved grants of yours.</Text>;
  const { start, end } = windowFor(grants.length, cursor, height - 1);
  return (
    <Box flexDirection="column" width={width}>
      <Text wrap="truncate-end" {...tone(color, 'muted')}>
        APPROVED GRANTS: Enter shows and changes their tool choices
      </Text>
      {grants.slice(start, end).map((g, i) => {
        const here = start + i === cursor;
        const instances = (g.approved?.mcp_servers ?? []).reduce((n, s) => n + s.instance_ids.length, 0);
        return (
          <Text key={g.id} wrap="truncate-end" {...(here ? tone(color, 'accent') : {})}>
            {here ? '› ' : '  '}
            {safe(g.app_name ?? g.app_client_id, 60)}  {g.id.slice(0, 8)}  {instances} MCP instance{instances === 1 ? '' : 's'}
          </Text>
        );
      })}
    </Box>
  );
}

export interface GrantToolsProps {
  data: ReviewData | null;
  /** the clock, for how long a remembered approval still runs */
  now: number;
  picks: Record<string, Record<string, ToolChoice>>;
  cursor: number;
  width: number;
  height: number;
  color: boolean;
}

type Line =
  | { kind: 'instance'; name: string; fallback: string }
  | { kind: 'remembered'; instance: string; tool: string; minutes: number }
  | { kind: 'tool'; instance: string; name: string; choice: ToolChoice; saved: ToolChoice; words: string[]; locked: boolean; index: number };

/** One grant's tools, per granted instance, with the choice each has; space changes the highlighted one. */
export function GrantTools({ data, now, picks, cursor, width, height, color }: GrantToolsProps) {
  if (!data) return <Text>Loading…</Text>;
  const lines: Line[] = [];
  let index = 0;
  for (const c of data.tool_choices ?? []) {
    lines.push({ kind: 'instance', name: c.instance_name ?? '(removed)', fallback: c.default ? `default ${c.default}` : c.tools_known ? 'defaults from annotations' : 'tools not known yet' });
    for (const t of c.tools) {
      lines.push({ kind: 'tool', instance: c.instance_id, name: t.name, choice: t.owner_denied ? 'deny' : (picks[c.instance_id]?.[t.name] ?? t.choice), saved: t.choice, words: hintWords(t.annotations), locked: Boolean(t.owner_denied), index: t.owner_denied ? -1 : index++ });
    }
    for (const r of c.remembered ?? []) lines.push({ kind: 'remembered', instance: c.instance_id, tool: r.tool, minutes: Math.max(1, Math.ceil((Date.parse(r.until) - now) / 60_000)) });
  }
  if (lines.length === 0) return <Text wrap="truncate-end">This grant has no MCP instance.</Text>;
  const at = Math.max(0, lines.findIndex((l) => l.kind === 'tool' && l.index === cursor));
  const { start, end } = windowFor(lines.length, at, height - 1);
  return (
    <Box flexDirection="column" width={width}>
      <Text wrap="truncate-end" {...tone(color, 'title')}>
        Tool choices of {safe(data.app_name ?? data.app_client_id, 60)} ({data.id.slice(0, 8)})
      </Text>
      {lines.slice(start, end).map((l, i) =>
        l.kind === 'instance' ? (
          <Text key={`i${start + i}`} wrap="truncate-end">
            {'  '}
            {safe(l.name, 80)}
            <Text {...tone(color, 'muted')}>  ({l.fallback})</Text>
          </Text>
        ) : l.kind === 'remembered' ? (
          <Text key={`r${l.instance}:${l.tool}`} wrap="truncate-end" {...tone(color, 'muted')}>
            {'    '}remembered: {safe(l.tool, 60)} runs without asking for {l.minutes} more min
          </Text>
        ) : (
          <Text key={`${l.instance}:${l.name}`} wrap="truncate-end" {...(!l.locked && l.index === cursor ? tone(color, 'accent') : {})}>
            {!l.locked && l.index === cursor ? '  › ' : '    '}
            {l.choice.padEnd(5)} {safe(l.name, 60)}
            {l.locked ? ' (owner: denied)' : l.choice !== l.saved ? ` (was ${l.saved}: s saves)` : ''}
            <Text {...tone(color, 'muted')}>{l.words.length ? `  ${l.words.join(', ')}` : ''}</Text>
          </Text>
        ),
      )}
    </Box>
  );
}
