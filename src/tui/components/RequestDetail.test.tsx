import { render } from 'ink-testing-library';
import { describe, expect, it, vi } from 'vitest';
import { review, SGR, URL_A, URL_B } from '../../../test/helpers/tui.js';
import { RequestDetail, type RequestDetailProps } from './RequestDetail.js';

vi.hoisted(() => {
  process.env.FORCE_COLOR = '1';
});

const props = (over: Partial<RequestDetailProps> = {}): RequestDetailProps => ({
  data: review(),
  role: 'scope_user_power_user',
  selected: [],
  cursor: 0,
  secondsLeft: 540,
  width: 80,
  height: 19,
  color: false,
  ...over,
});
const frameOf = (p: RequestDetailProps) => render(<RequestDetail {...p} />).lastFrame()!;

describe('RequestDetail', () => {
  it('shows the app, its client id and description, the requested role, the role to grant and the time left', () => {
    const frame = frameOf(props({ role: 'scope_user_user', secondsLeft: 125 }));
    expect(frame).toMatch(/^App\s+Notes App$/m);
    expect(frame).toMatch(/^Client ID\s+notes-app$/m);
    expect(frame).toMatch(/^About\s+Takes notes and searches your files$/m);
    expect(frame).toMatch(/^Requested\s+scope_user_power_user \(Power User\)$/m);
    expect(frame).toMatch(/^Grant role\s+scope_user_user \(User\)\s+r: change$/m);
    expect(frame).toMatch(/^Time left\s+2:05$/m);
  });

  it('lists each requested URL with your instances: a checkbox each, disabled ones shown but not selectable', () => {
    const data = review();
    const frame = frameOf(props({ data, selected: [data.mcp_servers[0].instances[2].id], cursor: 1 }));
    const lines = frame.split('\n');
    const at = lines.findIndex((l) => l.trim() === URL_A);
    expect(at).toBeGreaterThan(0);
    expect(lines[at + 1]).toMatch(/^ {4}\[ \] files-home {2}aaaaaaaa$/);
    expect(lines[at + 2]).toMatch(/^ {4}\[-\] files-old \(disabled\) {2}bbbbbbbb$/);
    expect(lines[at + 3]).toMatch(/^ {2}› \[x\] files-work {2}cccccccc$/);
    expect(lines[at + 4].trim()).toBe(URL_B);
    expect(lines[at + 5]).toMatch(/^ {4}\[ \] search {2}dddddddd$/);
    expect(frame).toContain('MCP servers: 2 requested, 1 instance selected');
  });

  it("lists a command server's stdio:// URL with its instances, as any URL", () => {
    const url = 'stdio://filesystem';
    const data = review({
      requested: { version: '1', mcp_servers: [{ url }] },
      mcp_servers: [{ url, instances: [{ id: 'eeeeeeee-0000-4000-8000-000000000000', name: 'filesystem', url, enabled: true, selected: false }] }],
    });
    const lines = frameOf(props({ data })).split('\n');
    const at = lines.findIndex((l) => l.trim() === url);
    expect(at).toBeGreaterThan(0);
    expect(lines[at + 1]).toMatch(/\[ \] filesystem {2}eeeeeeee$/);
  });

  it('says when you may not raise the role, and when you own no instance of a URL', () => {
    const data = review({ max_grantable_role: 'scope_user_user', mcp_servers: [{ url: URL_A, instances: [] }] });
    const frame = frameOf(props({ data, role: 'scope_user_user' }));
    expect(frame).toMatch(/^Grant role\s+scope_user_user \(User\)\s+\(the most you may grant\)$/m);
    expect(frame).toContain('(none of yours: add one with `svc mcp add`)');
  });

  it('shows the status once the request is no longer a draft, and the client id when no name is known', () => {
    const frame = frameOf(props({ data: review({ status: 'approved', app_name: undefined, app_description: undefined, app_client_id: 'bare-client' }), secondsLeft: 0 }));
    expect(frame).toMatch(/^Status\s+approved \(no longer pending\)$/m);
    expect(frame).toMatch(/^App\s+\(name not known: not a registered client\)$/m);
    expect(frame).toMatch(/^Client ID\s+bare-client$/m);
    expect(frame).not.toContain('About');
  });

  it('fits 80x24 however many instances: scrolls to keep the highlighted one in view', () => {
    const instances = Array.from({ length: 30 }, (_, i) => ({ id: `${String(i).padStart(8, '0')}-0000-4000-8000-000000000000`, name: `inst-${i}`, url: URL_A, enabled: true, selected: i === 0 }));
    const data = review({ mcp_servers: [{ url: URL_A, instances }] });
    const frame = frameOf(props({ data, cursor: 20 }));
    const lines = frame.split('\n');
    expect(lines.length).toBeLessThanOrEqual(19);
    for (const l of lines) expect(l.length).toBeLessThanOrEqual(80);
    expect(frame).toMatch(/^ {2}› \[ \] inst-20 /m);
    expect(frame).toMatch(/\(↑\d+ ↓\d+ more\)/);
  });

  it('truncates long strings and neutralises escapes in app-supplied text', () => {
    const long = `http://127.0.0.1:3001/${'p'.repeat(300)}`;
    const data = review({
      app_client_id: 'client-\u001b[2J',
      app_name: 'Evil\u001b]52;c;Zm9v\u0007 App',
      app_description: 'd'.repeat(500),
      mcp_servers: [{ url: long, instances: [{ id: 'aaaaaaaa-1', name: 'n\u001b[31m', url: long, enabled: true, selected: true }] }],
    });
    const frame = frameOf(props({ data }));
    expect(frame).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
    for (const l of frame.split('\n')) expect(l.length).toBeLessThanOrEqual(80);
    expect(frame).toContain('Evil\uFFFD]52;c;Zm9v\uFFFD App');
  });

  it('shows Loading… until the data arrives', () => {
    expect(frameOf(props({ data: null, role: null }))).toBe('Loading…');
  });

  it('writes no SGR sequence without colour', () => {
    expect(frameOf(props())).not.toMatch(SGR);
    expect(frameOf(props({ color: true }))).toMatch(SGR);
  });

  it('says where a redirect flow sends you and that an unregistered app is unverified, with invisible characters neutralised', () => {
    const data = review({
      app_registered: false,
      app_name: undefined,
      flow_type: 'redirect',
      redirect_url: 'https://evil.example/cb?x=\u202egnp.\u200b\u{E0041}',
    });
    const frame = frameOf(props({ data }));
    expect(frame).toMatch(/^Registered\s+no: not in the OAuth client registry/m);
    expect(frame).toMatch(/^Redirect to\s+https:\/\/evil\.example\/cb\?x=\uFFFDgnp\.\uFFFD\uFFFD$/m);
    for (const c of ['\u202e', '\u200b', '\u{E0041}']) expect(frame).not.toContain(c);
  });

  it('says a client that registered itself or is known by its metadata document is unverified too: its name is its own claim', () => {
    const dynamic = frameOf(props({ data: review({ app_registered: false, client_kind: 'dynamic', app_name: 'Notes App' }), width: 100 }));
    expect(dynamic).toMatch(/^Registered\s+no: it registered itself, so its name is its own claim$/m);
    const document = frameOf(props({ data: review({ app_registered: false, client_kind: 'metadata_document' }), width: 120 }));
    expect(document).toMatch(/^Registered\s+no: known by the metadata document at its client id/m);
  });
});
