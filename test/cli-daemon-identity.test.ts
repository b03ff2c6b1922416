import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, runSvcInProcess } from './helpers/cli.js';
import { startTestDaemon, tempDir, type TestDaemon } from './helpers/daemon.js';

/**
 * Issue 16 item 1: the CLI talks only to the daemon of its own data dir. Another data dir's
 * daemon on the port the CLI would try (the default, a --port, a stale daemon.json) is never
 * taken for it, and `svc status` never reports it as running.
 */
describe('the CLI and the daemon of its own data dir', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d.stop());

  const svc = (dataDir: string, args: string[], extra: Record<string, string> = {}) => runSvcInProcess(args, { env: cleanEnv({ SVC_HOME: dataDir, ...extra }) });

  it('control: the daemon’s own data dir reaches it', async () => {
    const status = await svc(d.dataDir, ['status', '--json']);
    expect(status.exitCode, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ running: true, data_dir: d.dataDir, url: d.url });
  });

  it('an empty data dir pointed at that daemon’s port finds no daemon of its own, and says how to start one', async () => {
    const empty = await tempDir();
    const status = await svc(empty, ['status', '--json'], { SVC_PORT: String(d.port) });
    expect(status.exitCode).toBe(1);
    expect(JSON.parse(status.stdout)).toMatchObject({ running: false, data_dir: empty, pid: null });
    expect(status.stderr).toContain(`No svc daemon runs for the data dir ${empty}`);
    expect(status.stderr).toContain('svc serve');
    const list = await svc(empty, ['requests', 'list'], { SVC_PORT: String(d.port) });
    expect(list.exitCode).toBe(1);
    expect(list.stderr).toMatch(/No svc daemon runs for the data dir .*svc serve/);
  });

  it('a stale daemon.json whose port another data dir’s daemon now holds is refused', async () => {
    const stale = await tempDir();
    await writeFile(
      path.join(stale, 'daemon.json'),
      JSON.stringify({ pid: 1, url: d.url, base_url: d.url, version: 'x', key_backend: 'file', started_at: new Date().toISOString(), instance: 'a-daemon-that-is-gone' }),
    );
    const list = await svc(stale, ['requests', 'list']);
    expect(list.exitCode).toBe(1);
    expect(list.stderr).toContain(`the daemon at ${d.url} is another data dir's`);
    const status = await svc(stale, ['status', '--json']);
    expect(JSON.parse(status.stdout).running).toBe(false);
  });
});
