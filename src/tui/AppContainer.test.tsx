/**
 * `svc review` as a whole: keys, polling, countdowns and daemon errors, through ink-testing-library.
 * Most tests drive a fake client; the last block drives the real one against a real daemon.
 */
import { cleanup, render } from 'ink-testing-library';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { DaemonClient } from '../cli/client.js';
import { AppError } from '../errors.js';
import { startTestDaemon, type TestDaemon } from '../../test/helpers/daemon.js';
import { Api, createBody } from '../../test/helpers/http.js';
import { FakeClient, KEY, NOW, SGR, until, URL_A, URL_B } from '../../test/helpers/tui.js';
import { ReviewApp, type ReviewAppProps } from './AppContainer.js';
import { daemonReviewClient } from './client.js';
import { colorWanted } from './run.js';

vi.hoisted(() => {
  process.env.FORCE_COLOR = '1';
});

afterEach(() => cleanup());

function mount(client: FakeClient | ReturnType<typeof daemonReviewClient>, over: Partial<ReviewAppProps> = {}) {
  let now = NOW;
  const clock = Object.assign(() => now, { advance: (ms: number) => (now += ms) });
  const app = render(<ReviewApp client={client} color={false} user="admin" pollMs={25} tickMs={20} clock={clock} width={80} height={24} {...over} />);
  const frame = () => app.lastFrame() ?? '';
  const see = (text: string | RegExp, timeoutMs = 3000) =>
    // A string may wrap across lines (the status line wraps): compare with line breaks as spaces.
    until(() => (typeof text === 'string' ? expect(frame().replace(/ *\n */g, ' ')).toContain(text) : expect(frame()).toMatch(text)), timeoutMs, String(text));
  // Keys are handled in the order written; a turn of the event loop lets Ink take each one.
  const press = async (...keys: string[]) => {
    for (const k of keys) {
      app.stdin.write(k);
      await new Promise((r) => setImmediate(r));
    }
  };
  return { ...app, frame, see, press, clock };
}

const highlighted = (frame: string) => frame.split('\n').find((l) => /^\s*› /.test(l)) ?? '';

