/** Tool choices as a unit: the rules, the merge of a change, and when svc looks a tool's annotations up. */
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../log.js';
import { inMemoryRepositories } from '../store/store-repositories.js';
import type { AccessRequestRecord, McpInstanceRecord, UserRecord } from '../store/schema.js';
import { policyFromPicks } from './choices.js';
import { HeldCalls } from './held-calls.js';
import { defaultChoice, effectiveChoice, foldName, listFilter, mergePolicies, toolNameFault, ToolPolicies } from './policies.js';
import type { McpToolsService } from './tools.js';

const at = '2026-11-26T12:00:00.000Z';
const instance = (over: Partial<McpInstanceRecord> = {}): McpInstanceRecord => ({
  id: 'i1',
  owner_id: 'u1',
  name: 'files',
  url: 'http://127.0.0.1:9/mcp',
  enabled: true,
  headers: [],
  allow_tools: null,
  created_at: at,
  updated_at: at,
  ...over,
});
const quiet = createLogger('error', new Writable({ write: (_c, _e, cb) => cb() }));

describe('the rules', () => {
  it('destructive and not read-only asks; everything else runs; the allow-list denies; the person\'s choice and default win over annotations', () => {
    expect(defaultChoice({ destructiveHint: true })).toBe('ask');
    expect(defaultChoice({ destructiveHint: true, readOnlyHint: true })).toBe('allow');
    expect(defaultChoice({ readOnlyHint: true })).toBe('allow');
    expect(defaultChoice({})).toBe('allow');
    expect(defaultChoice(undefined)).toBe('allow');
    const limited = instance({ allow_tools: ['read'] });
    expect(effectiveChoice({ tool_policies: { i1: { tools: { write: 'allow' } } } }, limited, 'write', {})).toBe('deny');
    expect(effectiveChoice({ tool_policies: { i1: { default: 'deny', tools: { read: 'ask' } } } }, instance(), 'read', {})).toBe('ask');
    expect(effectiveChoice({ tool_policies: { i1: { default: 'deny' } } }, instance(), 'other', { readOnlyHint: true })).toBe('deny');
    // a tool named like an Object property is a tool like any other
    expect(effectiveChoice({ tool_policies: { i1: { tools: {} } } }, instance(), 'constructor', {})).toBe('allow');
    expect(effectiveChoice({ tool_policies: { i1: { tools: {} } } }, instance(), '__proto__', { destructiveHint: true })).toBe('ask');
  });

  it('tools/list is filtered only when something is denied', () => {
    expect(listFilter({}, instance())).toBeNull();
    expect(listFilter({ tool_policies: { i1: { tools: { a: 'ask' } } } }, instance())).toBeNull();
    const f = listFilter({ tool_policies: { i1: { tools: { a: 'deny' } } } }, instance())!;
    expect([f('a'), f('b')]).toEqual([false, true]);
    const all = listFilter({ tool_policies: { i1: { default: 'deny', tools: { b: 'allow' } } } }, instance())!;
    expect([all('a'), all('b')]).toEqual([false, true]);
    expect(listFilter({}, instance({ allow_tools: ['x'] }))!('y')).toBe(false);
  });

  it('a change merges: null takes a choice back, an instance left with nothing goes', () => {
    const now = mergePolicies({ i1: { default: 'ask', tools: { a: 'deny' } } }, { i1: { tools: { a: null, b: 'allow' } }, i2: { default: 'deny' } });
    expect(now).toEqual({ i1: { default: 'ask', tools: { b: 'allow' } }, i2: { default: 'deny' } });
    expect(mergePolicies(now, { i1: { default: null, tools: { b: null } } })).toEqual({ i2: { default: 'deny' } });
  });

  it('a review surface sends only what differs from what the tool gets anyway', () => {
    const tools = [
      { name: 'r', default_choice: 'allow' as const },
      { name: 'd', default_choice: 'ask' as const },
      { name: 'x', default_choice: 'deny' as const, owner_denied: true },
    ];
    expect(policyFromPicks(tools, new Map([['r', 'allow'], ['d', 'ask']]))).toBeUndefined();
    expect(policyFromPicks(tools, new Map([['r', 'deny'], ['d', 'ask'], ['x', 'allow']]))).toEqual({ tools: { r: 'deny' } });
    expect(policyFromPicks(tools, new Map([['r', 'allow'], ['d', 'deny']]), 'deny')).toEqual({ default: 'deny', tools: { r: 'allow' } });
  });
});

