import { render } from 'ink-testing-library';
import { describe, expect, it, vi } from 'vitest';
import { SGR } from '../../../test/helpers/tui.js';
import { Header } from './Header.js';

// Colour support is decided when chalk loads: force it, so `color` alone decides what is written.
vi.hoisted(() => {
  process.env.FORCE_COLOR = '1';
});

describe('Header', () => {
  it('shows the title, the aside on the right and a rule as wide as the terminal', () => {
    const { lastFrame } = render(<Header title="svc review: pending access requests" aside="2 pending · admin" width={80} color={false} />);
    const [top, rule] = lastFrame()!.split('\n');
    expect(top).toMatch(/^svc review: pending access requests\s+2 pending · admin$/);
    expect(top.length).toBe(80);
    expect(rule).toBe('─'.repeat(80));
  });

  it('truncates a long title and keeps the aside', () => {
    const { lastFrame } = render(<Header title={`svc review › ${'x'.repeat(200)}`} aside="admin" width={80} color={false} />);
    const top = lastFrame()!.split('\n')[0];
    expect(top.length).toBeLessThanOrEqual(80);
    expect(top).toContain('…');
    expect(top.endsWith('admin')).toBe(true);
  });

  it('writes no SGR sequence without colour, and styles with it', () => {
    expect(render(<Header title="t" aside="a" width={40} color={false} />).lastFrame()).not.toMatch(SGR);
    expect(render(<Header title="t" aside="a" width={40} color />).lastFrame()).toMatch(SGR);
  });
});
