import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ActivityNote } from '../http/context.js';
import { eventLine } from './event-line.js';
import { callEvent, callEventBase, type EventOwner } from './recorder.js';
import type { ActivityEvent } from './schemas.js';

// The event as the recorder built it before it kept one shape for every event: optional parts
// spread in, each only when present. The fixed-shape builder must give the same event.
const bounded = (s: string | undefined) => (s === undefined ? undefined : s.slice(0, 200));
function spreadEvent(time: string, kind: ActivityEvent['kind'], endpoint: string, duration: number, outcome: Pick<ActivityEvent, 'status' | 'outcome' | 'reason'>, note: ActivityNote, who: EventOwner) {
  const base = {
    time,
    kind,
    endpoint,
    duration_ms: duration,
    ...outcome,
    ...(note.model ? { model: bounded(note.model) } : {}),
    ...(note.instance_id ? { instance_id: bounded(note.instance_id) } : {}),
    ...(note.mcp_method ? { mcp_method: bounded(note.mcp_method) } : {}),
    ...(note.tool ? { tool: bounded(note.tool) } : {}),
    ...(note.tokens_in !== undefined ? { tokens_in: note.tokens_in } : {}),
    ...(note.tokens_out !== undefined ? { tokens_out: note.tokens_out } : {}),
    ...(note.tokens_estimated ? { tokens_estimated: true as const } : {}),
  };
  const events = [{ ...base, ...who }];
  for (const m of note.more ?? []) {
    const { mcp_method: _m, tool: _t, ...rest } = base;
    events.push({ ...rest, ...(m.mcp_method ? { mcp_method: bounded(m.mcp_method) } : {}), ...(m.tool ? { tool: bounded(m.tool) } : {}), ...who });
  }
  return events;
}

const name = fc.option(fc.oneof(fc.string({ maxLength: 5 }), fc.string({ minLength: 190, maxLength: 260 })), { nil: undefined });
const note = fc.record(
  {
    model: name,
    instance_id: name,
    mcp_method: name,
    tool: name,
    tokens_in: fc.option(fc.nat(), { nil: undefined }),
    tokens_out: fc.option(fc.nat(), { nil: undefined }),
    tokens_estimated: fc.option(fc.boolean(), { nil: undefined }),
    more: fc.option(fc.array(fc.record({ mcp_method: name, tool: name }, { requiredKeys: [] }), { maxLength: 3 }), { nil: undefined }),
  },
  { requiredKeys: [] },
);
const outcome = fc.oneof(
  fc.record({ status: fc.constant(200), outcome: fc.constant('ok' as const) }),
  fc.record({ status: fc.integer({ min: 400, max: 599 }), outcome: fc.constantFrom('error' as const, 'refused' as const), reason: fc.string({ maxLength: 30 }) }),
);
const owner = fc.record({ access_request_id: fc.uuid(), app_client_id: fc.string({ maxLength: 40 }), user: fc.option(fc.string({ maxLength: 20 }), { nil: null }) });
const kind = fc.constantFrom<ActivityEvent['kind']>('models', 'chat', 'completions', 'embeddings', 'responses', 'messages', 'mcp');

describe('a call event', () => {
  it('is the event the spread-built recorder made, written as the same JSON', () => {
    fc.assert(
      fc.property(kind, fc.string({ maxLength: 40 }), fc.nat(100_000), outcome, note, owner, (k, endpoint, duration, o, n, who) => {
        const time = new Date(1_700_000_000_000 + duration).toISOString();
        const expected = spreadEvent(time, k, endpoint, duration, o, n, who);
        const base = callEventBase(time, k, endpoint, duration, o, n);
        const built = [callEvent(base, who), ...(n.more ?? []).map((m) => callEvent(base, who, m))];
        expect(built.map((e) => JSON.parse(JSON.stringify(e)))).toEqual(expected.map((e) => JSON.parse(JSON.stringify(e))));
        // the first event's line keeps the old order of fields too (the batch's others moved their method and tool in place)
        expect(Object.keys(JSON.parse(JSON.stringify(built[0])))).toEqual(Object.keys(expected[0]));
      }),
      { numRuns: 500 },
    );
  });

  it('has one shape whatever it holds: every field present, the absent ones undefined', () => {
    const full = callEvent(callEventBase('t', 'chat', '/v1/chat/completions', 1, { status: 200, outcome: 'ok' }, { model: 'm', tokens_in: 1 }), { access_request_id: 'a', app_client_id: 'c', user: null });
    const bare = callEvent(callEventBase('t', 'mcp', '/mcp', 1, { status: 403, outcome: 'refused', reason: 'x' }, {}), { access_request_id: 'a', app_client_id: 'c', user: 'u' });
    expect(Object.keys(full)).toEqual(Object.keys(bare));
    expect(Object.keys(full)[0]).toBe('id');
  });
});

describe("an event's line in the log", () => {
  const text = fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.constantFrom('"', '\\', '\u2028', '\ud800', 'é😀', '\u0000\u001f'));
  it('is the JSON.stringify of a recorded event, byte for byte', () => {
    fc.assert(
      fc.property(kind, text, fc.nat(100_000), outcome, note, owner, text, (k, endpoint, duration, o, n, who, model) => {
        const base = callEventBase(new Date(1_700_000_000_000 + duration).toISOString(), k, endpoint, duration, o, { ...n, model: n.model === undefined ? undefined : model });
        for (const e of [callEvent(base, who), ...(n.more ?? []).map((m) => callEvent(base, who, m))]) {
          const event = { ...e, id: String(duration + 1) } as ActivityEvent;
          expect(eventLine(event)).toBe(JSON.stringify(event));
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('is the same event for one built in another order, and valid JSON for a field left undefined', () => {
    const e = { user: 'u', app_client_id: 'c', access_request_id: 'a', tokens_in: 3, outcome: 'ok', status: 200, duration_ms: 1, endpoint: '/e', kind: 'chat', time: 't', id: '9' } as ActivityEvent;
    expect(JSON.parse(eventLine(e))).toEqual(JSON.parse(JSON.stringify(e)));
    expect(JSON.parse(eventLine({ ...e, user: undefined } as unknown as ActivityEvent)).user).toBeNull();
    expect(JSON.parse(eventLine({ ...e, duration_ms: Number.NaN }))).toMatchObject({ duration_ms: null });
  });
});
