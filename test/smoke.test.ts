import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api } from './helpers/http.js';

describe('daemon smoke', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d.stop());

  it('answers health and logs in the first admin', async () => {
    const api = new Api(d.url);
    expect((await api.get('/svc/v1/health')).body).toMatchObject({ status: 'ok' });
    await api.login('admin', d.adminPassword);
    expect((await api.get('/svc/v1/auth/me')).body.user).toMatchObject({ username: 'admin', role: 'admin' });
  });
});
