import { createContext, type ReactNode, useContext } from 'react';
import { type AppRole, type PendingRequest, ROLES, ROLE_NAMES, type ReviewData } from './types.js';
import { type AppsAction, appsReducer, type AppsState, initialApps } from './apps-state.js';

export type Screen = 'list' | 'detail';

export interface Notice {
  kind: 'error' | 'info';
  text: string;
}

export interface DetailState {
  id: string;
  data: ReviewData | null;
  /** When `data` was fetched (local clock): `expires_in_seconds` counts from here. */
  fetchedAt: number;
  role: AppRole | null;
  /** Instance ids the reviewer has ticked. */
  selected: string[];
  /** Index into the selectable (enabled) instances. */
  cursor: number;
}

export interface UIState {
  /** Tab switches between the pending requests and the apps let in */
  view: 'requests' | 'apps';
  apps: AppsState;
  screen: Screen;
  requests: PendingRequest[];
  /** false until the first list answer (or failure) arrives */
  loaded: boolean;
  /** Why the last poll failed (daemon gone, session expired); cleared by the next good poll. */
  pollError: string | null;
  cursor: number;
  detail: DetailState | null;
  busy: boolean;
  notice: Notice | null;
  now: number;
}

export type Action =
  | { type: 'list-loaded'; requests: PendingRequest[] }
  | { type: 'list-failed'; message: string }
  | { type: 'move'; delta: number }
  | { type: 'open'; id: string; at: number }
  | { type: 'detail-loaded'; data: ReviewData; at: number; keepSelection?: boolean }
  | { type: 'toggle' }
  | { type: 'cycle-role' }
  | { type: 'back' }
  | { type: 'busy'; busy: boolean }
  | { type: 'decided'; id: string; text: string }
  | { type: 'notice'; notice: Notice | null }
  | { type: 'tick'; now: number }
  | { type: 'switch-view' }
  | AppsAction;

export const initialState = (now: number): UIState => ({
  view: 'requests',
  apps: initialApps(),
  screen: 'list',
  requests: [],
  loaded: false,
  pollError: null,
  cursor: 0,
  detail: null,
  busy: false,
  notice: null,
  now,
});

/** The reviewer's own enabled instances, in display order: the rows the detail cursor visits. */
export function selectableInstances(data: ReviewData | null): { url: string; id: string }[] {
  if (!data) return [];
  return data.mcp_servers.flatMap((s) => s.instances.filter((i) => i.enabled).map((i) => ({ url: s.url, id: i.id })));
}

/** What a detail starts with ticked: the daemon's default selection, shared by every surface. */
export function firstEnabledOfEach(data: ReviewData): string[] {
  return data.mcp_servers.flatMap((s) => s.instances.filter((i) => i.enabled && i.selected).map((i) => i.id));
}

/** Roles `r` may cycle through: the lowest up to max_grantable_role. */
export function grantableRoles(max: AppRole): AppRole[] {
  return ROLES.slice(0, ROLES.indexOf(max) + 1);
}

/** Seconds of draft life left in the detail view, counted from the server's own figure. */
export function detailSecondsLeft(detail: DetailState, now: number): number {
  if (!detail.data) return 0;
  return Math.max(0, detail.data.expires_in_seconds - Math.floor(Math.max(0, now - detail.fetchedAt) / 1000));
}

const clamp = (n: number, max: number) => Math.max(0, Math.min(n, max));

export function reducer(state: UIState, action: Action): UIState {
  if (action.type.startsWith('apps/')) return { ...state, apps: appsReducer(state.apps, action as AppsAction) };
  switch (action.type) {
    case 'switch-view':
      return { ...state, view: state.view === 'requests' ? 'apps' : 'requests', notice: null, apps: { ...state.apps, confirmRevoke: null, edit: null } };
    case 'list-loaded': {
      // Keep the cursor on the same request when others come and go.
      const current = state.requests[state.cursor]?.id;
      const at = current ? action.requests.findIndex((r) => r.id === current) : -1;
      const cursor = at >= 0 ? at : clamp(state.cursor, action.requests.length - 1);
      return { ...state, requests: action.requests, loaded: true, pollError: null, cursor };
    }
    case 'list-failed':
      return { ...state, loaded: true, pollError: action.message };
    case 'move': {
      if (state.screen === 'list') return { ...state, cursor: clamp(state.cursor + action.delta, state.requests.length - 1) };
      if (!state.detail) return state;
      const rows = selectableInstances(state.detail.data).length;
      return { ...state, detail: { ...state.detail, cursor: clamp(state.detail.cursor + action.delta, rows - 1) } };
    }
    case 'open':
      return {
        ...state,
        screen: 'detail',
        notice: null,
        detail: { id: action.id, data: null, fetchedAt: action.at, role: null, selected: [], cursor: 0 },
      };
    case 'detail-loaded': {
      if (!state.detail || state.detail.id !== action.data.id) return state;
      const keep = action.keepSelection && state.detail.data;
      const selectable = new Set(selectableInstances(action.data).map((i) => i.id));
      const allowed = grantableRoles(action.data.max_grantable_role);
      return {
        ...state,
        detail: {
          ...state.detail,
          data: action.data,
          fetchedAt: action.at,
          role: keep && state.detail.role && allowed.includes(state.detail.role) ? state.detail.role : action.data.suggested_role,
          // As on the browser page: each URL starts with its first enabled instance ticked.
          selected: keep ? state.detail.selected.filter((id) => selectable.has(id)) : firstEnabledOfEach(action.data),
          cursor: keep ? clamp(state.detail.cursor, selectable.size - 1) : 0,
        },
      };
    }
    case 'toggle': {
      const d = state.detail;
      if (state.screen !== 'detail' || !d?.data) return state;
      const row = selectableInstances(d.data)[d.cursor];
      if (!row) return { ...state, notice: { kind: 'info', text: 'None of your instances can be granted here; add one with `svc mcp add`.' } };
      const selected = d.selected.includes(row.id) ? d.selected.filter((id) => id !== row.id) : [...d.selected, row.id];
      return { ...state, notice: null, detail: { ...d, selected } };
    }
    case 'cycle-role': {
      const d = state.detail;
      if (state.screen !== 'detail' || !d?.data || !d.role) return state;
      const roles = grantableRoles(d.data.max_grantable_role);
      if (roles.length <= 1) {
        const only = roles[0] ?? d.role;
        return { ...state, notice: { kind: 'info', text: `${only} (${ROLE_NAMES[only]}) is the most you may grant for this request.` } };
      }
      const next = roles[(roles.indexOf(d.role) + 1) % roles.length];
      return { ...state, notice: null, detail: { ...d, role: next } };
    }
    case 'back':
      return { ...state, screen: 'list', detail: null, notice: null };
    case 'busy':
      return { ...state, busy: action.busy };
    case 'decided': {
      const requests = state.requests.filter((r) => r.id !== action.id);
      return {
        ...state,
        screen: 'list',
        detail: null,
        busy: false,
        requests,
        cursor: clamp(state.cursor, requests.length - 1),
        notice: { kind: 'info', text: action.text },
      };
    }
    case 'notice':
      return { ...state, notice: action.notice };
    case 'tick':
      return { ...state, now: action.now };
    default:
      return state;
  }
}

const StateContext = createContext<UIState | null>(null);

export function UIStateProvider({ value, children }: { value: UIState; children: ReactNode }) {
  return <StateContext.Provider value={value}>{children}</StateContext.Provider>;
}

export function useUIState(): UIState {
  const value = useContext(StateContext);
  if (!value) throw new Error('useUIState outside UIStateProvider');
  return value;
}
