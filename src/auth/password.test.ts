/** Password hashing: scrypt in a helper process that ends when idle, so its memory goes with it. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../../test/helpers/wait.js';
import * as password from './password.js';

beforeAll(() => password.setScryptIdleMs(300));
afterAll(() => password.setScryptIdleMs(5_000));

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('password hashing', () => {
  it('hashes and verifies in a helper process that ends once idle, and starts again for the next hash', async () => {
    const stored = await password.hashPassword('correct horse battery staple');
    expect(stored).toMatch(/^scrypt\$16384\$8\$1\$[\w-]{22}\$[\w-]{43}$/);
    const pid = password.scryptHelperPid()!;
    expect(pid).toBeGreaterThan(0);
    expect(pid).not.toBe(process.pid);
    expect(await password.verifyPassword('correct horse battery staple', stored)).toBe(true);
    expect(await password.verifyPassword('Correct horse battery staple', stored)).toBe(false);
    // the same passwords in other Unicode forms verify alike (NFC)
    const composed = await password.hashPassword('caf\u00e9');
    expect(await password.verifyPassword('cafe\u0301', composed)).toBe(true);
    await eventually(() => !alive(pid), 'the helper process to end', 5000);
    expect(password.scryptHelperPid()).toBeUndefined();
    expect(await password.verifyPassword('correct horse battery staple', stored)).toBe(true);
    expect(password.scryptHelperPid()).not.toBe(pid);
  });

  it('a helper that dies fails what it held, and the next hash gets a new one', async () => {
    await password.hashPassword('x');
    const pid = password.scryptHelperPid()!;
    // held stopped, it cannot answer before it dies: the one outcome is a failure
    process.kill(pid, 'SIGSTOP');
    const pending = password.hashPassword('y');
    process.kill(pid, 'SIGKILL');
    await expect(pending).rejects.toThrow(/scrypt helper stopped/);
    expect(await password.verifyPassword('z', await password.hashPassword('z'))).toBe(true);
    expect(password.scryptHelperPid()).not.toBe(pid);
  });

  it('a helper that hangs is replaced after the hash timeout: what it owed fails, the next hash works', async () => {
    try {
      // the helper started and answering (its first start on a busy machine may take longer than 300 ms)
      await password.hashPassword('x');
      const pid = password.scryptHelperPid()!;
      password.setScryptHashTimeoutMs(300);
      process.kill(pid, 'SIGSTOP');
      const started = Date.now();
      await expect(password.hashPassword('y')).rejects.toThrow(/did not answer within 300 ms and was replaced/);
      expect(Date.now() - started).toBeLessThan(5000);
      await eventually(() => !alive(pid), 'the helper process to end', 5000);
      // a new helper, with the usual time (one just started on a busy machine may take longer than 300 ms)
      password.setScryptHashTimeoutMs(10_000);
      expect(await password.verifyPassword('z', await password.hashPassword('z'))).toBe(true);
      expect(password.scryptHelperPid()).not.toBe(pid);
    } finally {
      password.setScryptHashTimeoutMs(10_000);
    }
  });

  it('a helper ending for idleness fails nothing of the one that follows it', async () => {
    const stored = await password.hashPassword('p');
    const first = password.scryptHelperPid()!;
    // Held stopped, the idle helper that is let go cannot exit before a login reaches the next one.
    process.kill(first, 'SIGSTOP');
    try {
      await eventually(() => password.scryptHelperPid() === undefined, 'the idle helper to be let go', 5000);
      const next = password.verifyPassword('p', stored);
      expect(password.scryptHelperPid()).not.toBe(first);
      process.kill(first, 'SIGCONT');
      await eventually(() => !alive(first), 'the let-go helper to end', 5000);
      expect(await next).toBe(true);
    } finally {
      if (alive(first)) process.kill(first, 'SIGCONT');
    }
  });

  it('refuses a stored value that is not an svc scrypt hash', async () => {
    expect(await password.verifyPassword('x', 'bcrypt$2b$10$abc')).toBe(false);
    expect(await password.verifyPassword('x', '')).toBe(false);
  });
});
