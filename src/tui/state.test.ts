/**
 * The review TUI's state, without a terminal: the reducer as a pure function, and the actions
 * against a fake daemon, with fake timers standing in for the clock (no sleeps).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FakeClient, NOW, pending, review } from '../../test/helpers/tui.js';
import { createActions } from './actions.js';
import { type Action, detailSecondsLeft, initialState, reducer, type UIState } from './state.js';

const run = (actions: Action[], from: UIState = initialState(NOW)) => actions.reduce(reducer, from);

describe('reducer', () => {
  it('keeps the cursor on the same request when others come and go, and clamps it when that one goes', () => {
    const [a, b, c] = [pending(), pending(), pending()];
    let s = run([{ type: 'list-loaded', requests: [a, b, c] }, { type: 'move', delta: 1 }]);
    expect(s.requests[s.cursor].id).toBe(b.id);
    s = reducer(s, { type: 'list-loaded', requests: [c, a, b] });
    expect(s.requests[s.cursor].id).toBe(b.id);
    s = reducer(s, { type: 'list-loaded', requests: [a] });
    expect(s.cursor).toBe(0);
    expect(run([{ type: 'move', delta: -5 }, { type: 'move', delta: 99 }]).cursor).toBe(0); // empty list
  });

  it('opens a detail with the first enabled instance of each URL ticked and the most grantable role, as the page does', () => {
    const data = review();
    const s = run([{ type: 'open', id: data.id, at: NOW }, { type: 'detail-loaded', data, at: NOW }]);
    expect(s.screen).toBe('detail');
    expect(s.detail?.selected).toEqual(['aaaaaaaa-0000-4000-8000-000000000001', 'dddddddd-0000-4000-8000-000000000004']);
    expect(s.detail?.role).toBe('scope_user_power_user');
  });

  it('toggles the instance under the cursor, skips disabled ones, and cycles only through grantable roles', () => {
    const data = review();
    let s = run([{ type: 'open', id: data.id, at: NOW }, { type: 'detail-loaded', data, at: NOW }, { type: 'move', delta: 1 }, { type: 'toggle' }]);
    // the second selectable row is files-work (files-old is disabled and not selectable)
    expect(s.detail?.selected).toContain('cccccccc-0000-4000-8000-000000000003');
    s = reducer(s, { type: 'toggle' });
    expect(s.detail?.selected).not.toContain('cccccccc-0000-4000-8000-000000000003');
    s = reducer(s, { type: 'cycle-role' });
    expect(s.detail?.role).toBe('scope_user_user');
    s = reducer(s, { type: 'cycle-role' });
    expect(s.detail?.role).toBe('scope_user_power_user');
    const userOnly = review({ max_grantable_role: 'scope_user_user' });
    const limited = run([{ type: 'open', id: userOnly.id, at: NOW }, { type: 'detail-loaded', data: userOnly, at: NOW }, { type: 'cycle-role' }]);
    expect(limited.detail?.role).toBe('scope_user_user');
    expect(limited.notice?.text).toMatch(/the most you may grant/);
  });

  it('keeps the person’s choices when the same request is re-read, dropping instances no longer offered', () => {
    const data = review();
    let s = run([{ type: 'open', id: data.id, at: NOW }, { type: 'detail-loaded', data, at: NOW }, { type: 'cycle-role' }]);
    const fewer = { ...data, mcp_servers: [data.mcp_servers[1]] };
    s = reducer(s, { type: 'detail-loaded', data: fewer, at: NOW + 5000, keepSelection: true });
    expect(s.detail?.role).toBe('scope_user_user');
    expect(s.detail?.selected).toEqual(['dddddddd-0000-4000-8000-000000000004']);
    // a late answer for another request changes nothing
    expect(reducer(s, { type: 'detail-loaded', data: review(), at: NOW })).toBe(s);
  });

  it('counts the draft’s life down from the server’s own figure, never below zero', () => {
    const data = review({ expires_in_seconds: 90 });
    const s = run([{ type: 'open', id: data.id, at: NOW }, { type: 'detail-loaded', data, at: NOW }]);
    expect(detailSecondsLeft(s.detail!, NOW)).toBe(90);
    expect(detailSecondsLeft(s.detail!, NOW + 30_500)).toBe(60);
    expect(detailSecondsLeft(s.detail!, NOW + 10 * 60_000)).toBe(0);
  });

  it('a decision leaves the detail, drops the request from the list and says what happened', () => {
    const [a, b] = [pending(), pending()];
    const s = run([{ type: 'list-loaded', requests: [a, b] }, { type: 'move', delta: 1 }, { type: 'open', id: b.id, at: NOW }, { type: 'busy', busy: true }, { type: 'decided', id: b.id, text: 'Approved.' }]);
    expect(s).toMatchObject({ screen: 'list', detail: null, busy: false, cursor: 0, notice: { kind: 'info', text: 'Approved.' } });
    expect(s.requests.map((r) => r.id)).toEqual([a.id]);
  });
});

describe('actions, on fake timers', () => {
  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(NOW);
  });
  afterEach(() => vi.useRealTimers());

  function harness(client: FakeClient) {
    let state = initialState(Date.now());
    const actions = createActions({
      client,
      dispatch: (a) => (state = reducer(state, a)),
      getState: () => state,
      clock: () => Date.now(),
      exit: () => undefined,
    });
    return { actions, state: () => state };
  }

  it('a poll that is still running is not started again (one request in flight at most)', async () => {
    const client = new FakeClient();
    const { actions, state } = harness(client);
    const first = actions.refresh();
    const second = actions.refresh();
    await Promise.all([first, second]);
    expect(client.listCalls).toBe(1);
    expect(state().loaded).toBe(true);
    await actions.refresh();
    expect(client.listCalls).toBe(2);
  });

  it('approves exactly what is ticked (enabled instances only), and a refused approval re-reads the request and says why', async () => {
    const client = new FakeClient();
    const data = client.add();
    const { actions, state } = harness(client);
    await actions.refresh();
    await actions.open();
    actions.cycleRole();
    await actions.approve();
    expect(client.approvals).toEqual([
      {
        id: data.id,
        body: {
          approved_role: 'scope_user_user',
          approved: { version: '1', mcp_servers: [{ url: data.mcp_servers[0].url, instance_ids: ['aaaaaaaa-0000-4000-8000-000000000001'] }, { url: data.mcp_servers[1].url, instance_ids: ['dddddddd-0000-4000-8000-000000000004'] }] },
        },
      },
    ]);
    expect(state()).toMatchObject({ screen: 'list', busy: false, notice: { text: expect.stringMatching(/^Approved Notes App as scope_user_user with 2 MCP instances/) } });

    const other = client.add();
    client.approveError = new Error('the store is full');
    await actions.refresh();
    await actions.open();
    await actions.approve();
    expect(state()).toMatchObject({ screen: 'detail', busy: false, notice: { kind: 'error', text: expect.stringContaining('Not approved') } });
    expect(state().detail?.id).toBe(other.id);
  });

  it('a detail decided in another surface is re-read once, on the next poll', async () => {
    const client = new FakeClient();
    const data = client.add();
    const { actions, state } = harness(client);
    await actions.refresh();
    await actions.open();
    client.drafts = [];
    client.reviews.set(data.id, { ...data, status: 'denied' });
    await actions.refresh();
    expect(state().detail?.data?.status).toBe('denied');
    const reads = vi.spyOn(client, 'review');
    await actions.refresh();
    expect(reads).not.toHaveBeenCalled();
  });

  it('the countdown follows the clock it is given: two minutes later the detail shows two minutes less', async () => {
    const client = new FakeClient();
    const data = review({ expires_in_seconds: 300 });
    const { state } = harness(client);
    let s = reducer(state(), { type: 'open', id: data.id, at: Date.now() });
    s = reducer(s, { type: 'detail-loaded', data, at: Date.now() });
    vi.advanceTimersByTime(120_000);
    s = reducer(s, { type: 'tick', now: Date.now() });
    expect(detailSecondsLeft(s.detail!, s.now)).toBe(180);
  });
});
