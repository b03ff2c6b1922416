import { Box, Text } from 'ink';
import { argumentsText } from '../../mcp/display.js';
import { countdown, safe, secondsUntil, tone, windowFor } from '../format.js';
import type { HeldCall } from '../types.js';

export interface HeldCallRowsProps {
  calls: HeldCall[];
  /** the highlighted call's index, or -1 when the cursor is on a request */
  cursor: number;
  now: number;
  width: number;
  /** lines these rows may use */
  height: number;
  color: boolean;
}

/** `line` in rows of at most `cols` characters (a character is never split). */
function rowsOf(line: string, cols: number): string[] {
  const chars = Array.from(line);
  if (chars.length <= cols) return [line];
  const rows: string[] = [];
  for (let i = 0; i < chars.length; i += cols) rows.push(chars.slice(i, i + cols).join(''));
  return rows;
}

/** The arguments on one line, every invisible character shown as its escape, then made inert. */
const oneLine = (args: unknown, max: number) => safe(argumentsText(args, 0), max);

/** Held calls, two lines each (who wants which tool; its arguments), above the pending requests. */
export function HeldCallRows({ calls, cursor, now, width, height, color }: HeldCallRowsProps) {
  const fits = Math.max(1, Math.floor((height - 1) / 2));
  const { start, end } = windowFor(calls.length, Math.max(0, cursor), fits);
  const hidden = calls.length - (end - start);
  return (
    <Box flexDirection="column" width={width}>
      <Text wrap="truncate-end" {...tone(color, 'warning')}>
        HELD TOOL CALLS: {calls.length} waiting for you{hidden > 0 ? ` (${hidden} more: move to see them)` : ''}
      </Text>
      {calls.slice(start, end).map((c, i) => {
        const here = start + i === cursor;
        const style = here ? tone(color, 'accent') : {};
        return (
          <Box key={c.id} flexDirection="column" width={width}>
            <Box>
              <Box width={2} flexShrink={0}>
                <Text {...style}>{here ? '›' : ' '}</Text>
              </Box>
              <Box flexGrow={1} flexShrink={1}>
                <Text wrap="truncate-end" {...style}>
                  {safe(c.app_name ?? c.app_client_id, 60)} wants {safe(c.tool, 60)} on {safe(c.instance_name, 40)}
                </Text>
              </Box>
              <Box width={8} flexShrink={0} justifyContent="flex-end">
                <Text {...tone(color, 'warning')}>{countdown(secondsUntil(c.expires_at, now))}</Text>
              </Box>
            </Box>
            <Text wrap="truncate-end" {...tone(color, 'muted')}>
              {'    '}
              {oneLine(c.arguments, 400)}
            </Text>
          </Box>
        );
      })}
    </Box>
  );
}

export interface CallDetailProps {
  call: HeldCall | undefined;
  now: number;
  width: number;
  height: number;
  color: boolean;
}

/** One held call with its arguments in full (as far as the screen goes), for `a` or `d`. */
export function CallDetail({ call, now, width, height, color }: CallDetailProps) {
  if (!call) {
    return (
      <Box width={width}>
        <Text>This call is no longer waiting (decided elsewhere, expired or ended).</Text>
      </Box>
    );
  }
  const field = (label: string, value: string, t?: 'accent' | 'warning') => (
    <Box>
      <Box width={12} flexShrink={0}>
        <Text {...tone(color, 'muted')}>{label}</Text>
      </Box>
      <Box flexGrow={1} flexShrink={1}>
        <Text wrap="truncate-end" {...(t ? tone(color, t) : {})}>
          {value}
        </Text>
      </Box>
    </Box>
  );
  // a line wider than the screen is cut into rows, never cut off: its end may be what matters
  const lines = argumentsText(call.arguments).split('\n').flatMap((line) => rowsOf(safe(line, line.length + 1), Math.max(10, width - 2)));
  const room = Math.max(1, height - 7);
  const shown = lines.length > room ? lines.slice(0, room - 1) : lines;
  return (
    <Box flexDirection="column" width={width}>
      {field('App', safe(call.app_name ?? call.app_client_id, 120), 'accent')}
      {field('Client ID', safe(call.app_client_id, 255))}
      {field('Tool', safe(call.tool, 200), 'warning')}
      {field('Instance', `${safe(call.instance_name, 80)}  ${call.instance_id.slice(0, 8)}`)}
      {field('Time left', countdown(secondsUntil(call.expires_at, now)))}
      <Text {...tone(color, 'title')}>Arguments (exactly what runs if you approve):</Text>
      {shown.map((line, i) => (
        <Text key={i} wrap="wrap">
          {'  '}
          {line}
        </Text>
      ))}
      {shown.length < lines.length ? <Text {...tone(color, 'muted')}>  … {lines.length - shown.length} more lines (svc calls show {call.id.slice(0, 8)} shows all)</Text> : null}
    </Box>
  );
}
