import { createContext, type Dispatch, type ReactNode, useContext } from 'react';
import { describeError, safe } from './format.js';
import { policyFromPicks } from '../mcp/choices.js';
import type { ToolPolicy } from '../store/schema.js';
import { type Action, grantChanges, listRows, type UIState } from './state.js';
import { limitValue } from './apps-state.js';
import type { HeldCall, ReviewClient } from './types.js';

/** Everything a key can do. The container maps keys to these; they call the daemon through the client. */
export interface UIActions {
  /** One poll of the pending list (and, when the open request left it, of that request). */
  refresh(): Promise<void>;
  move(delta: number): void;
  /** Opens the highlighted request's detail. */
  open(): Promise<void>;
  back(): void;
  toggle(): void;
  cycleRole(): void;
  approve(): Promise<void>;
  deny(): Promise<void>;
  /** The approved grants, to change their tool choices later. */
  openGrants(): Promise<void>;
  /** Opens the highlighted grant's tool choices. */
  openGrant(): Promise<void>;
  /** Saves what changed on the open grant. */
  saveGrant(): Promise<void>;
  quit(): void;
  /** Tab: the pending requests, or the apps let in */
  switchView(): Promise<void>;
  /** one poll of the Apps view: the grants, and the highlighted one's activity */
  refreshApps(): Promise<void>;
  /** the Apps view's keys: r asks to revoke, y confirms; l edits the limits */
  askRevoke(): void;
  confirmRevoke(): Promise<void>;
  editLimits(): void;
  saveLimits(): Promise<void>;
}

/** The held call the keys act on: the one open, else the one highlighted in the list. */
export function currentCall(s: UIState): HeldCall | undefined {
  if (s.screen === 'call') return s.calls.find((c) => c.id === s.callId);
  if (s.screen !== 'list') return undefined;
  const row = listRows(s)[s.cursor];
  return row?.kind === 'call' ? s.calls.find((c) => c.id === row.id) : undefined;
}

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

// The client reads the CLI's saved login again on a 401, so a new `svc login` is picked up here.
const hintFor = (err: unknown) => ((err as { code?: string })?.code === 'login_required' ? ' Run `svc login` in another terminal; this screen carries on with the new login.' : '');

