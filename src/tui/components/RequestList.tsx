import { Box, Text } from 'ink';
import { RowLead } from './RowLead.js';
import { countdown, secondsUntil, tone, windowFor } from '../format.js';
import type { PendingRequest } from '../types.js';

export interface RequestListProps {
  requests: PendingRequest[];
  cursor: number;
  /** false until the first answer from the daemon */
  loaded: boolean;
  now: number;
  width: number;
  /** Lines this list may use, its column headings included. */
  height: number;
  color: boolean;
}

const ROLE_W = 23;
const MCP_W = 5;
const LEFT_W = 9;

/** The pending (draft) requests, one a line, scrolled to keep the highlighted one in view. */
export function RequestList({ requests, cursor, loaded, now, width, height, color }: RequestListProps) {
  if (requests.length === 0) {
    return (
      <Box flexDirection="column" width={width}>
        <Text wrap="truncate-end">{loaded ? 'No pending requests.' : 'Loading…'}</Text>
        <Text wrap="truncate-end" {...tone(color, 'muted')}>
          New requests from apps appear here as they arrive.
        </Text>
      </Box>
    );
  }
  const { start, end } = windowFor(requests.length, cursor, height - 1);
  const above = start;
  const below = requests.length - end;
  const more = [above ? `↑${above}` : '', below ? `↓${below}` : ''].filter(Boolean).join(' ');
  return (
    <Box flexDirection="column" width={width}>
      <Box>
        <Box width={2} flexShrink={0}>
          <Text> </Text>
        </Box>
        <Box flexGrow={1} flexShrink={1}>
          <Text wrap="truncate-end" {...tone(color, 'muted')}>
            APP{more ? `  (${more} more)` : ''}
          </Text>
        </Box>
        <Box width={ROLE_W} flexShrink={0}>
          <Text {...tone(color, 'muted')}>REQUESTED ROLE</Text>
        </Box>
        <Box width={MCP_W} flexShrink={0}>
          <Text {...tone(color, 'muted')}>MCP</Text>
        </Box>
        <Box width={LEFT_W} flexShrink={0} justifyContent="flex-end">
          <Text {...tone(color, 'muted')}>EXPIRES</Text>
        </Box>
      </Box>
      {requests.slice(start, end).map((r, i) => {
        const selected = start + i === cursor;
        const left = secondsUntil(r.expires_at, now);
        return (
          <Box key={r.id}>
            <RowLead selected={selected} name={r.app_name ?? r.app_client_id} color={color} />
            <Box width={ROLE_W} flexShrink={0}>
              <Text wrap="truncate-end">{r.requested_role}</Text>
            </Box>
            <Box width={MCP_W} flexShrink={0}>
              <Text>{String(r.requested.mcp_servers.length)}</Text>
            </Box>
            <Box width={LEFT_W} flexShrink={0} justifyContent="flex-end">
              <Text {...(left < 60 ? tone(color, 'warning') : {})}>{countdown(left)}</Text>
            </Box>
          </Box>
        );
      })}
    </Box>
  );
}
