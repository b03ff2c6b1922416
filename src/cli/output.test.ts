import { describe, expect, it } from 'vitest';
import { fitWidths, type Output, printRows, relativeTime, when } from './output.js';

const capture = (isTTY: boolean, columns?: number) => {
  let text = '';
  const o: Output = { out: (t) => (text += t), err: () => undefined, isTTY, columns };
  return { o, text: () => text };
};

describe('tables on a terminal', () => {
  const rows = [{ id: 'e37db51d', app: 'An app with a really rather long name that goes on', url: 'http://127.0.0.1:3001/a/very/long/path/to/an/mcp/server' }];
  const cols = [
    { header: 'id', value: (r: (typeof rows)[0]) => r.id },
    { header: 'app', value: (r: (typeof rows)[0]) => r.app },
    { header: 'url', value: (r: (typeof rows)[0]) => r.url },
  ];

  it('cuts the widest columns to fit the terminal, with an ellipsis', () => {
    for (const width of [80, 60]) {
      const c = capture(true, width);
      printRows(c.o, rows, cols);
      for (const line of c.text().trimEnd().split('\n')) expect(line.length, line).toBeLessThanOrEqual(width);
      expect(c.text()).toContain('…');
      expect(c.text()).toContain('e37db51d');
    }
  });

  it('keeps full values when piped', () => {
    const c = capture(false, 40);
    printRows(c.o, rows, cols);
    expect(c.text()).toBe(`${rows[0].id}\t${rows[0].app}\t${rows[0].url}\n`);
  });

  it('leaves what fits alone', () => {
    expect(fitWidths([2, 3, 4], 80)).toEqual([2, 3, 4]);
    expect(fitWidths([10, 50, 50], 60)).toEqual([10, 23, 23]);
  });
});

describe('values people copy, and times people read', () => {
  it('never cuts a column marked copy: the others give way, and past that the line is longer than the terminal', () => {
    expect(fitWidths([8, 40, 60], 80, [true, false, true])).toEqual([8, 8, 60]);
    expect(fitWidths([8, 40, 90], 80, [true, false, true])).toEqual([8, 6, 90]);
  });

  it('says a time on a terminal as people do, and leaves it ISO when piped', () => {
    const now = Date.parse('2026-05-01T12:00:00Z');
    expect(relativeTime(-2_000)).toBe('just now');
    expect(relativeTime(-30_000)).toBe('30 s ago');
    expect(relativeTime(-5 * 60_000)).toBe('5 min ago');
    expect(relativeTime(9 * 60_000)).toBe('in 9 min');
    expect(relativeTime(-3 * 3600_000)).toBe('3 h ago');
    expect(relativeTime(-3 * 86_400_000)).toBe('3 days ago');
    expect(relativeTime(90 * 86_400_000)).toBe('in 3 months');
    const iso = '2026-05-01T11:55:00.000Z';
    expect(when(capture(true).o, iso, now)).toBe('5 min ago');
    expect(when(capture(false).o, iso, now)).toBe(iso);
    expect(when(capture(true).o, null, now)).toBe('');
  });
});