describe('the list', () => {
  it('shows the pending requests with role, MCP count and a countdown that ticks every second', async () => {
    const client = new FakeClient();
    client.add({ app_name: 'Notes App', expires_at: new Date(NOW + 125_000).toISOString() });
    const ui = mount(client, { tickMs: 1000 });
    await ui.see(/^› Notes App\s+scope_user_power_user\s+2\s+2:05$/m);
    expect(ui.frame()).toMatch(/^svc review: pending \(draft\) access requests\s+1 pending · admin$/m);
    ui.clock.advance(1000);
    await ui.see(/2:04$/m, 2500);
  });

  it('updates live: a new request appears without a key press, a decided one goes', async () => {
    const client = new FakeClient();
    const ui = mount(client);
    await ui.see('No pending requests.');
    const r = client.add({ app_name: 'Late App' });
    await ui.see('Late App');
    expect(ui.frame()).toContain('1 pending');
    client.drafts = client.drafts.filter((d) => d.id !== r.id);
    await ui.see('No pending requests.');
  });

  it('polls about every second by default', async () => {
    const client = new FakeClient();
    const ui = mount(client, { pollMs: undefined });
    await ui.see('No pending requests.');
    const calls = client.listCalls;
    client.add({ app_name: 'Within Two Seconds' });
    await ui.see('Within Two Seconds', 2000);
    expect(client.listCalls - calls).toBeLessThanOrEqual(2);
  });

  it('moves with j/k and the arrow keys, staying within the list', async () => {
    const client = new FakeClient();
    for (const name of ['third', 'second', 'first']) client.add({ app_name: name });
    const ui = mount(client);
    await ui.see('3 pending');
    expect(highlighted(ui.frame())).toMatch(/› first/);
    await ui.press('j');
    await until(() => expect(highlighted(ui.frame())).toMatch(/› second/));
    await ui.press(KEY.down);
    await until(() => expect(highlighted(ui.frame())).toMatch(/› third/));
    // past the end the cursor stays on the last one: one key back then lands on the second
    await ui.press('j', KEY.down, 'k');
    await until(() => expect(highlighted(ui.frame())).toMatch(/› second/));
    await ui.press(KEY.up, KEY.up);
    await until(() => expect(highlighted(ui.frame())).toMatch(/› first/));
  });

  it('keeps the highlight on the same request when a new one arrives above it', async () => {
    const client = new FakeClient();
    client.add({ app_name: 'older' });
    client.add({ app_name: 'newer' });
    const ui = mount(client);
    await ui.see('2 pending');
    await ui.press('j');
    await until(() => expect(highlighted(ui.frame())).toMatch(/› older/));
    client.add({ app_name: 'newest' });
    await ui.see('3 pending');
    expect(highlighted(ui.frame())).toMatch(/› older/);
  });

  it('takes keys sent in one burst one by one', async () => {
    const client = new FakeClient();
    for (const name of ['c', 'b', 'a']) client.add({ app_name: `app-${name}` });
    const ui = mount(client);
    await ui.see('3 pending');
    await ui.press(`jj${KEY.enter}`);
    await ui.see(/^App\s+app-c$/m);
  });

  it('fits 80x24 with many requests and long names', async () => {
    const client = new FakeClient();
    for (let i = 0; i < 60; i++) client.add({ app_name: `app-${i}-${'x'.repeat(120)}` });
    const ui = mount(client);
    await ui.see('60 pending');
    const lines = ui.frame().split('\n');
    expect(lines.length).toBeLessThanOrEqual(23);
    for (const l of lines) expect(l.length).toBeLessThanOrEqual(80);
    expect(ui.frame()).toContain('↓');
  });

  it('a, d, r and space on the list say to open a request first', async () => {
    const client = new FakeClient();
    client.add();
    const ui = mount(client);
    await ui.see('1 pending');
    await ui.press('a');
    await ui.see('Open a request with Enter first.');
    expect(client.approvals).toEqual([]);
    expect(client.denials).toEqual([]);
  });
});

