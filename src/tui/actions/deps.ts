import type { Dispatch } from 'react';
import type { Action, UIState } from '../state.js';
import type { ReviewClient } from '../types.js';

export interface ActionDeps {
  client: ReviewClient;
  dispatch: Dispatch<Action>;
  /** The state as of now (not as of the last render), so async actions never act on a stale one. */
  getState: () => UIState;
  clock: () => number;
  exit: () => void;
  /** rings the terminal bell: a held call or a request arrived */
  bell?: () => void;
}

/** Decisions made so far: a poll that started before one may still list what it decided. */
export interface DecisionCount {
  made: number;
}

// The client reads the CLI's saved login again on a 401, so a new `svc login` is picked up here.
export const hintFor = (err: unknown) => ((err as { code?: string })?.code === 'login_required' ? ' Run `svc login` in another terminal; this screen carries on with the new login.' : '');
