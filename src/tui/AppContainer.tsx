import { type Key, useApp, useInput, useStdout } from 'ink';
import { useEffect, useMemo, useRef, useState } from 'react';
import { createActions, currentCall, UIActionsProvider } from './actions.js';
import { App } from './App.js';
import { type Action, initialState, reducer, type UIState, UIStateProvider } from './state.js';
import { typeIntoLimit } from './apps-state.js';
import type { ReviewClient } from './types.js';

export interface ReviewAppProps {
  client: ReviewClient;
  /** false with NO_COLOR or when not a TTY: then no SGR attribute is written at all. */
  color: boolean;
  user?: string;
  /** How often the pending list is polled (a new request shows within 2 s; decisions: Review surfaces). */
  pollMs?: number;
  /** How often the countdowns tick. */
  tickMs?: number;
  clock?: () => number;
  /** Fixed size (tests); otherwise the terminal's, following resizes. */
  width?: number;
  height?: number;
  /** rings the terminal bell (a held call, a new request); nothing by default */
  bell?: () => void;
}

type KeyPress = Pick<Key, 'upArrow' | 'downArrow' | 'pageUp' | 'pageDown' | 'return' | 'escape'>;
const NO_KEY: KeyPress = { upArrow: false, downArrow: false, pageUp: false, pageDown: false, return: false, escape: false };