describe('the detail', () => {
  async function opened(client = new FakeClient(), over: Parameters<FakeClient['add']>[0] = {}) {
    const r = client.add(over);
    const ui = mount(client);
    await ui.see('1 pending');
    await ui.press(KEY.enter);
    await ui.see(/^Client ID\s+/m);
    return { ui, client, r };
  }

  it('Enter opens it: client id, name, description, roles, each URL with your instances, time left', async () => {
    const { ui } = await opened();
    const f = ui.frame();
    expect(f).toMatch(/^svc review › Notes App\s+admin$/m);
    expect(f).toMatch(/^App\s+Notes App$/m);
    expect(f).toMatch(/^Client ID\s+notes-app$/m);
    expect(f).toMatch(/^About\s+Takes notes and searches your files$/m);
    expect(f).toMatch(/^Requested\s+scope_user_power_user \(Power User\)$/m);
    expect(f).toMatch(/^Grant role\s+scope_user_power_user \(Power User\)\s+r: change$/m);
    expect(f).toMatch(/^Time left\s+9:00$/m);
    expect(f).toContain(URL_A);
    expect(f).toContain(URL_B);
    // As on the browser page, each URL starts with its first enabled instance ticked.
    expect(f).toMatch(/^ {2}› \[x\] files-home/m);
    expect(f).toMatch(/^ {4}\[ \] files-work/m);
    expect(f).toMatch(/^ {4}\[x\] search/m);
    expect(f).toMatch(/\[-\] files-old \(disabled\)/);
    expect(f).toContain('2 instances selected');
  });

  it('counts down from expires_in_seconds', async () => {
    const { ui } = await opened();
    ui.clock.advance(61_000);
    await ui.see(/^Time left\s+7:59$/m);
    ui.clock.advance(480_000);
    await ui.see(/^Time left\s+expired$/m);
  });

  it('space toggles the highlighted instance; the cursor skips disabled ones', async () => {
    const { ui } = await opened();
    await ui.press(KEY.space);
    await ui.see(/› \[ \] files-home/);
    await ui.see('1 instance selected');
    await ui.press('j');
    await ui.see(/› \[ \] files-work/);
    await ui.press(KEY.space, KEY.down, KEY.space);
    await ui.see(/› \[ \] search/);
    expect(ui.frame()).toMatch(/^ {4}\[x\] files-work/m);
    expect(ui.frame()).toContain('1 instance selected');
    await ui.press(KEY.up, KEY.up, KEY.space);
    await ui.see(/› \[x\] files-home/);
    expect(ui.frame()).toMatch(/\[-\] files-old \(disabled\)/);
    expect(ui.frame()).toContain('2 instances selected');
  });

  it('r cycles the role and never above max_grantable_role', async () => {
    const { ui } = await opened();
    await ui.press('r');
    await ui.see(/^Grant role\s+scope_user_user \(User\)/m);
    await ui.press('r');
    await ui.see(/^Grant role\s+scope_user_power_user \(Power User\)/m);

    cleanup();
    const capped = await opened(new FakeClient(), { max_grantable_role: 'scope_user_user' });
    expect(capped.ui.frame()).toMatch(/^Grant role\s+scope_user_user \(User\)\s+\(the most you may grant\)$/m);
    await capped.ui.press('r', 'r', 'r');
    await capped.ui.see('is the most you may grant for this request.');
    expect(capped.ui.frame()).toMatch(/^Grant role\s+scope_user_user \(User\)/m);
  });

  it('a approves exactly what is selected, then shows the list and what was done', async () => {
    const { ui, client, r } = await opened();
    // Untick files-home, tick files-work; search stays ticked.
    await ui.press(KEY.space, 'j', KEY.space, 'r');
    await ui.see(/› \[x\] files-work/);
    await ui.see('2 instances selected');
    await ui.see(/^Grant role\s+scope_user_user/m);
    await ui.press('a');
    await ui.see('Approved Notes App as scope_user_user with 2 MCP instances.');
    expect(client.approvals).toEqual([
      {
        id: r.id,
        body: {
          approved_role: 'scope_user_user',
          approved: {
            version: '1',
            mcp_servers: [
              { url: URL_A, instance_ids: [r.mcp_servers[0].instances[2].id] },
              { url: URL_B, instance_ids: [r.mcp_servers[1].instances[0].id] },
            ],
          },
        },
      },
    ]);
    expect(ui.frame()).toContain('No pending requests.');
  });

  it('a at once grants the highest grantable role and the first enabled instance of each URL', async () => {
    const { ui, client, r } = await opened();
    await ui.press('a');
    await ui.see('with 2 MCP instances');
    expect(client.approvals).toEqual([
      {
        id: r.id,
        body: {
          approved_role: 'scope_user_power_user',
          approved: {
            version: '1',
            mcp_servers: [
              { url: URL_A, instance_ids: [r.mcp_servers[0].instances[0].id] },
              { url: URL_B, instance_ids: [r.mcp_servers[1].instances[0].id] },
            ],
          },
        },
      },
    ]);
  });

  it('a with nothing ticked grants the role only', async () => {
    const { ui, client, r } = await opened();
    await ui.press(KEY.space, 'j', 'j', KEY.space);
    await ui.see('0 instances selected');
    await ui.press('a');
    await ui.see('with 0 MCP instances');
    expect(client.approvals).toEqual([{ id: r.id, body: { approved_role: 'scope_user_power_user', approved: { version: '1', mcp_servers: [] } } }]);
  });

  it('d denies', async () => {
    const { ui, client, r } = await opened();
    await ui.press('d');
    await ui.see('Denied Notes App.');
    expect(client.denials).toEqual([r.id]);
    expect(client.approvals).toEqual([]);
  });

  it('Esc goes back to the list without deciding', async () => {
    const { ui, client } = await opened();
    await ui.press(KEY.escape);
    await ui.see(/^› Notes App/m);
    expect(ui.frame()).toContain('Enter open');
    expect(client.approvals).toEqual([]);
    expect(client.denials).toEqual([]);
  });

  it('409 already_processed (another surface decided first) is shown in place, and the status with it', async () => {
    const { ui, client, r } = await opened();
    await ui.press(KEY.space);
    client.approveError = new AppError('already_processed', 'This request was already denied.');
    client.reviews.set(r.id, { ...r, status: 'denied', expires_in_seconds: 0 });
    await ui.press('a');
    await ui.see('error: Not approved: This request was already denied. (already_processed)');
    await ui.see(/^Status\s+denied \(no longer pending\)$/m);
    expect(ui.frame()).toMatch(/^Client ID\s+notes-app$/m);
    // The reviewer's choices are kept.
    expect(ui.frame()).toMatch(/› \[ \] files-home/);
  });

  it('403 privilege_escalation is shown in place; the reviewer can change the role and retry', async () => {
    const { ui, client, r } = await opened();
    client.approveError = new AppError('privilege_escalation', 'You may not grant scope_user_power_user.');
    await ui.press('a');
    await ui.see('error: Not approved: You may not grant scope_user_power_user. (privilege_escalation)');
    expect(ui.frame()).toMatch(/^Client ID\s+notes-app$/m);
    client.approveError = null;
    await ui.press('r', 'a');
    await ui.see('Approved Notes App as scope_user_user');
    expect(client.approvals.map((a) => [a.id, a.body.approved_role])).toEqual([[r.id, 'scope_user_user']]);
  });

  it('a deny error is shown in place too', async () => {
    const { ui, client } = await opened();
    client.denyError = new AppError('expired', 'This request has expired.');
    await ui.press('d');
    await ui.see('error: Not denied: This request has expired. (expired)');
    expect(ui.frame()).toMatch(/^Client ID\s+notes-app$/m);
  });

  it('shows when the open request is decided elsewhere, without a key press', async () => {
    const { ui, client, r } = await opened();
    client.drafts = [];
    client.reviews.set(r.id, { ...r, status: 'approved', expires_in_seconds: 0 });
    await ui.see(/^Status\s+approved \(no longer pending\)$/m);
  });

  it('a failed open is shown in place; Esc goes back', async () => {
    const client = new FakeClient();
    const r = client.add();
    client.reviews.delete(r.id);
    const ui = mount(client);
    await ui.see('1 pending');
    await ui.press(KEY.enter);
    await ui.see('error: Could not open the request: No such access request. (not_found)');
    await ui.press(KEY.escape);
    await ui.see('Enter open');
  });
});

