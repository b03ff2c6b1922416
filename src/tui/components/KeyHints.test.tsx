import { render } from 'ink-testing-library';
import { describe, expect, it, vi } from 'vitest';
import { SGR } from '../../../test/helpers/tui.js';
import { KeyHints } from './KeyHints.js';

vi.hoisted(() => {
  process.env.FORCE_COLOR = '1';
});

describe('KeyHints', () => {
  it('names the keys of the list', () => {
    const frame = render(<KeyHints screen="list" color={false} />).lastFrame()!;
    expect(frame).toContain('↑↓/jk move');
    expect(frame).toContain('Enter open');
    expect(frame).toContain('q quit');
    expect(frame).not.toContain('approve');
  });

  it('names the keys of the detail, within 80 columns', () => {
    const frame = render(<KeyHints screen="detail" color={false} />).lastFrame()!;
    for (const k of ['space toggle', 'r role', 'a approve', 'd deny', 'Esc back', 'q quit']) expect(frame).toContain(k);
    expect(frame.length).toBeLessThanOrEqual(80);
  });

  it('offers only the keys that still work once the request is decided elsewhere or expired', () => {
    const frame = render(<KeyHints screen="detail" color={false} decidable={false} />).lastFrame()!;
    expect(frame).not.toContain('approve');
    expect(frame).not.toContain('deny');
    expect(frame).toContain('Esc back');
  });

  it('is plain without colour', () => {
    expect(render(<KeyHints screen="detail" color={false} />).lastFrame()).not.toMatch(SGR);
    expect(render(<KeyHints screen="detail" color />).lastFrame()).toMatch(SGR);
  });
});
