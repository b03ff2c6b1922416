/** What `svc mcp` makes of its arguments and of a command instance's answer, without a daemon. */
import { describe, expect, it } from 'vitest';
import { addBody, commandLine, parseEnv, processesText } from './mcp.js';

const base = { name: 'n', header: [] as string[], env: [] as string[], try: true };

describe('svc mcp add and list, as text', () => {
  it('builds the command form from the words after --, and the HTTP form without them', () => {
    expect(addBody({ ...base, env: ['A=1=2', 'B'], cwd: 'rel' }, ['srv', '--flag'], { B: 'from-shell' }, '/home/me')).toEqual({
      name: 'n',
      command: { command: 'srv', args: ['--flag'], env: [{ name: 'A', value: '1=2' }, { name: 'B', value: 'from-shell' }], cwd: '/home/me/rel' },
    });
    expect(addBody({ ...base, url: 'stdio://x', try: false, allowTools: 'a, b', disabled: true }, ['srv'], {}, '/')).toEqual({
      name: 'n',
      allow_tools: ['a', 'b'],
      enabled: false,
      command: { command: 'srv', args: [], env: [] },
      url: 'stdio://x',
      try: false,
    });
    expect(addBody({ ...base, url: 'http://h/mcp', header: ['X: y'] }, [], {}, '/')).toEqual({ name: 'n', url: 'http://h/mcp', headers: [{ name: 'X', value: 'y' }] });
    expect(() => addBody(base, [], {}, '/')).toThrow(/--url URL/);
    expect(() => parseEnv('MISSING', {})).toThrow(/no MISSING in this environment/);
    expect(parseEnv('E=', {})).toEqual({ name: 'E', value: '' });
  });

  it('shows a command line as it would be typed, and processes in a few words', () => {
    expect(commandLine('npx', ['-y', '@scope/pkg', '/tmp/a b', "it's"])).toBe(`npx -y @scope/pkg '/tmp/a b' 'it'\\''s'`);
    expect(commandLine('srv', ['\u001b[2J'])).not.toMatch(/\u001b/);
    const now = Date.parse('2026-12-01T12:00:00Z');
    expect(processesText(undefined)).toBe('');
    expect(processesText({ live: 2, last_exit: null, status: 'running' }, now)).toBe('running, 2 live');
    expect(processesText({ live: 0, last_exit: { code: 1, signal: null, at: '2026-12-01T11:55:00Z', reason: 'crash' }, status: 'backing off' }, now)).toBe(
      'backing off, 0 live, last exit: code 1 (crash) 5 min ago',
    );
    expect(processesText({ live: 0, last_exit: { code: null, signal: 'SIGKILL', at: '2026-12-01T11:59:59Z', reason: 'stopped' }, status: 'idle' }, now)).toMatch(/signal SIGKILL \(stopped\)/);
  });
});
