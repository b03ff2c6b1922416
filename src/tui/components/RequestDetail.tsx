import { Box, Text } from 'ink';
import type { ReactNode } from 'react';
import { unverifiedReason } from '../../access-requests/client-kinds.js';
import { hintWords } from '../../mcp/choices.js';
import type { ToolChoice } from '../../store/schema.js';
import { countdown, safe, tone, windowFor } from '../format.js';
import { type AppRole, ROLE_NAMES, ROLES, type ReviewData } from '../types.js';

export interface RequestDetailProps {
  /** null while it loads */
  data: ReviewData | null;
  /** The role that `a` would grant. */
  role: AppRole | null;
  /** Ticked instance ids. */
  selected: string[];
  /** Index into the enabled instances, in display order. */
  cursor: number;
  secondsLeft: number;
  /** the reviewer's tool choices per instance (absent: each tool's own) */
  picks?: Record<string, Record<string, ToolChoice>>;
  /** the limits `a` would set, as typed (empty: none), and the field `l` is editing */
  limits?: { rpm: string; tokens: string };
  editing?: 'rpm' | 'tokens' | null;
  width: number;
  /** Lines this view may use. */
  height: number;
  color: boolean;
}

type Line =
  | { kind: 'url'; url: string }
  | { kind: 'none' }
  | { kind: 'instance'; id: string; name: string; enabled: boolean; index: number }
  | { kind: 'tool'; instance: string; name: string; choice: ToolChoice; default_choice: ToolChoice; words: string[]; locked: boolean; index: number }
  | { kind: 'unknown-tools'; instance: string };

const LABEL_W = 12;

function Field({ label, children, color }: { label: string; children: ReactNode; color: boolean }) {
  return (
    <Box>
      <Box width={LABEL_W} flexShrink={0}>
        <Text {...tone(color, 'muted')}>{label}</Text>
      </Box>
      <Box flexGrow={1} flexShrink={1}>
        {children}
      </Box>
    </Box>
  );
}

const roleText = (role: AppRole) => `${role} (${ROLE_NAMES[role]})`;

