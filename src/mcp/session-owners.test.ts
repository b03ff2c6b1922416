import { describe, expect, it } from 'vitest';
import { SessionOwners } from './session-owners.js';

describe('the owners of MCP sessions', () => {
  it('binds a session to the first grant the server named it to, per instance, and forgets an ended one', () => {
    const owners = new SessionOwners();
    owners.begun('i1', 's1', 'g1');
    owners.begun('i1', 's1', 'g2'); // named again: the first owner stays
    expect(owners.usableBy('i1', 's1', 'g1')).toBe(true);
    expect(owners.usableBy('i1', 's1', 'g2')).toBe(false);
    // the same id on another instance is another session, unknown here
    expect(owners.usableBy('i2', 's1', 'g2')).toBe(true);
    owners.ended('i1', 's1');
    expect(owners.usableBy('i1', 's1', 'g2')).toBe(true);
  });

  it('holds at most its bound, forgetting the oldest first', () => {
    const owners = new SessionOwners(3);
    for (const s of ['s1', 's2', 's3', 's4']) owners.begun('i', s, 'g1');
    expect(owners.size).toBe(3);
    expect(owners.usableBy('i', 's1', 'g2')).toBe(true);
    expect(owners.usableBy('i', 's4', 'g2')).toBe(false);
  });
});