describe('errors, colour and quitting', () => {
  it('a lost daemon is shown in place and the list recovers when it answers again', async () => {
    const client = new FakeClient();
    client.add({ app_name: 'Still Here' });
    const ui = mount(client);
    await ui.see('Still Here');
    client.listError = new Error('No svc daemon answers at http://127.0.0.1:7878. Start one with `svc serve`.');
    await ui.see('error: cannot refresh the list: No svc daemon answers');
    expect(ui.frame()).toContain('Still Here');
    client.listError = null;
    await until(() => expect(ui.frame()).not.toContain('cannot refresh'));
  });

  it('an expired session says to log in', async () => {
    const client = new FakeClient();
    client.listError = new AppError('login_required', 'Not logged in.');
    const ui = mount(client);
    await ui.see('Run `svc login` in another terminal');
  });

  it('NO_COLOR: not one SGR sequence in any frame; with colour there are', async () => {
    const client = new FakeClient();
    client.add({ expires_at: new Date(NOW + 30_000).toISOString() });
    const plain = mount(client);
    await plain.see('1 pending');
    await plain.press(KEY.enter);
    await plain.see('Client ID');
    await plain.press(KEY.space, 'r');
    await plain.see('[x]');
    expect(plain.frames.join('')).not.toMatch(SGR);
    cleanup();

    const coloured = mount(client, { color: true });
    await coloured.see('1 pending');
    expect(coloured.frame()).toMatch(SGR);
  });

  it('colour only on a TTY and without NO_COLOR', () => {
    expect(colorWanted({ isTTY: true }, { TERM: 'xterm-256color' })).toBe(true);
    expect(colorWanted({ isTTY: true }, { NO_COLOR: '1' })).toBe(false);
    expect(colorWanted({ isTTY: true }, { NO_COLOR: '' })).toBe(true);
    expect(colorWanted({ isTTY: false }, {})).toBe(false);
    expect(colorWanted({ isTTY: true }, { TERM: 'dumb' })).toBe(false);
  });

  it('q quits: raw mode off, no more polling', async () => {
    const client = new FakeClient();
    const ui = mount(client);
    await ui.see('No pending requests.');
    const rawMode = vi.spyOn(ui.stdin, 'setRawMode');
    await ui.press('q');
    await until(() => expect(rawMode).toHaveBeenLastCalledWith(false));
    const calls = client.listCalls;
    // An absence, shown against a witness: a second svc review, polling at the same period, asks
    // seven times (its first look and six polls, so six periods passed) while the one that quit asks nothing.
    const witness = new FakeClient();
    mount(witness);
    await until(() => witness.listCalls >= 7, 3000, 'six polls of the witness');
    expect(client.listCalls).toBe(calls);
  });

  it('q quits from the detail too', async () => {
    const client = new FakeClient();
    client.add();
    const ui = mount(client);
    await ui.see('1 pending');
    await ui.press(KEY.enter);
    await ui.see('Client ID');
    const rawMode = vi.spyOn(ui.stdin, 'setRawMode');
    await ui.press('q');
    await until(() => expect(rawMode).toHaveBeenLastCalledWith(false));
  });
});

