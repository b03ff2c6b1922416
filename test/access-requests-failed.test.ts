import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { expect, it } from 'vitest';
import { startTestDaemon, tempDir } from './helpers/daemon.js';
import { Api, createBody } from './helpers/http.js';

it('moves a draft that cannot be processed to failed, and the app sees it', async () => {
  const dataDir = await tempDir();
  try {
    let d = await startTestDaemon({ dataDir });
    const password = d.adminPassword;
    const created = await new Api(d.url).post('/svc/v1/apps/request-access', createBody());
    const id = created.body.id as string;
    await d.stop();

    // A record damaged on disk (its envelope lost) is a processing error, not a client mistake.
    const file = path.join(dataDir, 'db.json');
    const db = JSON.parse(await readFile(file, 'utf8'));
    db.access_requests.find((r: { id: string }) => r.id === id).requested = null;
    await writeFile(file, JSON.stringify(db));

    d = await startTestDaemon({ dataDir });
    try {
      const admin = await new Api(d.url).login('admin', password);
      const res = await admin.put(`/svc/v1/access-requests/${id}/approve`, { approved_role: 'scope_user_user' });
      expect(res.status).toBe(500);
      expect(res.body.error).toMatchObject({ type: 'server_error', code: 'processing_failed' });
      const poll = await new Api(d.url).get(`/svc/v1/apps/access-requests/${id}?app_client_id=demo-app`);
      expect(poll.body.status).toBe('failed');
      const again = await admin.post(`/svc/v1/access-requests/${id}/deny`);
      expect(again.status).toBe(409);
      expect(again.body.error.code).toBe('already_processed');
    } finally {
      await d.stop();
    }
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});
