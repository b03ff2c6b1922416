import { Text } from 'ink';
import { tone } from '../format.js';
import type { Screen } from '../state.js';

/** The request screens, and the Apps view with its two prompts. */
export type HintScreen = Screen | 'apps' | 'confirm' | 'limits';

export interface KeyHintsProps {
  screen: HintScreen;
  color: boolean;
  /** in the detail: whether the request can still be decided (a draft with time left) */
  decidable?: boolean;
}

const HINTS: Record<HintScreen, string> = {
  list: '↑↓/jk move  Enter open  Tab apps  q quit',
  detail: '↑↓/jk move  space toggle  r role  a approve  d deny  Esc back  q quit',
  apps: '↑↓/jk move  r revoke  l limits  Tab requests  q quit',
  confirm: 'y revoke  any other key keeps it',
  limits: 'digits  Backspace  Tab next field  Enter save  Esc cancel',
};
/** A request decided elsewhere, or expired: only what still works is offered. */
const DECIDED = 'Esc back  q quit';

/** The bottom line: the keys that work on this screen (decisions: Review surfaces). */
export function KeyHints({ screen, color, decidable = true }: KeyHintsProps) {
  return (
    <Text wrap="truncate-end" {...tone(color, 'muted')}>
      {screen === 'detail' && !decidable ? DECIDED : HINTS[screen]}
    </Text>
  );
}
