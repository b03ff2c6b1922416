import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, createBody } from './helpers/http.js';

/** A small tmpfs of our own: real ENOSPC and EROFS, as root can have them. */
function mountTmpfs(dir: string, size: string): boolean {
  try {
    mkdirSync(dir, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tmpfs', dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const mountDir = path.join(os.tmpdir(), `svc-faults-${process.pid}`);
const canMount = process.getuid?.() === 0 && mountTmpfs(mountDir, '4m');

describe.skipIf(!canMount)('a full or read-only disk during writes', () => {
  let d: TestDaemon;
  let admin: Api;
  const dataDir = path.join(mountDir, 'data');

  beforeAll(async () => {
    d = await startTestDaemon({ dataDir, config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
  });
  afterAll(async () => {
    await d?.close().catch(() => undefined);
    try {
      execFileSync('umount', [mountDir], { stdio: 'ignore' });
    } catch {
      /* already gone */
    }
    rmSync(mountDir, { recursive: true, force: true });
  });

  const rows = async () => JSON.parse(await readFile(path.join(dataDir, 'db.json'), 'utf8')).access_requests.length as number;

  it('refuses writes with a clear 503 when the disk is full, acknowledges nothing, and recovers', async () => {
    const app = new Api(d.url);
    const ok = await app.post('/svc/v1/apps/request-access', createBody());
    expect(ok.status).toBe(201);
    const before = await rows();

    // fill the disk to the last byte
    const filler = path.join(mountDir, 'filler');
    try {
      writeFileSync(filler, Buffer.alloc(8 * 1024 * 1024));
    } catch {
      /* ENOSPC: the disk is now full, as intended */
    }
    const refused = await app.post('/svc/v1/apps/request-access', createBody());
    expect(refused.status).toBe(503);
    expect(refused.body.error).toMatchObject({ type: 'server_error', code: 'store_unavailable' });
    expect(refused.body.error.message).toMatch(/could not be saved/);
    // not in memory either: the poll of a refused id cannot exist, and the list is unchanged
    const listed = await admin.get('/svc/v1/access-requests');
    expect(listed.body.data.length).toBe(before);
    const approve = await admin.put(`/svc/v1/access-requests/${ok.body.id}/approve`, { approved_role: 'scope_user_user' });
    expect(approve.status).toBe(503);
    expect((await new Api(d.url).get(`/svc/v1/apps/access-requests/${ok.body.id}?app_client_id=demo-app`)).body.status).toBe('draft');
    expect((await app.get('/svc/v1/health')).status).toBe(200);

    rmSync(filler);
    const again = await app.post('/svc/v1/apps/request-access', createBody());
    expect(again.status).toBe(201);
    expect(await rows()).toBe(before + 1);
    expect(JSON.parse(await readFile(path.join(dataDir, 'db.json'), 'utf8')).access_requests.some((r: { id: string }) => r.id === again.body.id)).toBe(true);
  });

  it('refuses writes on a read-only data dir and serves reads', async () => {
    execFileSync('mount', ['-o', 'remount,ro', mountDir]);
    try {
      const app = new Api(d.url);
      const refused = await app.post('/svc/v1/apps/request-access', createBody());
      expect(refused.status).toBe(503);
      expect(refused.body.error.code).toBe('store_unavailable');
      const list = await admin.get('/svc/v1/access-requests');
      expect(list.status).toBe(200);
    } finally {
      execFileSync('mount', ['-o', 'remount,rw', mountDir]);
    }
    const ok = await new Api(d.url).post('/svc/v1/apps/request-access', createBody());
    expect(ok.status).toBe(201);
  });

  it('after a restart holds exactly the acknowledged writes', async () => {
    const acknowledged = (await admin.get('/svc/v1/access-requests')).body.data.map((r: { id: string }) => r.id).sort();
    const password = d.adminPassword;
    await d.close();
    d = await startTestDaemon({ dataDir });
    admin = await new Api(d.url).login('admin', password);
    const after = (await admin.get('/svc/v1/access-requests')).body.data.map((r: { id: string }) => r.id).sort();
    expect(after).toEqual(acknowledged);
  });
});
