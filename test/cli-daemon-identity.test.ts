import { chmod, mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, runSvc, runSvcInProcess, startServe } from './helpers/cli.js';
import { startTestDaemon, tempDir, type TestDaemon } from './helpers/daemon.js';
import { eventually } from './helpers/wait.js';
import { checkPrivateDir, localSocketPlace } from '../src/daemon-info.js';

/**
 * The CLI talks only to the daemon of its own data dir, through the Unix socket in that data dir.
 * Another data dir's daemon on the port the CLI would try (the default, a --port, a stale
 * daemon.json) is never taken for it, and `svc status` never reports it as running.
 */
describe('the CLI and the daemon of its own data dir', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d.stop());

  const svc = (dataDir: string, args: string[], extra: Record<string, string> = {}) => runSvcInProcess(args, { env: cleanEnv({ SVC_HOME: dataDir, ...extra }) });

  it('a command run while its daemon is still starting (the lock held, no daemon.json yet) waits, says so once, then answers', async () => {
    // A daemon holds its data dir's lock from before it writes daemon.json until after it removes
    // it. Modelled without a gap in the lock: a running daemon whose daemon.json is put aside until
    // the CLI says it waits (after 2 s), then put back. (Releasing a lock the test holds and then
    // starting a daemon leaves a moment when nobody holds it, and a CLI that looks then is right
    // to say that no daemon runs.)
    const dataDir = await tempDir();
    const started = await startTestDaemon({ dataDir });
    const file = path.join(dataDir, 'daemon.json');
    try {
      await rename(file, `${file}.aside`);
      let said = '';
      const status = runSvcInProcess(['status', '--json'], { env: cleanEnv({ SVC_HOME: dataDir }), onErr: (t) => void (said += t) });
      await eventually(() => said.includes('is still starting'), 'the CLI to say it waits for the starting daemon', 10_000);
      await rename(`${file}.aside`, file);
      const answered = await status;
      expect(answered.exitCode, answered.stderr).toBe(0);
      expect(JSON.parse(answered.stdout)).toMatchObject({ running: true, data_dir: dataDir, url: started.url });
      expect(answered.stderr.match(/is still starting; waiting for it \(up to a minute\)/g)).toHaveLength(1);
    } finally {
      await started.stop();
    }
  });

  it('control: the daemon’s own data dir reaches it', async () => {
    const status = await svc(d.dataDir, ['status', '--json']);
    expect(status.exitCode, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ running: true, data_dir: d.dataDir, url: d.url });
  });

  it('a --port that is not the daemon’s still finds it, and status says where it runs', async () => {
    const status = await svc(d.dataDir, ['--port', '1', 'status', '--json']);
    expect(status.exitCode, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ running: true, url: d.url });
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
      JSON.stringify({ pid: 1, url: d.url, base_url: d.url, version: 'x', key_backend: 'file', started_at: new Date().toISOString(), instance: 'gone', socket: path.join(stale, 'svc.sock') }),
    );
    const list = await svc(stale, ['requests', 'list']);
    expect(list.exitCode).toBe(1);
    expect(list.stderr).toContain(`No svc daemon runs for the data dir ${stale}`);
    const status = await svc(stale, ['status', '--json']);
    expect(JSON.parse(status.stdout).running).toBe(false);
  });

  it('a daemon.json that names a socket outside its data dir is refused', async () => {
    const forged = await tempDir();
    await writeFile(
      path.join(forged, 'daemon.json'),
      JSON.stringify({ pid: 1, url: d.url, base_url: d.url, version: 'x', key_backend: 'file', started_at: new Date().toISOString(), socket: path.join(d.dataDir, 'svc.sock') }),
    );
    const list = await svc(forged, ['requests', 'list']);
    expect(list.exitCode).toBe(1);
    expect(list.stderr).toContain('names a socket outside it');
  });
});

