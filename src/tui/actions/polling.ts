import { describeError } from '../format.js';
import { type ActionDeps, type DecisionCount, hintFor } from './deps.js';

/** The pending list's poll, and the re-read of one request. */
export interface PollActions {
  refresh(): Promise<void>;
  /** Reads one request again, keeping what the person had selected on it. */
  reload(id: string): Promise<void>;
}

export function pollActions({ client, dispatch, getState, clock, bell }: ActionDeps, decisions: DecisionCount): PollActions {
  let polling = false;
  /** what the bell already rang for */
  const rung = new Set<string>();
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

  return {
    reload,
    async refresh() {
      if (polling) return;
      polling = true;
      try {
        const before = decisions.made;
        const [requests, calls] = await Promise.all([client.listPending(), client.heldCalls ? client.heldCalls() : Promise.resolve(undefined)]);
        // a decision made while this poll was out: its answer may predate it, so the next poll says
        if (before !== decisions.made) return;
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
  };
}
