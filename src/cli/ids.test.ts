import { describe, expect, it } from 'vitest';
import { CliError } from './errors.js';
import { resolveId, shortId } from './ids.js';

describe('ids as a person types them', () => {
  const ids = ['e37db51d-1111-4000-8000-000000000001', 'e37db51d-2222-4000-8000-000000000002', 'a0116fd6-3333-4000-8000-000000000003'];

  it('takes a full id, or a unique prefix of 6 or more characters', () => {
    expect(resolveId(ids[2], ids, 'request')).toBe(ids[2]);
    expect(resolveId('a0116f', ids, 'request')).toBe(ids[2]);
    expect(resolveId('e37db51d-2', ids, 'request')).toBe(ids[1]);
  });

  it('refuses an ambiguous prefix, listing the matches', () => {
    expect(() => resolveId('e37db51d', ids, 'request')).toThrow(CliError);
    expect(() => resolveId('e37db51d', ids, 'request')).toThrow(/ambiguous.*e37db51d-1111.*e37db51d-2222/);
  });

  it('passes anything else on for the daemon to answer (not found)', () => {
    expect(resolveId('a011', ids, 'request')).toBe('a011');
    expect(resolveId('ffffff', ids, 'request')).toBe('ffffff');
  });

  it('shows UUIDs by their first 8 characters, other ids whole', () => {
    expect(shortId(ids[0])).toBe('e37db51d');
    expect(shortId('svc-dyn-abc')).toBe('svc-dyn-abc');
  });
});
