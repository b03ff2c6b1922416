import { Box, Text } from 'ink';
import { RowLead } from './RowLead.js';
import type { AppsState } from '../apps-state.js';
import { relativeWhen } from '../../text.js';
import { safe, tone, windowFor } from '../format.js';
import { type ActivityEvent, type GrantSummary, ROLE_NAMES } from '../types.js';

export interface AppsViewProps {
  apps: AppsState;
  width: number;
  /** Lines this view may use. */
  height: number;
  color: boolean;
  /** the review's clock, for "5 min ago" */
  now: number;
}

const ROLE_W = 11;
const USED_W = 20;
const TODAY_W = 18;

const limitsText = (g: GrantSummary) => {
  const l = g.limits;
  if (!l || (!l.requests_per_minute && !l.tokens_per_day)) return 'no limits';
  return [l.requests_per_minute ? `${l.requests_per_minute}/min` : '', l.tokens_per_day ? `${l.tokens_per_day} tok/day` : ''].filter(Boolean).join(', ');
};

const eventText = (e: ActivityEvent, now: number) => {
  const what = e.tool ? `${e.mcp_method ?? ''} ${e.tool}` : (e.model ?? e.mcp_method ?? '');
  const tokens = e.tokens_in === undefined && e.tokens_out === undefined ? '' : `  ${e.tokens_estimated ? '~' : ''}${e.tokens_in ?? '?'}/${e.tokens_out ?? '?'} tok`;
  return `${relativeWhen(e.time, now)}  ${e.kind} ${what}  ${e.status} ${e.outcome}${e.reason ? ` (${e.reason})` : ''}  ${e.duration_ms} ms${tokens}`;
};

/** The Apps view: the grants you let in, the highlighted one's activity as it happens, and the revoke or limits prompt. */
export function AppsView({ apps, width, height, color, now }: AppsViewProps) {
  if (apps.grants.length === 0) {
    return (
      <Box flexDirection="column" width={width}>
        <Text wrap="truncate-end">{apps.loaded ? 'No app has access right now.' : 'Loading…'}</Text>
        <Text wrap="truncate-end" {...tone(color, 'muted')}>
          Apps you approve appear here, with what they do.
        </Text>
      </Box>
    );
  }
  const listRows = Math.max(2, Math.floor(height / 2) - 1);
  const { start, end } = windowFor(apps.grants.length, apps.cursor, listRows);
  const current = apps.grants[apps.cursor];
  const prompt = apps.edit ? 1 : apps.confirmRevoke ? 1 : 0;
  const activityRows = Math.max(1, height - (end - start) - 3 - prompt);
  return (
    <Box flexDirection="column" width={width}>
      <Box>
        <Box width={2} flexShrink={0}>
          <Text> </Text>
        </Box>
        <Box flexGrow={1} flexShrink={1}>
          <Text wrap="truncate-end" {...tone(color, 'muted')}>
            APP
          </Text>
        </Box>
        <Box width={ROLE_W} flexShrink={0}>
          <Text {...tone(color, 'muted')}>ROLE</Text>
        </Box>
        <Box width={USED_W} flexShrink={0}>
          <Text {...tone(color, 'muted')}>LAST USED</Text>
        </Box>
        <Box width={TODAY_W} flexShrink={0}>
          <Text {...tone(color, 'muted')}>TODAY</Text>
        </Box>
      </Box>
      {apps.grants.slice(start, end).map((g, i) => {
        const selected = start + i === apps.cursor;
        return (
          <Box key={g.id}>
            <RowLead selected={selected} name={g.app_name ?? g.app_client_id} color={color} />
            <Box width={ROLE_W} flexShrink={0}>
              <Text wrap="truncate-end">{ROLE_NAMES[g.approved_role ?? 'scope_user_user']}</Text>
            </Box>
            <Box width={USED_W} flexShrink={0}>
              <Text wrap="truncate-end">{g.usage?.last_used_at ? relativeWhen(g.usage.last_used_at, now) : 'never'}</Text>
            </Box>
            <Box width={TODAY_W} flexShrink={0}>
              <Text wrap="truncate-end">{`${g.usage?.today.calls ?? 0} calls ${g.usage?.today.tokens ?? 0} tok`}</Text>
            </Box>
          </Box>
        );
      })}
      <Text wrap="truncate-end" {...tone(color, 'muted')}>
        {current ? `${safe(current.app_name ?? current.app_client_id, 40)} · ${current.id.slice(0, 8)} · ${limitsText(current)} · recent activity:` : ''}
      </Text>
      {apps.activityOf !== current?.id ? (
        <Text {...tone(color, 'muted')}>Loading…</Text>
      ) : apps.activity.length === 0 ? (
        <Text {...tone(color, 'muted')}>No calls yet.</Text>
      ) : (
        apps.activity.slice(0, activityRows).map((e) => (
          <Text key={e.id} wrap="truncate-end" {...(e.outcome === 'ok' ? {} : tone(color, 'error'))}>
            {safe(eventText(e, now), 300)}
          </Text>
        ))
      )}
      {apps.confirmRevoke ? (
        <Text wrap="truncate-end" {...tone(color, 'warning')}>
          {`Revoke ${safe(current?.app_name ?? current?.app_client_id ?? '', 30)}? y revokes it now; any other key keeps it.`}
        </Text>
      ) : null}
      {apps.edit ? (
        <Text wrap="truncate-end" {...tone(color, 'warning')}>
          {`Limits: calls a minute [${apps.edit.rpm}${apps.edit.field === 'rpm' ? '▏' : ''}]  tokens a day [${apps.edit.tokens}${apps.edit.field === 'tokens' ? '▏' : ''}]  empty = none · Tab next · Enter save · Esc cancel`}
        </Text>
      ) : null}
    </Box>
  );
}