describe('looking annotations up', () => {
  it('a call fetches a list svc lacks, even right after a review could not (so the question is not lost once the server is back)', async () => {
    const repos = await inMemoryRepositories();
    const m = instance();
    await repos.mcpInstances.put(m);
    let up = false;
    let fetches = 0;
    const tools = {
      async refresh() {
        fetches++;
        if (!up) throw new Error('connection refused');
        await repos.mcpTools.set('i1', { tools: [{ name: 'delete', input_schema: {}, annotations: { destructiveHint: true } }], refreshed_at: at });
        return [];
      },
    } as unknown as McpToolsService;
    const policies = new ToolPolicies(repos, tools, () => Date.parse(at), quiet, 1000);
    const draft = { id: 'r1', status: 'draft', tool_policies: undefined } as unknown as AccessRequestRecord;
    const view = await policies.forReview(draft, [m]);
    expect(view.get('i1')).toEqual({ tools_known: false, tools: [] });
    // a second look at the review does not wait on the dead server again
    await policies.forReview(draft, [m]);
    expect(fetches).toBe(1);
    up = true;
    expect(await policies.choose({ ...draft, status: 'approved' } as AccessRequestRecord, m, 'delete')).toBe('ask');
    expect(fetches).toBe(2);
    // the list is there now: no more fetching for a tool it names
    expect(await policies.choose({ ...draft, status: 'approved' } as AccessRequestRecord, m, 'delete')).toBe('ask');
    expect(fetches).toBe(2);
  });
});

describe('held calls', () => {
  const alice: UserRecord = { id: 'u1', username: 'alice', role: 'user', password_hash: 'x', created_at: at };
  const bob: UserRecord = { ...alice, id: 'u2', username: 'bob' };
  const admin: UserRecord = { ...alice, id: 'u3', username: 'root', role: 'admin' };
  const record = { id: 'r1', app_client_id: 'app', user_id: 'u1' } as AccessRequestRecord;

  it('only the approver or an admin decides, once', async () => {
    const held = new HeldCalls(() => Date.parse(at), quiet, 60_000);
    const { call, outcome } = await held.hold({ record, instance: instance(), tool: 'delete', arguments: { p: 1 }, appName: null, user: 'alice', via: 'mcp' });
    await expect(held.decide(bob, call.id, 'approved')).rejects.toThrow(expect.objectContaining({ code: 'not_found' }));
    expect(await held.list(bob)).toEqual([]);
    expect((await held.list(admin)).map((c) => c.id)).toEqual([call.id]);
    expect(await held.decide(alice, call.id, 'approved', 10)).toMatchObject({ status: 'approved', decided_by: 'alice' });
    await expect(held.decide(admin, call.id, 'denied')).rejects.toThrow(expect.objectContaining({ code: 'not_pending' }));
    expect(await outcome).toBe('approved');
  });

  it('a stop ends every pending call as failed, and nothing can approve it after', async () => {
    const held = new HeldCalls(() => Date.parse(at), quiet, 60_000);
    const { call, outcome } = await held.hold({ record, instance: instance(), tool: 'delete', arguments: {}, appName: null, user: 'alice', via: 'rest' });
    expect(held.failAll('svc stopped')).toBe(1);
    expect(await outcome).toBe('failed');
    await expect(held.decide(alice, call.id, 'approved')).rejects.toThrow(expect.objectContaining({ code: 'not_pending' }));
  });
});

describe('tool names a loose server reads as another', () => {
  it('folds whitespace at the ends and what follows a NUL away; refuses control characters and edge whitespace', () => {
    for (const name of ['delete_note ', '\tdelete_note', 'delete_note\u00a0', 'delete_note\u3000', 'delete_note\u0000', 'delete_note\u0000x', 'DELETE_NOTE\u200b ']) {
      expect(foldName(name), JSON.stringify(name)).toBe(foldName('delete_note'));
    }
    for (const name of ['delete_note ', ' delete_note', 'delete_note\n', 'delete_note\u3000', 'delete_note\u0000x', 'del\u0007ete', 'delete\u0085']) expect(toolNameFault(name), JSON.stringify(name)).not.toBeNull();
    for (const name of ['delete_note', 'read notes', 'ｄelete_note']) expect(toolNameFault(name)).toBeNull();
  });
});
