import { describe, expect, it } from 'vitest';
import { LineReader } from './lines.js';

function read(reader: LineReader, chunks: (string | Buffer)[]) {
  const lines: [string, boolean][] = [];
  const oks = chunks.map((c) => reader.push(Buffer.isBuffer(c) ? c : Buffer.from(c), (line, cut) => lines.push([line.toString(), cut])));
  return { lines, oks };
}

describe('LineReader', () => {
  it('cuts lines across and within chunks, dropping the newline and a \\r before it', () => {
    const { lines } = read(new LineReader(100, 'fail'), ['a\nb', 'c\r\n', '', 'd', 'e\nf\n\n']);
    expect(lines).toEqual([
      ['a', false],
      ['bc', false],
      ['de', false],
      ['f', false],
      ['', false],
    ]);
  });

  it('takes a line of exactly the limit, and fails at one byte more without holding it', () => {
    const reader = new LineReader(8, 'fail');
    expect(read(reader, ['12345678\n']).lines).toEqual([['12345678', false]]);
    const over = read(reader, ['1234', '56789']);
    expect(over.oks).toEqual([true, false]);
    expect(reader.highWater).toBeLessThanOrEqual(8);
    expect(reader.holding).toBe(0);
    // once failed it reads no more
    expect(read(reader, ['ok\n']).lines).toEqual([]);
  });

  it('never holds more than the limit of a line that never ends, whatever the chunks', () => {
    const limit = 1 << 20;
    const reader = new LineReader(limit, 'fail');
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    let ok = true;
    let pushed = 0;
    while (ok && pushed < 20 * limit) {
      ok = reader.push(chunk, () => undefined);
      pushed += chunk.length;
      expect(reader.holding).toBeLessThanOrEqual(limit);
    }
    expect(ok).toBe(false);
    expect(pushed).toBeLessThanOrEqual(limit + chunk.length);
    expect(reader.highWater).toBeLessThanOrEqual(limit);
  });

  it('in truncate mode keeps the start of a long line, once, and goes on with the next', () => {
    const reader = new LineReader(4, 'truncate');
    const { lines, oks } = read(reader, ['abcdefgh', 'ijk\nxy\n', 'longer line\nz\n']);
    expect(oks).toEqual([true, true, true]);
    expect(lines).toEqual([
      ['abcd', true],
      ['xy', false],
      ['long', true],
      ['z', false],
    ]);
    expect(reader.highWater).toBe(4);
  });

  it('end() gives an unfinished last line', () => {
    const reader = new LineReader(10, 'truncate');
    const lines: string[] = [];
    reader.push(Buffer.from('a\nrest'), (l) => lines.push(l.toString()));
    reader.end((l) => lines.push(l.toString()));
    expect(lines).toEqual(['a', 'rest']);
  });
});
