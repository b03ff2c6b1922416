import { render } from 'ink-testing-library';
import { describe, expect, it, vi } from 'vitest';
import { NOW, pending, SGR } from '../../../test/helpers/tui.js';
import { RequestList } from './RequestList.js';

vi.hoisted(() => {
  process.env.FORCE_COLOR = '1';
});

const base = { cursor: 0, loaded: true, now: NOW, width: 80, height: 19, color: false };
const rows = (frame: string) => frame.split('\n');

describe('RequestList', () => {
  it('shows each request: app name or client id, requested role, MCP server count, countdown', () => {
    const requests = [
      pending({ app_name: 'Notes App', app_client_id: 'notes', expires_at: new Date(NOW + 545_000).toISOString() }),
      pending({
        app_client_id: 'demo-app',
        requested_role: 'scope_user_user',
        requested: { version: '1', mcp_servers: [{ url: 'http://a.test/mcp' }, { url: 'http://b.test/mcp' }] },
        expires_at: new Date(NOW + 30_000).toISOString(),
      }),
    ];
    const frame = render(<RequestList {...base} requests={requests} />).lastFrame()!;
    const [head, first, second] = rows(frame);
    expect(head).toMatch(/APP\s+REQUESTED ROLE\s+MCP\s+EXPIRES/);
    expect(first).toMatch(/^› Notes App\s+scope_user_power_user\s+1\s+9:05$/);
    expect(second).toMatch(/^ {2}demo-app\s+scope_user_user\s+2\s+0:30$/);
    expect(frame).not.toContain('notes ');
  });

  it('marks the highlighted row with › (no colour needed)', () => {
    const requests = [pending({ app_client_id: 'one' }), pending({ app_client_id: 'two' }), pending({ app_client_id: 'three' })];
    const frame = render(<RequestList {...base} requests={requests} cursor={1} />).lastFrame()!;
    expect(rows(frame).filter((l) => l.startsWith('›'))).toEqual([expect.stringMatching(/^› two /)]);
  });

  it('counts down from expires_at, and says expired at zero', () => {
    const r = pending({ expires_at: new Date(NOW + 61_000).toISOString() });
    const { lastFrame, rerender } = render(<RequestList {...base} requests={[r]} />);
    expect(lastFrame()).toMatch(/1:01$/m);
    rerender(<RequestList {...base} requests={[r]} now={NOW + 2_000} />);
    expect(lastFrame()).toMatch(/0:59$/m);
    rerender(<RequestList {...base} requests={[r]} now={NOW + 61_000} />);
    expect(lastFrame()).toMatch(/expired$/m);
  });

  it('fits 80 columns: a long client id is truncated, not wrapped', () => {
    const frame = render(<RequestList {...base} requests={[pending({ app_client_id: `app-${'x'.repeat(300)}` })]} />).lastFrame()!;
    expect(rows(frame)).toHaveLength(2);
    for (const line of rows(frame)) expect(line.length).toBeLessThanOrEqual(80);
    expect(frame).toContain('…');
  });

  it('scrolls: only what fits, the highlighted row in view, and how many more above and below', () => {
    const requests = Array.from({ length: 40 }, (_, i) => pending({ app_client_id: `app-${i}` }));
    const top = render(<RequestList {...base} requests={requests} />).lastFrame()!;
    expect(rows(top)).toHaveLength(19);
    expect(top).toContain('(↓22 more)');
    const middle = render(<RequestList {...base} requests={requests} cursor={25} />).lastFrame()!;
    expect(rows(middle)).toHaveLength(19);
    expect(middle).toMatch(/^› app-25 /m);
    expect(middle).toMatch(/\(↑\d+ ↓\d+ more\)/);
    const bottom = render(<RequestList {...base} requests={requests} cursor={39} />).lastFrame()!;
    expect(bottom).toMatch(/^› app-39 /m);
    expect(bottom).toContain('(↑22 more)');
  });

  it('neutralises terminal escapes in app-supplied text', () => {
    const frame = render(<RequestList {...base} requests={[pending({ app_client_id: 'x', app_name: 'evil\u001b]0;pwned\u0007\u001b[31mred' })]} />).lastFrame()!;
    expect(frame).not.toContain('\u001b');
    expect(frame).not.toContain('\u0007');
    expect(frame).toContain('evil\uFFFD]0;pwned\uFFFD\uFFFD[31mred');
  });

  it('says when there is nothing pending, and while it loads', () => {
    expect(render(<RequestList {...base} requests={[]} />).lastFrame()).toContain('No pending requests.');
    expect(render(<RequestList {...base} requests={[]} loaded={false} />).lastFrame()).toContain('Loading…');
  });

  it('writes no SGR sequence without colour', () => {
    const requests = [pending(), pending({ expires_at: new Date(NOW + 10_000).toISOString() })];
    expect(render(<RequestList {...base} requests={requests} />).lastFrame()).not.toMatch(SGR);
    expect(render(<RequestList {...base} requests={requests} color />).lastFrame()).toMatch(SGR);
  });
});
