import { Box } from 'ink';
import { render } from 'ink-testing-library';
import { describe, expect, it, vi } from 'vitest';
import { SGR } from '../../../test/helpers/tui.js';
import { StatusLine } from './StatusLine.js';

vi.hoisted(() => {
  process.env.FORCE_COLOR = '1';
});

describe('StatusLine', () => {
  it('shows an error from the daemon, marked as one even without colour', () => {
    const frame = render(
      <StatusLine notice={{ kind: 'error', text: 'Not approved: This request was already denied. (already_processed)' }} pollError={null} busy={false} color={false} />,
    ).lastFrame();
    expect(frame).toBe('error: Not approved: This request was already denied. (already_processed)');
  });

  it('shows what was decided', () => {
    const frame = render(<StatusLine notice={{ kind: 'info', text: 'Denied demo-app.' }} pollError={null} busy={false} color={false} />).lastFrame();
    expect(frame).toBe('Denied demo-app.');
  });

  it('says when the list cannot be refreshed, and that a decision is being sent', () => {
    expect(render(<StatusLine notice={null} pollError="No svc daemon answers" busy={false} color={false} />).lastFrame()).toBe(
      'error: cannot refresh the list: No svc daemon answers',
    );
    expect(render(<StatusLine notice={null} pollError={null} busy color={false} />).lastFrame()).toBe('Sending…');
    expect(render(<StatusLine notice={null} pollError={null} busy={false} color={false} />).lastFrame()!.trim()).toBe('');
  });

  it('colours errors only when colour is on', () => {
    const notice = { kind: 'error' as const, text: 'x' };
    expect(render(<StatusLine notice={notice} pollError={null} busy={false} color={false} />).lastFrame()).not.toMatch(SGR);
    expect(render(<StatusLine notice={notice} pollError={null} busy={false} color />).lastFrame()).toMatch(SGR);
  });

  it('wraps a long error instead of cutting it', () => {
    const text = 'Not approved: You may not grant scope_user_power_user. (privilege_escalation)';
    const { lastFrame } = render(
      <Box width={60}>
        <StatusLine notice={{ kind: 'error', text }} pollError={null} busy={false} color={false} />
      </Box>,
    );
    const lines = lastFrame()!.split('\n');
    expect(lines.length).toBe(2);
    expect(lines.join(' ').replace(/\s+/g, ' ')).toContain('(privilege_escalation)');
  });
});
