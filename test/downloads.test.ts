import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, tempDir, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { eventually } from './helpers/wait.js';

const FILE = randomBytes(3 * 1024 * 1024);
const SHA = createHash('sha256').update(FILE).digest('hex');

/** A loopback file server with Range support; it can cut the first transfer short or trickle. */
async function fileServer() {
  const ranges: (string | undefined)[] = [];
  const state = { breakAfter: 0, trickle: false };
  const server = http.createServer(async (req, res) => {
    ranges.push(req.headers.range);
    const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    const start = m ? Number(m[1]) : 0;
    const body = FILE.subarray(start);
    res.writeHead(m ? 206 : 200, {
      'Content-Length': body.length,
      'Accept-Ranges': 'bytes',
      ...(m ? { 'Content-Range': `bytes ${start}-${FILE.length - 1}/${FILE.length}` } : {}),
    });
    if (state.breakAfter) {
      const cut = state.breakAfter;
      state.breakAfter = 0;
      res.write(body.subarray(0, cut), () => res.socket?.destroy());
      return;
    }
    if (state.trickle) {
      for (let at = 0; at < body.length && !res.destroyed; at += 64 * 1024) {
        res.write(body.subarray(at, at + 64 * 1024));
        await new Promise((r) => setTimeout(r, 25));
      }
      res.end();
      return;
    }
    res.end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { base, ranges, state, close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }) };
}

async function waitFor(api: Api, id: string, statuses = ['done', 'failed']) {
  for (let i = 0; i < 400; i++) {
    const res = await api.get(`/svc/v1/models/files/pull/${id}`);
    if (statuses.includes(res.body.status)) return res.body;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('download did not finish');
}

describe('model file downloads', () => {
  let d: TestDaemon;
  let files: Awaited<ReturnType<typeof fileServer>>;
  let admin: Api;
  const dataDir = { path: '' };

  beforeAll(async () => {
    dataDir.path = await tempDir();
    files = await fileServer();
    d = await startTestDaemon({ dataDir: dataDir.path });
    admin = await new Api(d.url).login('admin', d.adminPassword);
  });
  afterAll(async () => {
    await d.stop();
    await files.close();
  });

  it('downloads into <data-dir>/models and verifies the checksum', async () => {
    const res = await admin.post('/svc/v1/models/files/pull', { url: `${files.base}/m/tiny.gguf`, sha256: SHA });
    expect(res.status).toBe(202);
    expect(res.headers.get('location')).toBe(`/svc/v1/models/files/pull/${res.body.id}`);
    const job = await waitFor(admin, res.body.id);
    expect(job).toMatchObject({ status: 'done', filename: 'tiny.gguf', sha256: SHA, bytes_done: FILE.length, bytes_total: FILE.length });
    expect((await readFile(path.join(d.dataDir, 'models', 'tiny.gguf'))).equals(FILE)).toBe(true);
    const again = await admin.post('/svc/v1/models/files/pull', { url: `${files.base}/m/tiny.gguf` });
    expect(again.status).toBe(409);
  });

  it('fails on a checksum mismatch and keeps nothing', async () => {
    const res = await admin.post('/svc/v1/models/files/pull', { url: `${files.base}/m/x`, filename: 'bad.bin', sha256: '0'.repeat(64) });
    const job = await waitFor(admin, res.body.id);
    expect(job.status).toBe('failed');
    expect(job.error).toMatch(/checksum mismatch/);
    await expect(stat(path.join(d.dataDir, 'models', 'bad.bin'))).rejects.toThrow();
    await expect(stat(path.join(d.dataDir, 'models', 'bad.bin.part'))).rejects.toThrow();
  });

  it('resumes with a Range request after the transfer broke off', async () => {
    files.state.breakAfter = 1024 * 1024;
    const first = await admin.post('/svc/v1/models/files/pull', { url: `${files.base}/m/resume.bin`, sha256: SHA });
    expect((await waitFor(admin, first.body.id)).status).toBe('failed');
    const before = files.ranges.length;
    const second = await admin.post('/svc/v1/models/files/pull', { url: `${files.base}/m/resume.bin`, sha256: SHA });
    const job = await waitFor(admin, second.body.id);
    expect(job.status).toBe('done');
    expect(files.ranges.slice(before)[0]).toMatch(/^bytes=\d+-$/);
    expect((await readFile(path.join(d.dataDir, 'models', 'resume.bin'))).equals(FILE)).toBe(true);
  });

  it('resumes after a daemon restart', async () => {
    files.state.trickle = true;
    const started = await admin.post('/svc/v1/models/files/pull', { url: `${files.base}/m/restart.bin`, sha256: SHA });
    await waitFor(admin, started.body.id, ['downloading']);
    const part = path.join(d.dataDir, 'models', 'restart.bin.part');
    await eventually(async () => (await stat(part).then((s) => s.size, () => 0)) > 256 * 1024, 'over 256 KiB of restart.bin.part on disk');
    const adminPassword = d.adminPassword;
    await d.close();
    files.state.trickle = false;
    const before = files.ranges.length;
    d = await startTestDaemon({ dataDir: dataDir.path });
    admin = await new Api(d.url).login('admin', adminPassword);
    const job = await waitFor(admin, started.body.id);
    expect(job.status).toBe('done');
    expect(files.ranges.slice(before)[0]).toMatch(/^bytes=\d+-$/);
    expect((await readFile(path.join(d.dataDir, 'models', 'restart.bin'))).equals(FILE)).toBe(true);
  });

  it('refuses file names that would leave the models folder', async () => {
    for (const filename of ['../evil', '.hidden', 'a/b', 'a\\b', '..', 'x.part']) {
      const res = await admin.post('/svc/v1/models/files/pull', { url: `${files.base}/m/ok.bin`, filename });
      expect(res.status, filename).toBe(400);
      expect(res.body.error.code).toBe('invalid_body');
    }
    const fromUrl = await admin.post('/svc/v1/models/files/pull', { url: `${files.base}/m/..%2F..%2Fescape` });
    expect(fromUrl.status).toBe(400);
  });

  it('is for power users only', async () => {
    const plain = await userApi(d.url, admin, `u${Date.now()}`, 'user');
    const res = await plain.post('/svc/v1/models/files/pull', { url: `${files.base}/m/no.bin` });
    expect(res.status).toBe(403);
  });

  it('svc models pull shows progress as plain lines when piped', async () => {
    const cli = await execa('node', ['bin/svc.js', '--data-dir', d.dataDir, 'models', 'pull', `${files.base}/m/cli.bin`, '--sha256', SHA], { reject: false, env: { SVC_KEYCHAIN: 'file' } });
    expect(cli.exitCode).toBe(0);
    expect(cli.stderr).toMatch(/cli\.bin .*done/);
    expect(cli.stderr).toContain(`sha256 ${SHA}`);
  });
});