/**
 * A daemon killed uncleanly leaves its daemon.json behind, and another process takes its port. That
 * process must receive nothing of the CLI's: not its session cookie, not a password typed into
 * `svc login`, not a provider key, even when it answers with the dead daemon's instance id.
 */
describe('a squatter on a dead daemon’s port', () => {
  it('gets nothing from the CLI, which says no daemon runs, and the restarted daemon serves the CLI again', async () => {
    const dataDir = await tempDir();
    const env = cleanEnv({ SVC_HOME: dataDir, SVC_KEYCHAIN: 'file' });
    const serve = await startServe(dataDir, env);
    const port = Number(new URL(serve.url).port);
    const info = JSON.parse(await readFile(path.join(dataDir, 'daemon.json'), 'utf8'));
    const before = await runSvc(['requests', 'list', '--json'], { env });
    expect(before.exitCode, before.stderr).toBe(0);

    process.kill(serve.pid, 'SIGKILL');
    await serve.exited;
    const seen: { method?: string; url?: string; headers: http.IncomingHttpHeaders; body: string }[] = [];
    const squatter = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        seen.push({ method: req.method, url: req.url, headers: req.headers, body });
        res.writeHead(200, { 'Content-Type': 'application/json', 'X-Svc-Instance': info.instance });
        res.end('{"data":[],"version":"0.1.0","user":{"username":"admin","role":"admin"}}');
      });
    });
    await new Promise<void>((resolve) => squatter.listen(port, '127.0.0.1', resolve));
    try {
      const list = await runSvc(['requests', 'list'], { env });
      expect(list.exitCode).toBe(1);
      expect(list.stderr).toContain(`No svc daemon runs for the data dir ${dataDir}`);
      const login = await runSvc(['login', '--username', 'admin', '--password-stdin'], { env, input: 'a-password-typed-by-the-person' });
      expect(login.exitCode).toBe(1);
      const key = await runSvc(['providers', 'add', 'remote', '--base-url', 'http://127.0.0.1:9/v1', '--api-key-stdin'], { env, input: 'sk-provider-key-secret' });
      expect(key.exitCode).toBe(1);
      const status = await runSvc(['status', '--json'], { env });
      expect(JSON.parse(status.stdout).running).toBe(false);
      expect(seen).toEqual([]);
    } finally {
      await new Promise<void>((resolve) => squatter.close(() => resolve()));
    }

    // the person starts svc again (the port was taken: another one) and the CLI is back
    const again = await startServe(dataDir, env);
    try {
      const list = await runSvc(['requests', 'list', '--json'], { env });
      expect(list.exitCode, list.stderr).toBe(0);
    } finally {
      await again.stop();
    }
  });
});

describe('where the socket lives', () => {
  it('a data dir too deep for a socket path puts it in a private folder of the user, and the CLI finds it there', async () => {
    const deep = path.join(await tempDir(), 'a'.repeat(60), 'b'.repeat(60));
    await mkdir(deep, { recursive: true });
    const place = localSocketPlace(deep, {});
    expect(place.path.startsWith(deep)).toBe(false);
    const d = await startTestDaemon({ dataDir: deep });
    try {
      const info = JSON.parse(await readFile(path.join(deep, 'daemon.json'), 'utf8'));
      expect(info.socket).toBe(place.path);
      expect((await stat(path.dirname(info.socket))).mode & 0o777).toBe(0o700);
      const status = await runSvcInProcess(['status', '--json'], { env: cleanEnv({ SVC_HOME: deep }) });
      expect(status.exitCode, status.stderr).toBe(0);
      expect(JSON.parse(status.stdout)).toMatchObject({ running: true, url: d.url });
    } finally {
      await d.stop();
    }
  });

  it('refuses a socket folder that other users can open', async () => {
    const open = await tempDir();
    await chmod(open, 0o777);
    await expect(checkPrivateDir(open)).rejects.toThrow(/can be opened by other users/);
    await chmod(open, 0o700);
    await expect(checkPrivateDir(open)).resolves.toBeUndefined();
  });
});
