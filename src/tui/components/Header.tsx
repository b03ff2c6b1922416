import { Box, Text } from 'ink';
import { tone } from '../format.js';

export interface HeaderProps {
  /** Already made inert by the caller when it holds app-supplied text. */
  title: string;
  /** Right-hand side: who is reviewing, how many are pending. */
  aside?: string;
  width: number;
  color: boolean;
}

/** The top line and a rule under it. */
export function Header({ title, aside, width, color }: HeaderProps) {
  return (
    <Box flexDirection="column" width={width}>
      <Box width={width}>
        <Box flexGrow={1} flexShrink={1}>
          <Text wrap="truncate-end" {...tone(color, 'title')}>
            {title}
          </Text>
        </Box>
        {aside ? (
          <Box flexShrink={0} marginLeft={1}>
            <Text {...tone(color, 'muted')}>{aside}</Text>
          </Box>
        ) : null}
      </Box>
      <Text {...tone(color, 'muted')}>{'─'.repeat(Math.max(0, width))}</Text>
    </Box>
  );
}
