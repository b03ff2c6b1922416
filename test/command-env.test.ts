/**
 * What a command server gets of svc: a minimal environment (never svc's own variables, keys or
 * database URL) and its arguments as they were given, with no shell to read them.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { hostile, session, testSupervisor } from './helpers/command.js';

const SVC_SECRETS: Record<string, string> = {
  SVC_MASTER_KEY: 'svc-master-key-0123456789abcdef',
  SVC_DATA_DIR: '/var/lib/svc-secret-dir',
  SVC_ADMIN_PASSWORD: 'admin-password-value-42',
  DATABASE_URL: 'postgres://svc:db-password-77@127.0.0.1/svc',
  OPENAI_API_KEY: 'sk-openai-key-value-1234567890',
  ANTHROPIC_API_KEY: 'sk-ant-key-value-0987654321',
  AWS_SECRET_ACCESS_KEY: 'aws-secret-value-abcdefgh',
  NODE_OPTIONS: '--max-old-space-size=64',
  LD_PRELOAD: '/nonexistent/preload.so',
};
const saved: Record<string, string | undefined> = {};
const ALLOWED = new Set(['PATH', 'HOME', 'LANG', 'LANGUAGE', 'TZ', 'TMPDIR']);

beforeAll(() => {
  for (const [k, v] of Object.entries({ ...SVC_SECRETS, LC_ALL: 'C.UTF-8', TZ: 'Europe/Paris' })) {
    saved[k] = process.env[k];
    process.env[k] = v;
  }
});
afterAll(() => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanup.map((c) => c()));
  cleanup = [];
});

function supervisor() {
  const t = testSupervisor();
  cleanup.push(t.done);
  return t;
}

describe('command servers: environment and arguments', () => {
  it('a child gets PATH, HOME, locale, TZ and its own variables, and nothing else of svc', async () => {
    const { sup } = supervisor();
    const child = await sup.start('inst', 'k', hostile('echo-env', [], { API_TOKEN: 'instance-own-token-1', SVC_OWN: 'set by the admin' }), []);
    const s = session(child);
    await s.initialize();
    const { env } = (await s.call('env')).result;
    for (const name of Object.keys(env)) {
      expect(ALLOWED.has(name) || name.startsWith('LC_') || name === 'API_TOKEN' || name === 'SVC_OWN', name).toBe(true);
    }
    expect(env).toMatchObject({ PATH: process.env.PATH, HOME: process.env.HOME, LC_ALL: 'C.UTF-8', TZ: 'Europe/Paris', API_TOKEN: 'instance-own-token-1' });
    const dump = JSON.stringify(env);
    for (const [name, value] of Object.entries(SVC_SECRETS)) {
      expect(env[name], name).toBeUndefined();
      expect(dump).not.toContain(value);
    }
  });

  it('arguments reach the child as given: no shell reads ; $() ` | && * ~ or $VAR', async () => {
    const { sup, dir } = supervisor();
    const marker = path.join(dir, 'pwned');
    const args = [`; touch ${marker}`, `$(touch ${marker})`, `\`touch ${marker}\``, `| touch ${marker}`, `&& touch ${marker}`, '*', '~', '$HOME', "it's \"quoted\"", ''];
    const child = await sup.start('inst', 'k', hostile('echo-env', args), []);
    const s = session(child);
    await s.initialize();
    expect((await s.call('env')).result.argv).toEqual(args);
    expect(existsSync(marker)).toBe(false);
  });

  it('a command line with shell syntax in the program is one program name, which does not exist', async () => {
    const { sup, dir } = supervisor();
    const marker = path.join(dir, 'pwned');
    const answer = await sup.tryOnce({ command: `node; touch ${marker}`, args: [], env: {}, cwd: null }, [], 5000);
    expect(answer).toEqual({ ok: false, message: `Cannot run ${JSON.stringify(`node; touch ${marker}`)}: no such command (ENOENT).` });
    expect(existsSync(marker)).toBe(false);
  });
});