export function createActions({ client, dispatch, getState, clock, exit, bell }: ActionDeps): UIActions {
  let polling = false;
  let appsPolling = false;
  /** what the bell already rang for */
  const rung = new Set<string>();
  /** decisions made so far: a poll that started before one may still list what it decided */
  let decisions = 0;
  let firstPoll = true;
  /** Open requests already re-read after leaving the draft list, so a poll re-reads each only once. */
  const reread = new Set<string>();

  const reload = async (id: string) => {
    try {
      dispatch({ type: 'detail-loaded', data: await client.review(id), at: clock(), keepSelection: true });
    } catch {
      /* the list still says it is gone; nothing more to show */
    }
  };

  /** One poll of the Apps view: the grants, and the highlighted one's activity. */
  const refreshApps = async () => {
    if (!client.listGrants || appsPolling) return;
    appsPolling = true;
    try {
      dispatch({ type: 'apps/loaded', grants: await client.listGrants() });
      const highlighted = getState().apps.grants[getState().apps.cursor];
      if (highlighted && client.activity) dispatch({ type: 'apps/activity', id: highlighted.id, events: await client.activity(highlighted.id) });
    } catch (err) {
      dispatch({ type: 'list-failed', message: describeError(err) + hintFor(err) });
    } finally {
      appsPolling = false;
    }
  };

  const appLabel = (s: UIState) => safe(s.detail?.data?.app_name ?? s.detail?.data?.app_client_id ?? s.detail?.id, 60);

  /** Approves or denies a held call, once; a call decided elsewhere (409) leaves the list at the next poll. */
  const decideCall = async (call: HeldCall, how: 'approve' | 'deny') => {
    if (getState().busy) return;
    const send = how === 'approve' ? client.approveCall : client.denyCall;
    if (!send) return;
    const label = `${safe(call.tool, 60)} for ${safe(call.app_name ?? call.app_client_id, 60)}`;
    dispatch({ type: 'busy', busy: true });
    try {
      await send.call(client, call.id);
      decisions++;
      dispatch({ type: 'call-decided', id: call.id, text: how === 'approve' ? `Approved ${label}: it runs now, once.` : `Denied ${label}: it did not run.` });
    } catch (err) {
      dispatch({ type: 'busy', busy: false });
      dispatch({ type: 'notice', notice: { kind: 'error', text: `Not ${how === 'approve' ? 'approved' : 'denied'}: ${describeError(err)}${hintFor(err)}` } });
    }
  };

  return {
    async refresh() {
      if (polling) return;
      polling = true;
      try {
        const before = decisions;
        const [requests, calls] = await Promise.all([client.listPending(), client.heldCalls ? client.heldCalls() : Promise.resolve(undefined)]);
        // a decision made while this poll was out: its answer may predate it, so the next poll says
        if (before !== decisions) return;
        dispatch({ type: 'list-loaded', requests, ...(calls ? { calls } : {}) });
        // The bell rings for each held call it has not rung for, and for requests that arrive while it runs.
        const fresh = [...(calls ?? []).map((c) => c.id), ...(firstPoll ? [] : requests.map((r) => r.id))].filter((id) => !rung.has(id));
        for (const r of requests) rung.add(r.id);
        for (const id of fresh) rung.add(id);
        firstPoll = false;
        if (fresh.length > 0) bell?.();
        const d = getState().detail;
        // Decided in another surface (or expired): re-read it so the detail shows its status.
        if (d?.data?.status === 'draft' && !requests.some((r) => r.id === d.id) && !reread.has(d.id)) {
          reread.add(d.id);
          await reload(d.id);
        }
      } catch (err) {
        dispatch({ type: 'list-failed', message: describeError(err) + hintFor(err) });
      } finally {
        polling = false;
      }
    },

    move(delta) {
      dispatch({ type: 'move', delta });
    },

    async open() {
      const s = getState();
      if (s.screen !== 'list') return;
      const listed = listRows(s)[s.cursor];
      if (listed?.kind === 'call') return dispatch({ type: 'open-call', id: listed.id });
      const row = s.requests.find((r) => r.id === listed?.id);
      if (!row) return;
      dispatch({ type: 'open', id: row.id, at: clock() });
      try {
        dispatch({ type: 'detail-loaded', data: await client.review(row.id), at: clock() });
      } catch (err) {
        if (getState().detail?.id === row.id) dispatch({ type: 'notice', notice: { kind: 'error', text: `Could not open the request: ${describeError(err)}${hintFor(err)}` } });
      }
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

    async approve() {
      const s = getState();
      const call = currentCall(s);
      if (call) return decideCall(call, 'approve');
      const d = s.detail;
      if (s.screen !== 'detail' || s.busy || !d?.data || !d.role) return;
      const chosen = new Set(d.selected);
      const mcp_servers = d.data.mcp_servers
        .map((server) => ({ url: server.url, instance_ids: server.instances.filter((i) => i.enabled && chosen.has(i.id)).map((i) => i.id) }))
        .filter((server) => server.instance_ids.length > 0);
      const count = mcp_servers.reduce((n, server) => n + server.instance_ids.length, 0);
      // the tool choices of the ticked instances: what differs from each tool's default
      const tool_policies: Record<string, ToolPolicy> = {};
      for (const server of d.data.mcp_servers) {
        for (const i of server.instances) {
          if (!chosen.has(i.id) || !i.enabled) continue;
          const policy = policyFromPicks(i.tools ?? [], new Map(Object.entries(d.picks[i.id] ?? {})));
          if (policy) tool_policies[i.id] = policy;
        }
      }
      dispatch({ type: 'busy', busy: true });
      try {
        const rpm = limitValue(d.limits.rpm);
        const tokens = limitValue(d.limits.tokens);
        const limits = rpm || tokens ? { limits: { requests_per_minute: rpm, tokens_per_day: tokens } } : {};
        const res = await client.approve(d.id, { approved_role: d.role, approved: { version: '1', mcp_servers }, ...limits, ...(Object.keys(tool_policies).length ? { tool_policies } : {}) });
        const text =
          res.status === 'denied'
            ? `Denied ${appLabel(s)}: it signs in for an MCP instance you did not tick, so its token could reach nothing.`
            : `Approved ${appLabel(s)} as ${res.approved_role} with ${count} MCP instance${count === 1 ? '' : 's'}.`;
        decisions++;
        dispatch({ type: 'decided', id: d.id, text });
      } catch (err) {
        dispatch({ type: 'busy', busy: false });
        dispatch({ type: 'notice', notice: { kind: 'error', text: `Not approved: ${describeError(err)}${hintFor(err)}` } });
        await reload(d.id);
      }
    },

    async deny() {
      const s = getState();
      const call = currentCall(s);
      if (call) return decideCall(call, 'deny');
      const d = s.detail;
      if (s.screen !== 'detail' || s.busy || !d) return;
      dispatch({ type: 'busy', busy: true });
      try {
        await client.deny(d.id);
        decisions++;
        dispatch({ type: 'decided', id: d.id, text: `Denied ${appLabel(s)}.` });
      } catch (err) {
        dispatch({ type: 'busy', busy: false });
        dispatch({ type: 'notice', notice: { kind: 'error', text: `Not denied: ${describeError(err)}${hintFor(err)}` } });
        await reload(d.id);
      }
    },

    async openGrants() {
      if (!client.approvedGrants) return;
      dispatch({ type: 'open-grants' });
      try {
        dispatch({ type: 'grants-loaded', grants: await client.approvedGrants() });
      } catch (err) {
        dispatch({ type: 'notice', notice: { kind: 'error', text: `Could not list your grants: ${describeError(err)}${hintFor(err)}` } });
      }
    },

    async openGrant() {
      const s = getState();
      const row = s.grants[s.grantCursor];
      if (s.screen !== 'grants' || !row) return;
      dispatch({ type: 'open-grant', id: row.id });
      try {
        dispatch({ type: 'grant-loaded', data: await client.review(row.id) });
      } catch (err) {
        dispatch({ type: 'notice', notice: { kind: 'error', text: `Could not open the grant: ${describeError(err)}${hintFor(err)}` } });
      }
    },

    async saveGrant() {
      const s = getState();
      const g = s.grant;
      if (s.screen !== 'grant' || s.busy || !g?.data || !client.setTools) return;
      const changes = grantChanges(g.data, g.picks);
      if (Object.keys(changes).length === 0) return dispatch({ type: 'notice', notice: { kind: 'info', text: 'Nothing changed.' } });
      dispatch({ type: 'busy', busy: true });
      try {
        await client.setTools(g.id, changes);
        dispatch({ type: 'grant-loaded', data: await client.review(g.id) });
        dispatch({ type: 'busy', busy: false });
        dispatch({ type: 'notice', notice: { kind: 'info', text: 'Saved: the next call of each tool follows these choices.' } });
      } catch (err) {
        dispatch({ type: 'busy', busy: false });
        dispatch({ type: 'notice', notice: { kind: 'error', text: `Not saved: ${describeError(err)}${hintFor(err)}` } });
      }
    },

    quit() {
      exit();
    },

    async switchView() {
      dispatch({ type: 'switch-view' });
      if (getState().view === 'apps') await refreshApps();
    },

    refreshApps,

    askRevoke() {
      const g = getState().apps.grants[getState().apps.cursor];
      if (!g) return;
      dispatch({ type: 'apps/confirm-revoke', id: g.id });
    },

    async confirmRevoke() {
      const id = getState().apps.confirmRevoke;
      if (!id || !client.revoke) return;
      const g = getState().apps.grants.find((x) => x.id === id);
      try {
        await client.revoke(id);
        dispatch({ type: 'apps/revoked', id });
        dispatch({ type: 'notice', notice: { kind: 'info', text: `Revoked ${safe(g?.app_name ?? g?.app_client_id ?? id, 60)}: its tokens stop on their next call.` } });
      } catch (err) {
        dispatch({ type: 'apps/confirm-revoke', id: null });
        dispatch({ type: 'notice', notice: { kind: 'error', text: `Not revoked: ${describeError(err)}${hintFor(err)}` } });
      }
    },

    editLimits() {
      const g = getState().apps.grants[getState().apps.cursor];
      if (!g) return;
      const l = g.limits ?? { requests_per_minute: null, tokens_per_day: null };
      dispatch({ type: 'apps/edit', edit: { id: g.id, field: 'rpm', rpm: l.requests_per_minute ? String(l.requests_per_minute) : '', tokens: l.tokens_per_day ? String(l.tokens_per_day) : '' } });
    },

    async saveLimits() {
      const edit = getState().apps.edit;
      if (!edit || !client.setLimits) return;
      try {
        await client.setLimits(edit.id, { requests_per_minute: limitValue(edit.rpm), tokens_per_day: limitValue(edit.tokens) });
        dispatch({ type: 'apps/edit', edit: null });
        dispatch({ type: 'notice', notice: { kind: 'info', text: 'Limits saved; the next call is held to them.' } });
        await refreshApps();
      } catch (err) {
        dispatch({ type: 'notice', notice: { kind: 'error', text: `Limits not saved: ${describeError(err)}${hintFor(err)}` } });
      }
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
