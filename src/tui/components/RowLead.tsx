import { Box, Text } from 'ink';
import { safe, tone } from '../format.js';

/**
 * The start of a row in the lists (requests, apps): the cursor mark and the app's name, which takes
 * the room the fixed columns after it leave. The name is app-supplied, so it is made safe here.
 */
export function RowLead({ selected, name, color }: { selected: boolean; name: string; color: boolean }) {
  const style = selected ? tone(color, 'accent') : {};
  return (
    <>
      <Box width={2} flexShrink={0}>
        <Text {...style}>{selected ? '›' : ' '}</Text>
      </Box>
      <Box flexGrow={1} flexShrink={1} marginRight={1}>
        <Text wrap="truncate-end" {...style}>
          {safe(name, 120)}
        </Text>
      </Box>
    </>
  );
}
