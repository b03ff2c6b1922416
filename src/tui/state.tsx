import { createContext, type ReactNode, useContext } from 'react';
import type { ToolChoice } from '../store/schema.js';
import { type AppRole, type HeldCall, type PendingRequest, ROLES, ROLE_NAMES, type ReviewData } from './types.js';
import { type AppsAction, appsReducer, type AppsState, initialApps } from './apps-state.js';

export type Screen = 'list' | 'detail' | 'call' | 'grants' | 'grant';

/** One approved grant's tool choices, being changed (the `grant` screen). */
export interface GrantState {
  id: string;
  data: ReviewData | null;
  cursor: number;
  /** what the reviewer picked, per instance and tool */
  picks: Record<string, Record<string, ToolChoice>>;
}

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
  /** Index into the selectable rows: enabled instances, each followed by its tools. */
  cursor: number;
  /** The choice the reviewer set per instance and tool (starting from each tool's choice). */
  picks: Record<string, Record<string, ToolChoice>>;
  /** The limits `a` would set (empty: none), and whether `l` is editing them. */
  limits: { rpm: string; tokens: string };
  editing: 'rpm' | 'tokens' | null;
}

export interface UIState {
  /** Tab switches between the pending requests and the apps let in */
  view: 'requests' | 'apps';
  apps: AppsState;
  screen: Screen;
  /** Tool calls held for the reviewer: listed above the requests. */
  calls: HeldCall[];
  /** The held call open on the `call` screen. */
  callId: string | null;
  /** The reviewer's approved grants (the `grants` screen), and the one open (`grant`). */
  grants: PendingRequest[];
  grantCursor: number;
  grant: GrantState | null;
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
  | { type: 'list-loaded'; requests: PendingRequest[]; calls?: HeldCall[] }
  | { type: 'open-call'; id: string }
  | { type: 'open-grants' }
  | { type: 'grants-loaded'; grants: PendingRequest[] }
  | { type: 'open-grant'; id: string }
  | { type: 'grant-loaded'; data: ReviewData }
  | { type: 'call-decided'; id: string; text: string }
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
  | { type: 'detail-limits'; limits: { rpm: string; tokens: string }; editing: 'rpm' | 'tokens' | null }
  | AppsAction;

export const initialState = (now: number): UIState => ({
  view: 'requests',
  apps: initialApps(),
  screen: 'list',
  calls: [],
  callId: null,
  grants: [],
  grantCursor: 0,
  grant: null,
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

export type DetailRow = { kind: 'instance'; url: string; id: string } | { kind: 'tool'; instance: string; name: string };

/** The rows the detail cursor visits: each enabled instance, then the tools of it one may choose for. */
export function selectableRows(data: ReviewData | null): DetailRow[] {
  if (!data) return [];
  return data.mcp_servers.flatMap((s) =>
    s.instances
      .filter((i) => i.enabled)
      .flatMap((i): DetailRow[] => [{ kind: 'instance', url: s.url, id: i.id }, ...(i.tools ?? []).filter((t) => !t.owner_denied).map((t): DetailRow => ({ kind: 'tool', instance: i.id, name: t.name }))]),
  );
}

/** Each tool's choice as the review data says (its default, for a draft). */
export function initialPicks(data: ReviewData): Record<string, Record<string, ToolChoice>> {
  return Object.fromEntries(data.mcp_servers.flatMap((s) => s.instances.map((i) => [i.id, Object.fromEntries((i.tools ?? []).map((t) => [t.name, t.choice]))])));
}

const NEXT_CHOICE: Record<ToolChoice, ToolChoice> = { allow: 'ask', ask: 'deny', deny: 'allow' };

/** The tools of a grant one may choose for: the rows the `grant` screen's cursor visits. */
export function grantToolRows(data: ReviewData | null): { instance: string; name: string }[] {
  return (data?.tool_choices ?? []).flatMap((c) => c.tools.filter((t) => !t.owner_denied).map((t) => ({ instance: c.instance_id, name: t.name })));
}

/** The change a grant screen saves: each tool picked otherwise than it stands, or null when that is its default. */
export function grantChanges(data: ReviewData, picks: GrantState['picks']): Record<string, { tools: Record<string, ToolChoice | null> }> {
  const out: Record<string, { tools: Record<string, ToolChoice | null> }> = {};
  for (const c of data.tool_choices ?? []) {
    const tools: Record<string, ToolChoice | null> = {};
    for (const t of c.tools) {
      const picked = picks[c.instance_id]?.[t.name];
      if (t.owner_denied || !picked || picked === t.choice) continue;
      tools[t.name] = picked === (c.default ?? t.default_choice) ? null : picked;
    }
    if (Object.keys(tools).length > 0) out[c.instance_id] = { tools };
  }
  return out;
}

/** The list's rows, held calls first: what its cursor moves over. */
export const listRows = (s: Pick<UIState, 'calls' | 'requests'>): { kind: 'call' | 'request'; id: string }[] => [
  ...s.calls.map((c) => ({ kind: 'call' as const, id: c.id })),
  ...s.requests.map((r) => ({ kind: 'request' as const, id: r.id })),
];

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
    case 'detail-limits':
      return state.detail ? { ...state, detail: { ...state.detail, limits: action.limits, editing: action.editing } } : state;
    case 'switch-view':
      return { ...state, view: state.view === 'requests' ? 'apps' : 'requests', notice: null, apps: { ...state.apps, confirmRevoke: null, edit: null } };
    case 'list-loaded': {
      // Keep the cursor on the same row when others come and go; but a newly held call takes it
      // from a request (the bell rang for the call: `a` then decides the call the person heard
      // of). A call already highlighted keeps it, so a second call never slips under a key.
      const current = listRows(state)[state.cursor];
      const next = { calls: action.calls ?? state.calls, requests: action.requests };
      const rows = listRows(next);
      const known = new Set(state.calls.map((c) => c.id));
      const fresh = state.loaded && current?.kind !== 'call' ? next.calls.findIndex((c) => !known.has(c.id)) : -1;
      const at = fresh >= 0 ? fresh : current ? rows.findIndex((r) => r.id === current.id) : -1;
      const cursor = at >= 0 ? at : clamp(state.cursor, rows.length - 1);
      return { ...state, ...next, loaded: true, pollError: null, cursor };
    }
    case 'open-call':
      return { ...state, screen: 'call', callId: action.id, notice: null };
    case 'open-grants':
      return { ...state, screen: 'grants', notice: null, detail: null, callId: null };
    case 'grants-loaded':
      return { ...state, grants: action.grants, grantCursor: clamp(state.grantCursor, action.grants.length - 1) };
    case 'open-grant':
      return { ...state, screen: 'grant', notice: null, grant: { id: action.id, data: null, cursor: 0, picks: {} } };
    case 'grant-loaded': {
      if (!state.grant || state.grant.id !== action.data.id) return state;
      const picks = Object.fromEntries((action.data.tool_choices ?? []).map((c) => [c.instance_id, Object.fromEntries(c.tools.map((t) => [t.name, t.choice]))]));
      return { ...state, grant: { ...state.grant, data: action.data, picks, cursor: clamp(state.grant.cursor, grantToolRows(action.data).length - 1) } };
    }
    case 'call-decided': {
      const calls = state.calls.filter((c) => c.id !== action.id);
      const back = state.screen === 'call' && state.callId === action.id;
      return {
        ...state,
        calls,
        busy: false,
        ...(back ? { screen: 'list' as const, callId: null } : {}),
        cursor: clamp(state.cursor, listRows({ calls, requests: state.requests }).length - 1),
        notice: { kind: 'info', text: action.text },
      };
    }
    case 'list-failed':
      return { ...state, loaded: true, pollError: action.message };
    case 'move': {
      if (state.screen === 'list') return { ...state, cursor: clamp(state.cursor + action.delta, listRows(state).length - 1) };
      if (state.screen === 'grants') return { ...state, grantCursor: clamp(state.grantCursor + action.delta, state.grants.length - 1) };
      if (state.screen === 'grant') {
        if (!state.grant) return state;
        return { ...state, grant: { ...state.grant, cursor: clamp(state.grant.cursor + action.delta, grantToolRows(state.grant.data).length - 1) } };
      }
      if (!state.detail) return state;
      const rows = selectableRows(state.detail.data).length;
      return { ...state, detail: { ...state.detail, cursor: clamp(state.detail.cursor + action.delta, rows - 1) } };
    }
    case 'open':
      return {
        ...state,
        screen: 'detail',
        notice: null,
        detail: { id: action.id, data: null, fetchedAt: action.at, role: null, selected: [], cursor: 0, picks: {}, limits: { rpm: '', tokens: '' }, editing: null },
      };
    case 'detail-loaded': {
      if (!state.detail || state.detail.id !== action.data.id) return state;
      const keep = action.keepSelection && state.detail.data;
      const selectable = new Set(selectableInstances(action.data).map((i) => i.id));
      const rows = selectableRows(action.data).length;
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
          cursor: keep ? clamp(state.detail.cursor, rows - 1) : 0,
          picks: keep ? { ...initialPicks(action.data), ...state.detail.picks } : initialPicks(action.data),
        },
      };
    }
    case 'toggle': {
      if (state.screen === 'grant' && state.grant?.data) {
        const g = state.grant;
        const row = grantToolRows(g.data)[g.cursor];
        if (!row) return state;
        const mine = g.picks[row.instance] ?? {};
        return { ...state, notice: null, grant: { ...g, picks: { ...g.picks, [row.instance]: { ...mine, [row.name]: NEXT_CHOICE[mine[row.name] ?? 'allow'] } } } };
      }
      const d = state.detail;
      if (state.screen !== 'detail' || !d?.data) return state;
      const row = selectableRows(d.data)[d.cursor];
      if (!row) return { ...state, notice: { kind: 'info', text: 'None of your instances can be granted here; add one with `svc mcp add`.' } };
      if (row.kind === 'tool') {
        // a tool row: its choice goes round allow, ask, deny
        const mine = d.picks[row.instance] ?? {};
        const now = mine[row.name] ?? 'allow';
        return { ...state, notice: null, detail: { ...d, picks: { ...d.picks, [row.instance]: { ...mine, [row.name]: NEXT_CHOICE[now] } } } };
      }
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
      // a grant goes back to the grants; everything else to the list
      if (state.screen === 'grant') return { ...state, screen: 'grants', grant: null, notice: null };
      return { ...state, screen: 'list', detail: null, callId: null, grant: null, notice: null };
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
        cursor: clamp(state.cursor, listRows({ calls: state.calls, requests }).length - 1),
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
