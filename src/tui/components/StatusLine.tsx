import { Text } from 'ink';
import { tone } from '../format.js';
import type { Notice } from '../state.js';

export interface StatusLineProps {
  notice: Notice | null;
  /** Why the last poll of the list failed, if it did. */
  pollError: string | null;
  busy: boolean;
  color: boolean;
}

/** What just happened: an error from the daemon, a decision, or a lost connection. Wraps; the caller bounds its height. */
export function StatusLine({ notice, pollError, busy, color }: StatusLineProps) {
  if (busy) return <Text {...tone(color, 'muted')}>Sending…</Text>;
  if (notice?.kind === 'error')
    return (
      <Text wrap="wrap" {...tone(color, 'error')}>
        error: {notice.text}
      </Text>
    );
  if (notice)
    return (
      <Text wrap="wrap" {...tone(color, 'success')}>
        {notice.text}
      </Text>
    );
  if (pollError)
    return (
      <Text wrap="wrap" {...tone(color, 'warning')}>
        error: cannot refresh the list: {pollError}
      </Text>
    );
  return <Text> </Text>;
}
