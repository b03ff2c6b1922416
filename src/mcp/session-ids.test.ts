import { describe, expect, it } from 'vitest';
import { SessionIds } from './session-ids.js';

describe('MCP session ids as the app sees them', () => {
  const ids = new SessionIds('a key derived from the master key');

  it("wraps the server's id for one grant on one instance, and unwraps it only for them", () => {
    const given = ids.forApp('i1', 'g1', 'server-session-1');
    expect(given).not.toContain('server-session-1');
    expect(given).toMatch(/^[\x21-\x7e]+$/); // visible ASCII, as MCP asks of a session id
    expect(ids.forServer('i1', 'g1', given)).toBe('server-session-1');
    expect(ids.forServer('i1', 'g2', given)).toBeNull(); // another grant
    expect(ids.forServer('i2', 'g1', given)).toBeNull(); // another instance
    expect(new SessionIds('another master key').forServer('i1', 'g1', given)).toBeNull();
  });

  it('knows no raw, forged, cut or respelt id', () => {
    const given = ids.forApp('i1', 'g1', 's');
    const [prefix, wrapped, mac] = given.split('.');
    for (const id of [
      's',
      '',
      `${prefix}.${wrapped}`,
      `${prefix}.${wrapped}.${mac.slice(0, -1)}`,
      `${prefix}.${wrapped}.${mac}.x`,
      `${prefix}.${Buffer.from('t').toString('base64url')}.${mac}`,
      `${prefix}.${wrapped}=.${mac}`,
      `${prefix}.${wrapped}.${mac}=`,
      `${prefix}.${wrapped}.${'A'.repeat(mac.length)}`,
      given.toUpperCase(),
    ]) {
      expect(ids.forServer('i1', 'g1', id), id).toBeNull();
    }
  });
});