function useTerminalSize(fixedWidth?: number, fixedHeight?: number) {
  const { stdout } = useStdout();
  const read = () => ({ width: fixedWidth ?? stdout.columns ?? 80, height: fixedHeight ?? stdout.rows ?? 24 });
  const [size, setSize] = useState(read);
  useEffect(() => {
    if (fixedWidth !== undefined && fixedHeight !== undefined) return;
    const onResize = () => setSize(read());
    stdout.on('resize', onResize);
    return () => {
      stdout.off('resize', onResize);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [stdout, fixedWidth, fixedHeight]);
  return size;
}

/** `svc review`: owns the state, polls the daemon, ticks the clock and maps keys to actions. */
export function ReviewApp({ client, color, user, pollMs = 1000, tickMs = 1000, clock = Date.now, width, height, bell }: ReviewAppProps) {
  const { exit } = useApp();
  const stateRef = useRef<UIState>(null as unknown as UIState);
  if (stateRef.current === null) stateRef.current = initialState(clock());
  const [state, setState] = useState<UIState>(stateRef.current);
  const size = useTerminalSize(width, height);

  // The reducer runs on the ref at once, so async actions and keys typed in one burst see every
  // earlier change, not the state of the last render.
  const actions = useMemo(() => {
    const dispatch = (action: Action) => {
      stateRef.current = reducer(stateRef.current, action);
      setState(stateRef.current);
    };
    return Object.assign(createActions({ client, dispatch, getState: () => stateRef.current, clock, exit, bell }), { dispatch });
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  useEffect(() => {
    void actions.refresh();
    // the pending list always (a new request shows in either view); the Apps view while it is open
    const poll = setInterval(() => {
      void actions.refresh();
      if (stateRef.current.view === 'apps') void actions.refreshApps();
    }, pollMs);
    const tick = setInterval(() => actions.dispatch({ type: 'tick', now: clock() }), tickMs);
    return () => {
      clearInterval(poll);
      clearInterval(tick);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [pollMs, tickMs]);

  /** The Apps view's keys; a prompt (revoke, limits) takes every key until it is answered. */
  const onAppsKey = (input: string, key: KeyPress & { tab?: boolean; backspace?: boolean; delete?: boolean }) => {
    const apps = stateRef.current.apps;
    if (apps.confirmRevoke) {
      if (input === 'y') return void actions.confirmRevoke();
      return actions.dispatch({ type: 'apps/confirm-revoke', id: null });
    }
    if (apps.edit) {
      if (key.escape) return actions.dispatch({ type: 'apps/edit', edit: null });
      if (key.return) return void actions.saveLimits();
      if (key.tab) return actions.dispatch({ type: 'apps/edit', edit: { ...apps.edit, field: apps.edit.field === 'rpm' ? 'tokens' : 'rpm' } });
      return actions.dispatch({ type: 'apps/edit', edit: typeIntoLimit(apps.edit, input, Boolean(key.backspace || key.delete)) });
    }
    if (input === 'q') return actions.quit();
    if (key.tab) return void actions.switchView();
    if (key.upArrow || input === 'k') return actions.dispatch({ type: 'apps/move', delta: -1 });
    if (key.downArrow || input === 'j') return actions.dispatch({ type: 'apps/move', delta: 1 });
    if (input === 'r') return actions.askRevoke();
    if (input === 'l') return actions.editLimits();
    if (key.escape) return actions.dispatch({ type: 'notice', notice: null });
  };

  const onKey = (input: string, key: KeyPress & { tab?: boolean; backspace?: boolean; delete?: boolean }) => {
    const s = stateRef.current;
    if (s.view === 'apps') return onAppsKey(input, key);
    const d = s.detail;
    if (s.screen === 'detail' && d?.editing) {
      // the limits editor of the detail takes every key until Enter or Esc
      if (key.escape || key.return) return actions.dispatch({ type: 'detail-limits', limits: d.limits, editing: null });
      if (key.tab) return actions.dispatch({ type: 'detail-limits', limits: d.limits, editing: d.editing === 'rpm' ? 'tokens' : 'rpm' });
      const typed = typeIntoLimit({ id: d.id, field: d.editing, ...d.limits }, input, Boolean(key.backspace || key.delete));
      return actions.dispatch({ type: 'detail-limits', limits: { rpm: typed.rpm, tokens: typed.tokens }, editing: d.editing });
    }
    if (key.tab && s.screen === 'list') return void actions.switchView();
    if (input === 'q') return actions.quit();
    if (key.escape) return s.screen !== 'list' ? actions.back() : actions.dispatch({ type: 'notice', notice: null });
    if (key.upArrow || input === 'k') return actions.move(-1);
    if (key.downArrow || input === 'j') return actions.move(1);
    if (key.pageUp) return actions.move(-10);
    if (key.pageDown) return actions.move(10);
    if (s.screen === 'call') {
      if (input === 'a') return void actions.approve();
      if (input === 'd') return void actions.deny();
      return;
    }
    if (s.screen === 'grants') {
      if (key.return) return void actions.openGrant();
      return;
    }
    if (s.screen === 'grant') {
      if (input === ' ') return actions.toggle();
      if (input === 's') return void actions.saveGrant();
      if (input === 'f' || input === 'F') return void actions.forgetRemembered(input === 'F');
      return;
    }
    if (s.screen === 'list') {
      if (key.return) return void actions.open();
      if (input === 'g') return void actions.openGrants();
      // a held call is decided from the list too
      if ((input === 'a' || input === 'd') && currentCall(s)) return void (input === 'a' ? actions.approve() : actions.deny());
      if (input === 'a' || input === 'd' || input === 'r' || input === ' ') {
        return actions.dispatch({ type: 'notice', notice: { kind: 'info', text: 'Open a request with Enter first.' } });
      }
      return;
    }
    if (input === 'l' && s.detail) return actions.dispatch({ type: 'detail-limits', limits: s.detail.limits, editing: 'rpm' });
    if (input === ' ') return actions.toggle();
    if (input === 'r') return actions.cycleRole();
    if (input === 'a') return void actions.approve();
    if (input === 'd') return void actions.deny();
  };

  useInput((input, key) => {
    // Keys typed faster than a read (or sent in one go) arrive as one string: take them one by one.
    if (input.length > 1 && !key.ctrl && !key.meta) {
      for (const ch of input) onKey(ch === '\r' || ch === '\n' ? '' : ch, { ...NO_KEY, return: ch === '\r' || ch === '\n' });
      return;
    }
    onKey(input, key);
  });

  return (
    <UIStateProvider value={state}>
      <UIActionsProvider value={actions}>
        <App width={size.width} height={size.height} color={color} user={user} />
      </UIActionsProvider>
    </UIStateProvider>
  );
}
