import { limitValue } from '../apps-state.js';
import { describeError, safe } from '../format.js';
import { type ActionDeps, hintFor } from './deps.js';

/** The Apps view: the apps let in, their activity, revoking and limits. */
export interface AppsActions {
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

export function appsActions({ client, dispatch, getState }: ActionDeps): AppsActions {
  let appsPolling = false;

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

  return {
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
