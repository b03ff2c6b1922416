import { describe, expect, it } from 'vitest';
import { scrubbed } from './stderr.js';

describe('scrubbed stderr lines', () => {
  const secret = 'abcdefgh12345678';

  it('replaces each secret, raw or JSON-escaped', () => {
    expect(scrubbed(`token ${secret} and "\\u0061bcdefgh12345678"`, [secret], false)).toBe('token [redacted] and "[redacted]"');
  });

  it('replaces the start of a secret at the end of a cut line, and only of a cut one', () => {
    expect(scrubbed('yyyyabcdef', [secret], true)).toBe('yyyy[redacted]');
    expect(scrubbed('yyyyabcdef', [secret], false)).toBe('yyyyabcdef');
    expect(scrubbed('yyyyzz', [secret], true)).toBe('yyyyzz');
  });
});
