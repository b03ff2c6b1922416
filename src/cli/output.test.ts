import { describe, expect, it } from 'vitest';
import { fitWidths, type Output, printRows } from './output.js';

const capture = (isTTY: boolean, columns?: number) => {
  let text = '';
  const o: Output = { out: (t) => (text += t), err: () => undefined, isTTY, columns };
  return { o, text: () => text };
};

describe('tables on a terminal (issue 16 item 9)', () => {
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
