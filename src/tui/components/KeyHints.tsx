import { Text } from 'ink';
import { tone } from '../format.js';
import type { Screen } from '../state.js';

export interface KeyHintsProps {
  screen: Screen;
  color: boolean;
  /** in the detail: whether the request can still be decided (a draft with time left) */
  decidable?: boolean;
  /** in the list: whether the highlighted row is a held call */
  onCall?: boolean;
}

const HINTS: Record<Screen, string> = {
  list: '↑↓/jk move  Enter open  g grants  q quit',
  detail: '↑↓/jk move  space toggle/choose  r role  a approve  d deny  Esc back  q quit',
  call: 'a approve  d deny  Esc back  q quit',
  grants: '↑↓/jk move  Enter tool choices  Esc back  q quit',
  grant: '↑↓/jk move  space allow/ask/deny  s save  Esc back  q quit',
};
const ON_CALL = '↑↓/jk move  Enter arguments  a approve  d deny  q quit';
/** A request decided elsewhere, or expired: only what still works is offered. */
const DECIDED = 'Esc back  q quit';

/** The bottom line: the keys that work on this screen (CONTRACT §10). */
export function KeyHints({ screen, color, decidable = true, onCall = false }: KeyHintsProps) {
  return (
    <Text wrap="truncate-end" {...tone(color, 'muted')}>
      {screen === 'detail' && !decidable ? DECIDED : screen === 'list' && onCall ? ON_CALL : HINTS[screen]}
    </Text>
  );
}