/** One request: who asks, for what role, which MCP servers, with the reviewer's instances to tick. */
export function RequestDetail({ data, role, selected, cursor, secondsLeft, picks, limits = { rpm: '', tokens: '' }, editing = null, width, height, color }: RequestDetailProps) {
  if (!data) {
    return (
      <Box width={width}>
        <Text>Loading…</Text>
      </Box>
    );
  }
  const lines: Line[] = [];
  let index = 0;
  for (const server of data.mcp_servers) {
    lines.push({ kind: 'url', url: server.url });
    if (server.instances.length === 0) lines.push({ kind: 'none' });
    for (const i of server.instances) {
      lines.push({ kind: 'instance', id: i.id, name: i.name, enabled: i.enabled, index: i.enabled ? index++ : -1 });
      if (!i.enabled) continue;
      if (i.tools_known === false) lines.push({ kind: 'unknown-tools', instance: i.id });
      for (const t of i.tools ?? []) {
        const choice = t.owner_denied ? 'deny' : (picks?.[i.id]?.[t.name] ?? t.choice);
        lines.push({ kind: 'tool', instance: i.id, name: t.name, choice, default_choice: t.default_choice, words: hintWords(t.annotations), locked: Boolean(t.owner_denied), index: t.owner_denied ? -1 : index++ });
      }
    }
  }
  const chosen = new Set(selected);
  const selectedCount = data.mcp_servers.reduce((n, s) => n + s.instances.filter((i) => i.enabled && chosen.has(i.id)).length, 0);
  const canCycle = ROLES.indexOf(data.max_grantable_role) > 0;
  const fixed = 8 + (data.app_description ? 1 : 0) + (data.app_registered === false ? 1 : 0) + (data.redirect_url ? 1 : 0);
  const cursorLine = Math.max(0, lines.findIndex((l) => (l.kind === 'instance' || l.kind === 'tool') && l.index === cursor));
  const { start, end } = windowFor(lines.length, cursorLine, height - fixed);
  const above = start;
  const below = lines.length - end;

  return (
    <Box flexDirection="column" width={width}>
      <Field label="App" color={color}>
        <Text wrap="truncate-end" {...tone(color, 'accent')}>
          {data.app_name ? safe(data.app_name, 120) : '(name not known: not a registered client)'}
        </Text>
      </Field>
      <Field label="Client ID" color={color}>
        <Text wrap="truncate-end">{safe(data.app_client_id, 255)}</Text>
      </Field>
      {data.app_description ? (
        <Field label="About" color={color}>
          <Text wrap="truncate-end">{safe(data.app_description, 300)}</Text>
        </Field>
      ) : null}
      {data.app_registered === false ? (
        <Field label="Registered" color={color}>
          <Text wrap="truncate-end" {...tone(color, 'warning')}>
            {unverifiedReason(data.client_kind)}
          </Text>
        </Field>
      ) : null}
      {data.redirect_url ? (
        <Field label="Redirect to" color={color}>
          <Text wrap="truncate-end" {...tone(color, 'warning')}>
            {safe(data.redirect_url, 300)}
          </Text>
        </Field>
      ) : null}
      <Field label="Requested" color={color}>
        <Text wrap="truncate-end">{roleText(data.requested_role)}</Text>
      </Field>
      <Field label="Grant role" color={color}>
        <Text wrap="truncate-end">
          <Text {...tone(color, 'accent')}>{role ? roleText(role) : ''}</Text>
          <Text {...tone(color, 'muted')}>{canCycle ? '  r: change' : '  (the most you may grant)'}</Text>
        </Text>
      </Field>
      <Field label="Limits" color={color}>
        <Text wrap="truncate-end">
          <Text {...(editing ? tone(color, 'warning') : tone(color, 'accent'))}>
            {`${limits.rpm || (editing === 'rpm' ? '' : 'none')}${editing === 'rpm' ? '▏' : ''} calls/min, ${limits.tokens || (editing === 'tokens' ? '' : 'none')}${editing === 'tokens' ? '▏' : ''} tokens/day`}
          </Text>
          <Text {...tone(color, 'muted')}>{editing ? '  digits, Tab, Enter' : '  l: set'}</Text>
        </Text>
      </Field>
      <Field label={data.status === 'draft' ? 'Time left' : 'Status'} color={color}>
        {data.status === 'draft' ? (
          <Text {...(secondsLeft < 60 ? tone(color, 'warning') : {})}>{countdown(secondsLeft)}</Text>
        ) : (
          <Text {...tone(color, 'warning')}>{data.status} (no longer pending)</Text>
        )}
      </Field>
      <Box>
        <Text wrap="truncate-end" {...tone(color, 'title')}>
          MCP servers: {data.mcp_servers.length} requested, {selectedCount} instance{selectedCount === 1 ? '' : 's'} selected
          {above || below ? `  (${[above ? `↑${above}` : '', below ? `↓${below}` : ''].filter(Boolean).join(' ')} more)` : ''}
        </Text>
      </Box>
      {data.mcp_servers.length === 0 ? <Text {...tone(color, 'muted')}> (none: the app asks for the role only)</Text> : null}
      {lines.slice(start, end).map((line, i) => {
        if (line.kind === 'url')
          return (
            <Text key={`u${start + i}`} wrap="truncate-end">
              {'  '}
              {safe(line.url, 300)}
            </Text>
          );
        if (line.kind === 'none')
          return (
            <Text key={`n${start + i}`} wrap="truncate-end" {...tone(color, 'muted')}>
              {'      '}(none of yours: add one with `svc mcp add`)
            </Text>
          );
        if (line.kind === 'unknown-tools')
          return (
            <Text key={`t${start + i}`} wrap="truncate-end" {...tone(color, 'muted')}>
              {'        '}tools not known (no answer from the server): each gets its default
            </Text>
          );
        if (line.kind === 'tool') {
          const at = !line.locked && line.index === cursor;
          const changed = line.choice !== line.default_choice;
          return (
            <Text key={`${line.instance}:${line.name}`} wrap="truncate-end" {...(at ? tone(color, 'accent') : line.choice === 'ask' || line.choice === 'deny' ? tone(color, 'warning') : {})}>
              {at ? '      › ' : '        '}
              {`${line.choice.padEnd(5)}`} {safe(line.name, 60)}
              {line.locked ? ' (owner: denied)' : changed ? ` (default ${line.default_choice})` : ''}
              <Text {...tone(color, 'muted')}>{line.words.length ? `  ${line.words.join(', ')}` : ''}</Text>
            </Text>
          );
        }
        const here = line.enabled && line.index === cursor;
        const box = !line.enabled ? '[-]' : chosen.has(line.id) ? '[x]' : '[ ]';
        const style = here ? tone(color, 'accent') : !line.enabled ? tone(color, 'muted') : {};
        return (
          <Text key={line.id} wrap="truncate-end" {...style}>
            {here ? '  › ' : '    '}
            {box} {safe(line.name, 80)}
            {line.enabled ? '' : ' (disabled)'}
            {'  '}
            <Text {...tone(color, 'muted')}>{line.id.slice(0, 8)}</Text>
          </Text>
        );
      })}
    </Box>
  );
}
