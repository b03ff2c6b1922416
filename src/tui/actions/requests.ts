import { policyFromPicks } from '../../mcp/choices.js';
import type { ToolPolicy } from '../../store/schema.js';
import { limitValue } from '../apps-state.js';
import { describeError, safe } from '../format.js';
import { listRows, type UIState } from '../state.js';
import type { HeldCall, ReviewClient } from '../types.js';
import { type ActionDeps, type DecisionCount, hintFor } from './deps.js';

/** What the keys do to a request or a held call: open it, approve it, deny it. */
export interface RequestActions {
  /** Opens the highlighted request's detail. */
  open(): Promise<void>;
  approve(): Promise<void>;
  deny(): Promise<void>;
}

type Detail = NonNullable<UIState['detail']>;

/** The held call the keys act on: the one open, else the one highlighted in the list. */
export function currentCall(s: UIState): HeldCall | undefined {
  if (s.screen === 'call') return s.calls.find((c) => c.id === s.callId);
  if (s.screen !== 'list') return undefined;
  const row = listRows(s)[s.cursor];
  return row?.kind === 'call' ? s.calls.find((c) => c.id === row.id) : undefined;
}

const appLabel = (s: UIState) => safe(s.detail?.data?.app_name ?? s.detail?.data?.app_client_id ?? s.detail?.id, 60);

/** The approval the open detail stands for: the role, the ticked enabled instances, their tool choices and the limits. */
function approvalOf(d: Detail, data: NonNullable<Detail['data']>, role: NonNullable<Detail['role']>): { body: Parameters<ReviewClient['approve']>[1]; count: number } {
  const chosen = new Set(d.selected);
  const mcp_servers = data.mcp_servers
    .map((server) => ({ url: server.url, instance_ids: server.instances.filter((i) => i.enabled && chosen.has(i.id)).map((i) => i.id) }))
    .filter((server) => server.instance_ids.length > 0);
  const count = mcp_servers.reduce((n, server) => n + server.instance_ids.length, 0);
  // the tool choices of the ticked instances: what differs from each tool's default
  const tool_policies: Record<string, ToolPolicy> = {};
  for (const server of data.mcp_servers) {
    for (const i of server.instances) {
      if (!chosen.has(i.id) || !i.enabled) continue;
      const policy = policyFromPicks(i.tools ?? [], new Map(Object.entries(d.picks[i.id] ?? {})));
      if (policy) tool_policies[i.id] = policy;
    }
  }
  const rpm = limitValue(d.limits.rpm);
  const tokens = limitValue(d.limits.tokens);
  const limits = rpm || tokens ? { limits: { requests_per_minute: rpm, tokens_per_day: tokens } } : {};
  return { body: { approved_role: role, approved: { version: '1', mcp_servers }, ...limits, ...(Object.keys(tool_policies).length ? { tool_policies } : {}) }, count };
}

export function requestActions({ client, dispatch, getState, clock }: ActionDeps, decisions: DecisionCount, reload: (id: string) => Promise<void>): RequestActions {
  /** Approves or denies a held call, once; a call decided elsewhere (409) leaves the list at the next poll. */
  const decideCall = async (call: HeldCall, how: 'approve' | 'deny') => {
    if (getState().busy) return;
    const send = how === 'approve' ? client.approveCall : client.denyCall;
    if (!send) return;
    const label = `${safe(call.tool, 60)} for ${safe(call.app_name ?? call.app_client_id, 60)}`;
    dispatch({ type: 'busy', busy: true });
    try {
      await send.call(client, call.id);
      decisions.made++;
      dispatch({ type: 'call-decided', id: call.id, text: how === 'approve' ? `Approved ${label}: it runs now, once.` : `Denied ${label}: it did not run.` });
    } catch (err) {
      dispatch({ type: 'busy', busy: false });
      dispatch({ type: 'notice', notice: { kind: 'error', text: `Not ${how === 'approve' ? 'approved' : 'denied'}: ${describeError(err)}${hintFor(err)}` } });
    }
  };

  return {
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

    async approve() {
      const s = getState();
      const call = currentCall(s);
      if (call) return decideCall(call, 'approve');
      const d = s.detail;
      if (s.screen !== 'detail' || s.busy || !d?.data || !d.role) return;
      const { body, count } = approvalOf(d, d.data, d.role);
      dispatch({ type: 'busy', busy: true });
      try {
        const res = await client.approve(d.id, body);
        const text =
          res.status === 'denied'
            ? `Denied ${appLabel(s)}: it signs in for an MCP instance you did not tick, so its token could reach nothing.`
            : `Approved ${appLabel(s)} as ${res.approved_role} with ${count} MCP instance${count === 1 ? '' : 's'}.`;
        decisions.made++;
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
        decisions.made++;
        dispatch({ type: 'decided', id: d.id, text: `Denied ${appLabel(s)}.` });
      } catch (err) {
        dispatch({ type: 'busy', busy: false });
        dispatch({ type: 'notice', notice: { kind: 'error', text: `Not denied: ${describeError(err)}${hintFor(err)}` } });
        await reload(d.id);
      }
    },
  };
}
