import { describe, expect, it } from 'vitest';
import { FALLBACK_PATH, minimalEnv } from './env.js';

describe('minimalEnv', () => {
  const parent = {
    PATH: '/usr/bin',
    HOME: '/home/u',
    LANG: 'en_GB.UTF-8',
    LC_CTYPE: 'C.UTF-8',
    TZ: 'UTC',
    TMPDIR: '/tmp/u',
    SVC_MASTER_KEY: 'k',
    SVC_DATA_DIR: '/d',
    DATABASE_URL: 'postgres://x',
    OPENAI_API_KEY: 'sk-x',
    USER: 'u',
    SSH_AUTH_SOCK: '/run/agent',
    NODE_OPTIONS: '--inspect',
  };

  it('passes PATH, HOME, the locale, TZ and TMPDIR of svc and nothing else of it', () => {
    expect(minimalEnv({}, parent)).toEqual({ PATH: '/usr/bin', HOME: '/home/u', LANG: 'en_GB.UTF-8', LC_CTYPE: 'C.UTF-8', TZ: 'UTC', TMPDIR: '/tmp/u' });
  });

  it('puts the instance\'s own variables over them, skipping names no environment can hold', () => {
    const env = minimalEnv({ PATH: '/opt/bin', API_KEY: 'v', 'A=B': 'x', '': 'y', NUL: 'a\0b' }, parent);
    expect(env).toMatchObject({ PATH: '/opt/bin', API_KEY: 'v' });
    expect(Object.keys(env)).not.toContain('A=B');
    expect(Object.keys(env)).not.toContain('');
    expect(Object.keys(env)).not.toContain('NUL');
  });

  it('has a PATH and a HOME when svc runs with none', () => {
    const env = minimalEnv({}, {});
    expect(env.PATH).toBe(FALLBACK_PATH);
    expect(env.HOME).toBeTruthy();
  });
});
