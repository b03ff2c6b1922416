import { createContext, type ReactNode, useContext } from 'react';
import { type AppsActions, appsActions } from './actions/apps.js';
import type { ActionDeps, DecisionCount } from './actions/deps.js';
import { type GrantActions, grantActions } from './actions/grants.js';
import { pollActions } from './actions/polling.js';
import { type RequestActions, requestActions } from './actions/requests.js';

export type { ActionDeps } from './actions/deps.js';
export { currentCall } from './actions/requests.js';

/** Everything a key can do. The container maps keys to these; they call the daemon through the client. */
export interface UIActions extends RequestActions, GrantActions, AppsActions {
  /** One poll of the pending list (and, when the open request left it, of that request). */
  refresh(): Promise<void>;
  move(delta: number): void;
  back(): void;
  toggle(): void;
  cycleRole(): void;
  quit(): void;
}

/** The actions of each part of the screen, made once: polling, requests and held calls, grants, the Apps view. */
export function createActions(deps: ActionDeps): UIActions {
  const { dispatch, exit } = deps;
  const decisions: DecisionCount = { made: 0 };
  const { refresh, reload } = pollActions(deps, decisions);
  return {
    refresh,
    ...requestActions(deps, decisions, reload),
    ...grantActions(deps),
    ...appsActions(deps),
    move(delta) {
      dispatch({ type: 'move', delta });
    },
    back() {
      dispatch({ type: 'back' });
    },
    toggle() {
      dispatch({ type: 'toggle' });
    },
    cycleRole() {
      dispatch({ type: 'cycle-role' });
    },
    quit() {
      exit();
    },
  };
}

const ActionsContext = createContext<UIActions | null>(null);

export function UIActionsProvider({ value, children }: { value: UIActions; children: ReactNode }) {
  return <ActionsContext.Provider value={value}>{children}</ActionsContext.Provider>;
}

export function useUIActions(): UIActions {
  const value = useContext(ActionsContext);
  if (!value) throw new Error('useUIActions outside UIActionsProvider');
  return value;
}
