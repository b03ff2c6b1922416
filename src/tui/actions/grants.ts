import { describeError, safe } from '../format.js';
import { grantChanges, grantToolRows } from '../state.js';
import { type ActionDeps, hintFor } from './deps.js';

/** The approved grants, to change their tool choices later. */
export interface GrantActions {
  openGrants(): Promise<void>;
  /** Opens the highlighted grant's tool choices. */
  openGrant(): Promise<void>;
  /** Saves what changed on the open grant. */
  saveGrant(): Promise<void>;
  /** Ends the remembered approval of the highlighted tool (`all`: every one of the grant). */
  forgetRemembered(all: boolean): Promise<void>;
}

export function grantActions({ client, dispatch, getState }: ActionDeps): GrantActions {
  return {
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

    async forgetRemembered(all) {
      const s = getState();
      const g = s.grant;
      if (s.screen !== 'grant' || s.busy || !g?.data || !client.forgetRemembered) return;
      const row = grantToolRows(g.data)[g.cursor];
      const remembered = (g.data.tool_choices ?? []).flatMap((c) => c.remembered.map((r) => ({ instance_id: c.instance_id, tool: r.tool })));
      const which = all ? undefined : remembered.find((r) => row && r.instance_id === row.instance && r.tool === row.name);
      if (!all && !which) return dispatch({ type: 'notice', notice: { kind: 'info', text: 'The highlighted tool has no remembered approval (F ends all of this grant).' } });
      if (remembered.length === 0) return dispatch({ type: 'notice', notice: { kind: 'info', text: 'This grant has no remembered approvals.' } });
      dispatch({ type: 'busy', busy: true });
      try {
        await client.forgetRemembered(g.id, which);
        dispatch({ type: 'grant-loaded', data: await client.review(g.id) });
        dispatch({ type: 'busy', busy: false });
        dispatch({ type: 'notice', notice: { kind: 'info', text: `No longer remembered${which ? `: ${safe(which.tool, 60)}` : ''}. The next call waits for you.` } });
      } catch (err) {
        dispatch({ type: 'busy', busy: false });
        dispatch({ type: 'notice', notice: { kind: 'error', text: `Still remembered: ${describeError(err)}${hintFor(err)}` } });
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
  };
}
