/**
 * `svc review` and held tool calls, and tool choices in a request's detail, through
 * ink-testing-library with a fake daemon.
 */
import { cleanup, render } from 'ink-testing-library';
import { afterEach, describe, expect, it } from 'vitest';
import { AppError } from '../errors.js';
import { FakeClient, KEY, NOW, until, URL_A } from '../../test/helpers/tui.js';
import { ReviewApp, type ReviewAppProps } from './AppContainer.js';
import type { HeldCall, PendingRequest } from './types.js';

afterEach(() => cleanup());

let n = 0;
function held(over: Partial<HeldCall> = {}): HeldCall {
  n++;
  return {
    id: `c0000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
    status: 'pending',
    access_request_id: 'a0000000-0000-4000-8000-000000000001',
    app_client_id: 'notes-app',
    app_name: 'Notes App',
    user: 'admin',
    instance_id: 'aaaaaaaa-0000-4000-8000-000000000001',
    instance_name: 'files-home',
    tool: 'delete_file',
    arguments: { path: '/home/me/notes.txt' },
    via: 'mcp',
    created_at: new Date(NOW - 5_000).toISOString(),
    expires_at: new Date(NOW + 50_000).toISOString(),
    decided_at: null,
    decided_by: null,
    waited_ms: null,
    remember_until: null,
    reason: null,
    ...over,
  };
}

/** The fake daemon, with held calls. */
class CallsClient extends FakeClient {
  calls: HeldCall[] = [];
  decided: { id: string; how: 'approve' | 'deny' }[] = [];
  callError: Error | null = null;
  /** how many times svc review has asked for the held calls (once a poll) */
  heldPolls = 0;
  async heldCalls() {
    this.heldPolls++;
    return this.calls.map((c) => ({ ...c }));
  }
  async approveCall(id: string) {
    if (this.callError) throw this.callError;
    this.decided.push({ id, how: 'approve' });
    this.calls = this.calls.filter((c) => c.id !== id);
    return held({ id, status: 'approved' });
  }
  async denyCall(id: string) {
    if (this.callError) throw this.callError;
    this.decided.push({ id, how: 'deny' });
    this.calls = this.calls.filter((c) => c.id !== id);
    return held({ id, status: 'denied' });
  }
}

function mount(client: FakeClient, over: Partial<ReviewAppProps> = {}) {
  const app = render(<ReviewApp client={client} color={false} user="admin" pollMs={25} tickMs={20} clock={() => NOW} width={80} height={24} {...over} />);
  const frame = () => app.lastFrame() ?? '';
  const see = (text: string | RegExp, timeoutMs = 3000) =>
    until(() => (typeof text === 'string' ? expect(frame().replace(/ *\n */g, ' ')).toContain(text) : expect(frame()).toMatch(text)), timeoutMs, String(text));
  const press = async (...keys: string[]) => {
    for (const k of keys) {
      app.stdin.write(k);
      await new Promise((r) => setImmediate(r));
    }
  };
  return { ...app, frame, see, press };
}

describe('held calls in svc review', () => {
  it('a held call shows by itself above the pending requests, with its arguments, and rings the bell once', async () => {
    const client = new CallsClient();
    client.add({ app_name: 'Some Request' });
    let rings = 0;
    const ui = mount(client, { bell: () => rings++ });
    await ui.see('Some Request');
    expect(rings).toBe(0);
    client.calls.push(held());
    await ui.see('HELD TOOL CALLS: 1 waiting for you');
    const lines = ui.frame().split('\n');
    const callLine = lines.findIndex((l) => /Notes App wants delete_file on files-home/.test(l));
    const requestLine = lines.findIndex((l) => /Some Request/.test(l));
    expect(callLine).toBeGreaterThan(0);
    expect(callLine).toBeLessThan(requestLine);
    expect(lines[callLine + 1]).toContain('{"path":"/home/me/notes.txt"}');
    expect(ui.frame()).toMatch(/1 held · 1 pending · admin/);
    await until(() => expect(rings).toBe(1));
    // the next polls do not ring again for the same call: two more polls, the first of them
    // answered and shown by the time the second asks
    const polled = client.heldPolls;
    await until(() => client.heldPolls >= polled + 2, 3000, 'two more polls of the held calls');
    expect(rings).toBe(1);
  });

  it('a call held while a request is highlighted takes the selection: the footer names it, and `a` approves it, not the request', async () => {
    const client = new CallsClient();
    client.add({ app_name: 'Other App' }, { app_name: 'Other App' });
    const ui = mount(client);
    await ui.see(/› Other App/);
    client.calls.push(held({ tool: 'wipe_disk' }));
    await ui.see(/› Notes App wants wipe_disk/);
    expect(ui.frame()).toContain('a approve  d deny: wipe_disk of Notes App');
    await ui.press('a');
    await ui.see('Approved wipe_disk for Notes App: it runs now, once.');
    expect(client.decided.map((c) => c.how)).toEqual(['approve']);
    expect(client.approvals).toEqual([]);
  });

  it('a second call held while one is highlighted leaves the highlight where it is, and the footer names that one', async () => {
    const client = new CallsClient();
    client.calls.push(held({ tool: 'first_tool' }));
    const ui = mount(client);
    await ui.see(/› Notes App wants first_tool/);
    client.calls.unshift(held({ tool: 'newer_tool' }));
    await ui.see('newer_tool');
    expect(ui.frame()).toMatch(/› Notes App wants first_tool/);
    expect(ui.frame()).toContain('a approve  d deny: first_tool of Notes App');
  });

  it('in an open request the footer says `a` decides the request, and that a held call waits', async () => {
    const client = new CallsClient();
    client.add({ app_name: 'Other App' }, { app_name: 'Other App' });
    const ui = mount(client);
    await ui.see(/› Other App/);
    await ui.press('\r');
    await ui.see('a approve  d deny: the request of Other App');
    client.calls.push(held({ tool: 'wipe_disk' }));
    await ui.see('a approve  d deny: the request of Other App · 1 held call waiting: Esc');
    await ui.press('\u001b');
    await ui.see(/› Notes App wants wipe_disk/);
  });

  it('`a` on the highlighted call approves it; `d` denies the next; each leaves the list', async () => {
    const client = new CallsClient();
    client.calls.push(held({ tool: 'first_tool' }), held({ tool: 'second_tool' }));
    const ui = mount(client);
    await ui.see('first_tool');
    expect(ui.frame()).toContain('a approve  d deny: first_tool of Notes App · ↑↓/jk move  Enter arguments');
    await ui.press('a');
    await ui.see('Approved first_tool for Notes App: it runs now, once.');
    expect(client.decided).toEqual([{ id: client.decided[0].id, how: 'approve' }]);
    await ui.see(/› Notes App wants second_tool/);
    await ui.press('d');
    await ui.see('Denied second_tool for Notes App: it did not run.');
    expect(client.decided.map((x) => x.how)).toEqual(['approve', 'deny']);
    await ui.see('No pending requests.');
  });

  it('Enter shows the arguments in full, invisible and control characters stripped; a decision made elsewhere says so', async () => {
    const client = new CallsClient();
    client.calls.push(held({ arguments: { path: 'notes\u202Etxt.exe', text: 'a\u001b[31mred\u0007', more: { deep: [1, 2, 3] } } }));
    const ui = mount(client);
    await ui.see('HELD TOOL CALLS');
    await ui.press(KEY.enter);
    await ui.see('Arguments (exactly what runs if you approve):');
    const frame = ui.frame();
    expect(frame).toMatch(/^Tool\s+delete_file$/m);
    expect(frame).toContain('"path": "notes\\u202etxt.exe"');
    expect(frame).toContain('"text": "a\\u001b[31mred\\u0007"');
    expect(frame).toContain('"deep": [');
    expect(frame).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202e]/);
    client.callError = new AppError('not_pending', 'This call is already approved; it cannot be decided again.');
    await ui.press('a');
    await ui.see('error: Not approved: This call is already approved; it cannot be decided again. (not_pending)');
    await ui.press(KEY.escape);
    await ui.see('svc review: pending (draft) access requests');
  });
});

describe('a long argument in svc review', () => {
  it('Enter shows the whole of an argument wider than the terminal: the end of a long command is not cut off', async () => {
    const client = new CallsClient();
    client.calls.push(held({ tool: 'run_shell', arguments: { command: `ls ${'-l '.repeat(40)}&& rm -rf ~/notes` } }));
    const ui = mount(client);
    await ui.see('HELD TOOL CALLS');
    await ui.press(KEY.enter);
    await ui.see('Arguments (exactly what runs if you approve):');
    expect(ui.frame().replace(/\s+/g, '')).toContain('&&rm-rf~/notes');
  });
});

describe('tool choices in the detail of a request', () => {
  it('lists each instance\'s tools with their choice and hints; space changes a tool\'s choice; approve sends what changed', async () => {
    const client = new FakeClient();
    const r = client.add({
      mcp_servers: [
        {
          url: URL_A,
          instances: [
            {
              id: 'aaaaaaaa-0000-4000-8000-000000000001',
              name: 'files-home',
              url: URL_A,
              enabled: true,
              selected: true,
              tools_known: true,
              tools: [
                { name: 'read_file', annotations: { readOnlyHint: true }, default_choice: 'allow', choice: 'allow' },
                { name: 'delete_file', annotations: { destructiveHint: true }, default_choice: 'ask', choice: 'ask' },
                { name: 'format_disk', default_choice: 'deny', choice: 'deny', owner_denied: true },
              ],
            },
            { id: 'cccccccc-0000-4000-8000-000000000003', name: 'files-work', url: URL_A, enabled: true, selected: false, tools_known: false, tools: [] },
          ],
        },
      ],
    });
    const ui = mount(client);
    await ui.see('Notes App');
    await ui.press(KEY.enter);
    await ui.see('files-home');
    const frame = ui.frame();
    expect(frame).toMatch(/^ {8}allow read_file {2}read-only$/m);
    expect(frame).toMatch(/^ {8}ask {3}delete_file {2}destructive$/m);
    expect(frame).toMatch(/^ {8}deny {2}format_disk \(owner: denied\)$/m);
    expect(frame).toContain('tools not known (no answer from the server)');
    // down to read_file, then delete_file: allow -> ask, then ask -> deny -> allow
    await ui.press('j');
    await ui.see(/^ {6}› allow read_file/m);
    await ui.press(' ');
    await ui.see(/› ask {3}read_file \(default allow\)/);
    await ui.press('j', ' ', ' ');
    await ui.see(/› allow delete_file \(default ask\)/);
    await ui.press('a');
    await until(() => expect(client.approvals).toHaveLength(1));
    expect(client.approvals[0]).toEqual({
      id: r.id,
      body: {
        approved_role: 'scope_user_power_user',
        approved: { version: '1', mcp_servers: [{ url: URL_A, instance_ids: ['aaaaaaaa-0000-4000-8000-000000000001'] }] },
        tool_policies: { 'aaaaaaaa-0000-4000-8000-000000000001': { tools: { read_file: 'ask', delete_file: 'allow' } } },
      },
    });
  });
});

/** The fake daemon, with approved grants whose tool choices change. */
class GrantsClient extends FakeClient {
  grantRows: PendingRequest[] = [
    {
      id: 'g0000000-0000-4000-8000-000000000001',
      app_client_id: 'notes-app',
      app_name: 'Notes App',
      app_registered: true,
      flow_type: 'popup',
      status: 'approved',
      requested_role: 'scope_user_user',
      approved_role: 'scope_user_user',
      requested: { version: '1', mcp_servers: [{ url: URL_A }] },
      approved: { version: '1', mcp_servers: [{ url: URL_A, instance_ids: ['aaaaaaaa-0000-4000-8000-000000000001'] }] },
      created_at: new Date(NOW).toISOString(),
      expires_at: new Date(NOW).toISOString(),
      decided_at: new Date(NOW).toISOString(),
      user: 'admin',
    },
  ];
  sets: { id: string; body: unknown }[] = [];
  remembered: string[] = [];
  forgotten: unknown[] = [];
  async forgetRemembered(id: string, which?: { instance_id: string; tool: string }) {
    this.forgotten.push({ id, which });
    this.remembered = which ? this.remembered.filter((t) => t !== which.tool) : [];
    return {};
  }
  choice: Record<string, 'allow' | 'ask' | 'deny'> = { read_file: 'allow', delete_file: 'ask' };
  async approvedGrants() {
    return structuredClone(this.grantRows);
  }
  override async review(id: string) {
    if (id !== this.grantRows[0].id) return super.review(id);
    const base = await super.review([...this.reviews.keys()][0]);
    return {
      ...base,
      id,
      status: 'approved' as const,
      tool_choices: [
        {
          instance_id: 'aaaaaaaa-0000-4000-8000-000000000001',
          instance_name: 'files-home',
          default: null,
          tools_known: true,
          choices: {},
          remembered: this.remembered.map((tool) => ({ tool, until: new Date(NOW + 10 * 60_000).toISOString(), approved_by: 'admin', call_id: 'c1' })),
          tools: [
            { name: 'read_file', annotations: { readOnlyHint: true }, default_choice: 'allow' as const, choice: this.choice.read_file },
            { name: 'delete_file', annotations: { destructiveHint: true }, default_choice: 'ask' as const, choice: this.choice.delete_file },
          ],
        },
      ],
    };
  }
  async setTools(id: string, body: Record<string, { tools: Record<string, 'allow' | 'ask' | 'deny' | null> }>) {
    this.sets.push({ id, body });
    for (const [name, c] of Object.entries(body['aaaaaaaa-0000-4000-8000-000000000001'].tools)) this.choice[name] = c ?? (name === 'delete_file' ? 'ask' : 'allow');
    return {};
  }
}

describe('tool choices of a grant, later', () => {
  it('g lists the approved grants; Enter shows a grant\'s tools; space changes one, s saves only what changed', async () => {
    const client = new GrantsClient();
    client.add({});
    const ui = mount(client);
    await ui.see('g tool choices');
    await ui.press('g');
    await ui.see(/^› Notes App {2}g0000000 {2}1 MCP instance$/m);
    await ui.press(KEY.enter);
    await ui.see('Tool choices of Notes App (g0000000)');
    expect(ui.frame()).toMatch(/^ {2}› allow read_file {2}read-only$/m);
    expect(ui.frame()).toMatch(/^ {4}ask {3}delete_file {2}destructive$/m);
    await ui.press('j', ' ', ' ');
    await ui.see(/› allow delete_file \(was ask: s saves\)/);
    await ui.press('s');
    await ui.see('Saved: the next call of each tool follows these choices.');
    expect(client.sets).toEqual([{ id: 'g0000000-0000-4000-8000-000000000001', body: { 'aaaaaaaa-0000-4000-8000-000000000001': { tools: { delete_file: 'allow' } } } }]);
    await ui.see(/› allow delete_file {2}destructive$/m);
    // back to its default: null, not a choice of its own
    await ui.press(' ', 's');
    await until(() => expect(client.sets).toHaveLength(2));
    expect(client.sets[1].body).toEqual({ 'aaaaaaaa-0000-4000-8000-000000000001': { tools: { delete_file: null } } });
    await ui.press(KEY.escape);
    await ui.see('APPROVED GRANTS');
    await ui.press(KEY.escape);
    await ui.see('svc review: pending (draft) access requests');
  });
});

describe('remembered approvals of a grant', () => {
  it('are listed with its tool choices; f ends the highlighted tool\'s, and says so', async () => {
    const client = new GrantsClient();
    client.add({});
    client.remembered = ['delete_file'];
    const ui = mount(client);
    await ui.see('g tool choices');
    await ui.press('g');
    await ui.see(/^› Notes App/m);
    await ui.press(KEY.enter);
    await ui.see('remembered: delete_file runs without asking for 10 more min');
    expect(ui.frame()).toContain('f/F forget remembered');
    // read_file is highlighted: it has none
    await ui.press('f');
    await ui.see('The highlighted tool has no remembered approval');
    expect(client.forgotten).toEqual([]);
    await ui.press('j', 'f');
    await ui.see('No longer remembered: delete_file. The next call waits for you.');
    expect(client.forgotten).toEqual([{ id: 'g0000000-0000-4000-8000-000000000001', which: { instance_id: 'aaaaaaaa-0000-4000-8000-000000000001', tool: 'delete_file' } }]);
    expect(ui.frame()).not.toContain('remembered: delete_file runs');
  });
});