describe('with the real client against a real daemon', () => {
  let daemon: TestDaemon;
  let api: Api;
  let client: ReturnType<typeof daemonReviewClient>;
  let instanceId: string;

  beforeAll(async () => {
    daemon = await startTestDaemon();
    api = await new Api(daemon.url).login('admin', daemon.adminPassword);
    const added = await api.post('/svc/v1/mcps', { name: 'files', url: URL_A });
    expect(added.status, added.text).toBe(201);
    instanceId = added.body.instance.id;
    client = daemonReviewClient(await DaemonClient.connect({ dataDir: daemon.dataDir, host: '127.0.0.1', port: 0 }, {}));
  }, 60_000);

  afterAll(async () => {
    await daemon?.stop();
  });

  it('approves over HTTP with the CLI session, and shows the 409 when another surface decided first', async () => {
    const created = await api.post('/svc/v1/apps/request-access', createBody({ requested: { version: '1', mcp_servers: [{ url: URL_A }] } }));
    expect(created.status, created.text).toBe(201);
    const other = await api.post('/svc/v1/apps/request-access', createBody({ app_client_id: 'second-app' }));
    const ui = mount(client, { clock: Date.now });
    await ui.see('2 pending');
    // Newest first: second-app is highlighted; move to demo-app and open it.
    await ui.press('j', KEY.enter);
    await ui.see(/^Client ID\s+demo-app$/m);
    await ui.see(/^ {2}› \[x\] files/m);
    await ui.press('r', 'a');
    await ui.see('Approved demo-app as scope_user_user with 1 MCP instance.');
    const done = await api.get(`/svc/v1/access-requests/${created.body.id}/review`);
    expect(done.body).toMatchObject({
      status: 'approved',
      approved_role: 'scope_user_user',
      approved: { version: '1', mcp_servers: [{ url: URL_A, instance_ids: [instanceId] }] },
    });

    await ui.press(KEY.enter);
    await ui.see(/^Client ID\s+second-app$/m);
    expect((await api.post(`/svc/v1/access-requests/${other.body.id}/deny`)).status).toBe(200);
    await ui.press('a');
    await ui.see('(already_processed)');
    await ui.see(/^Status\s+denied \(no longer pending\)$/m);
  });

  it('l sets limits in the detail before approving, and the grant gets them', async () => {
    const created = await api.post('/svc/v1/apps/request-access', createBody({ app_client_id: 'limited-app' }));
    const ui = mount(client, { clock: Date.now });
    await ui.see('limited-app');
    const rows = ui.frame().split('\n');
    const row = rows.findIndex((l) => l.includes('limited-app')) - rows.findIndex((l) => /^\s*› /.test(l));
    for (let i = 0; i < row; i++) await ui.press('j');
    await ui.press(KEY.enter);
    await ui.see(/^Client ID\s+limited-app$/m);
    await ui.see(/^Limits\s+none calls\/min, none tokens\/day\s+l: set$/m);
    await ui.press('l', '2', '5', '\t', '5', '0', '0', KEY.enter);
    await ui.see(/^Limits\s+25 calls\/min, 500 tokens\/day/m);
    await ui.press('a');
    await ui.see('Approved limited-app');
    expect((await api.get(`/svc/v1/access-requests/${created.body.id}/review`)).body.limits).toEqual({ requests_per_minute: 25, tokens_per_day: 500 });
  });

  it('Tab opens the Apps view: the grants you let in with their live activity; l sets limits, r then y revokes, any other key keeps it', async () => {
    const created = await api.post('/svc/v1/apps/request-access', createBody({ app_client_id: 'apps-view-app' }));
    expect((await api.put(`/svc/v1/access-requests/${created.body.id}/approve`, { approved_role: 'scope_user_user' })).status).toBe(200);
    const key = await api.post('/svc/v1/keys', { name: 'tui key', role: 'scope_user_user', mcp_servers: [], expires_in: null });
    expect(key.status, key.text).toBe(201);
    const bearer = { Authorization: `Bearer ${key.body.key}` };
    expect((await new Api(daemon.url).get('/v1/models', bearer)).status).toBe(200);
    const ui = mount(client, { clock: Date.now, pollMs: 100 });
    await ui.press('\t');
    await ui.see('svc review: apps you let in');
    await ui.see('tui key');
    // the key's grant is the newest: highlighted, with its activity
    await ui.see(/models\s+200 ok/);
    expect((await new Api(daemon.url).get('/v1/models/nope', bearer)).status).toBe(404);
    await ui.see(/models\s+404 refused \(model_not_found\)/);

    await ui.press('l', '3', '0', '\t', '9', '0', '0', KEY.enter);
    await ui.see('Limits saved');
    const grantId = key.body.access_request_id as string;
    expect((await api.get(`/svc/v1/access-requests/${grantId}/review`)).body.limits).toEqual({ requests_per_minute: 30, tokens_per_day: 900 });
    await ui.see('30/min, 900 tok/day');

    await ui.press('r');
    await ui.see('y revokes it now; any other key keeps it.');
    await ui.press('n');
    expect((await api.get(`/svc/v1/access-requests/${grantId}/review`)).body.status).toBe('approved');
    await ui.press('r', 'y');
    await ui.see('its tokens stop on their next call');
    expect((await api.get(`/svc/v1/access-requests/${grantId}/review`)).body.status).toBe('revoked');
    expect((await new Api(daemon.url).get('/v1/models', bearer)).status).toBe(401);
    await ui.press('\t');
    await ui.see('svc review: pending (draft) access requests');
  });
});
