import type { ActivityEvent, GrantSummary } from './types.js';

/** The limits editor of the highlighted grant: the two fields as typed (empty: no limit). */
export interface LimitsEdit {
  id: string;
  field: 'rpm' | 'tokens';
  rpm: string;
  tokens: string;
}

/** The Apps view: the person's active grants, the highlighted one's recent activity, and what is being asked. */
export interface AppsState {
  grants: GrantSummary[];
  loaded: boolean;
  cursor: number;
  /** the highlighted grant's newest events, and whose they are */
  activity: ActivityEvent[];
  activityOf: string | null;
  /** a revoke waiting for y */
  confirmRevoke: string | null;
  edit: LimitsEdit | null;
}

export type AppsAction =
  | { type: 'apps/loaded'; grants: GrantSummary[] }
  | { type: 'apps/activity'; id: string; events: ActivityEvent[] }
  | { type: 'apps/move'; delta: number }
  | { type: 'apps/confirm-revoke'; id: string | null }
  | { type: 'apps/edit'; edit: LimitsEdit | null }
  | { type: 'apps/revoked'; id: string };

export const initialApps = (): AppsState => ({ grants: [], loaded: false, cursor: 0, activity: [], activityOf: null, confirmRevoke: null, edit: null });

const clamp = (n: number, max: number) => Math.max(0, Math.min(n, max));

/** Digits only, as typed into a limit field; anything else is not taken. */
export function typeIntoLimit(edit: LimitsEdit, input: string, backspace: boolean): LimitsEdit {
  const current = edit[edit.field];
  const next = backspace ? current.slice(0, -1) : /^\d$/.test(input) && current.length < 12 ? current + input : current;
  return { ...edit, [edit.field]: next };
}

/** A limit field as the API takes it: empty is none (null). */
export const limitValue = (typed: string): number | null => (typed === '' ? null : Number(typed));

export function appsReducer(state: AppsState, action: AppsAction): AppsState {
  switch (action.type) {
    case 'apps/loaded': {
      // keep the highlight on the same grant when others come and go
      const current = state.grants[state.cursor]?.id;
      const at = current ? action.grants.findIndex((g) => g.id === current) : -1;
      return { ...state, grants: action.grants, loaded: true, cursor: at >= 0 ? at : clamp(state.cursor, action.grants.length - 1) };
    }
    case 'apps/activity':
      return state.grants[state.cursor]?.id === action.id ? { ...state, activity: action.events, activityOf: action.id } : state;
    case 'apps/move': {
      const cursor = clamp(state.cursor + action.delta, state.grants.length - 1);
      return cursor === state.cursor ? state : { ...state, cursor, activity: [], activityOf: null, confirmRevoke: null };
    }
    case 'apps/confirm-revoke':
      return { ...state, confirmRevoke: action.id };
    case 'apps/edit':
      return { ...state, edit: action.edit };
    case 'apps/revoked': {
      const grants = state.grants.filter((g) => g.id !== action.id);
      return { ...state, grants, cursor: clamp(state.cursor, grants.length - 1), confirmRevoke: null, activity: [], activityOf: null };
    }
  }
}
