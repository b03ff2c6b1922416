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
  /** in the list: whether the highlighted row is a held call */
  onCall?: boolean;
  /** what `a` and `d` decide here (terminal-safe): the footer names it before any other key */
  target?: string;
  /** held calls waiting while a request is open: said, since `a` there decides the request */
  held?: number;
}

const HINTS: Record<HintScreen, string> = {
  list: '↑↓/jk move  Enter open  Tab apps  g tool choices  q quit',
  detail: '↑↓/jk move  space toggle  r role  l limits  a approve  d deny  Esc back  q quit',
  call: 'a approve  d deny  Esc back  q quit',
  grants: '↑↓/jk move  Enter tool choices  Esc back  q quit',
  grant: '↑↓/jk move  space allow/ask/deny  s save  f/F forget remembered  Esc back  q quit',
  apps: '↑↓/jk move  r revoke  l limits  Tab requests  q quit',
  confirm: 'y revoke  any other key keeps it',
  limits: 'digits  Backspace  Tab next field  Enter save  Esc cancel',
};
const ON_CALL = '↑↓/jk move  Enter arguments  a approve  d deny  q quit';
/** A request decided elsewhere, or expired: only what still works is offered. */
const DECIDED = 'Esc back  q quit';

/** The bottom line: the keys that work on this screen (decisions: Review surfaces). */
export function KeyHints({ screen, color, decidable = true, onCall = false, target, held = 0 }: KeyHintsProps) {
  const keys = screen === 'detail' && !decidable ? DECIDED : screen === 'list' && onCall ? ON_CALL : HINTS[screen];
  const decides = (screen === 'call' || (screen === 'list' && onCall) || (screen === 'detail' && decidable)) && target;
  const waiting = screen === 'detail' && held > 0 ? `${held} held call${held === 1 ? '' : 's'} waiting: Esc · ` : '';
  return (
    <Text wrap="truncate-end" {...tone(color, 'muted')}>
      {decides ? `a approve  d deny: ${target} · ${waiting}${keys.replace(/a approve {2}d deny {2}/, '').replace(/ {2}a approve {2}d deny/, '')}` : `${waiting}${keys}`}
    </Text>
  );
}
