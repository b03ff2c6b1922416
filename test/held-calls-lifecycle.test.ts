/**
 * Held calls over time: one nobody answers expires (and the app is told so), one held when the
 * daemon stops is never run (not then, not after the next start), and the person hears of held
 * calls and new access requests through the desktop's notifier (here a recording `notify-send`
 * on the PATH).
 */
import { chmod, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../src/config.js';
import { startTestDaemon, tempDir, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { registerClient } from './helpers/oauth.js';
import { startRiskyServer } from './helpers/risky-mcp.js';
import { eventually } from './helpers/wait.js';

let risky: Awaited<ReturnType<typeof startRiskyServer>>;
let bin: string;
let notified: string;

const pathBefore = process.env.PATH;
beforeAll(async () => {
  risky = await startRiskyServer();
  // a notify-send that writes down each notification, one line of arguments each, first on the PATH
  bin = await tempDir('svc-notify-');
  notified = path.join(bin, 'notified.txt');
  await writeFile(notified, '');
  await writeFile(path.join(bin, 'notify-send'), `#!/bin/sh\nprintf '%s|' "$@" | tr '\\n' ' ' >> '${notified}'\nprintf '\\n' >> '${notified}'\n`);
  await chmod(path.join(bin, 'notify-send'), 0o755);
  process.env.PATH = `${bin}${path.delimiter}${pathBefore}`;
});
afterAll(async () => {
  // the test files after this one in the same worker (vitest.config.ts) get the PATH they had
  process.env.PATH = pathBefore;
  await risky.close();
});

/** A daemon, alice with an instance of the risky server, and an API key of hers granting it (no tool choices set). */
async function setup(config: Parameters<typeof startTestDaemon>[0] = {}) {
  const d = await startTestDaemon({ ...config, config: { rateLimitClient: 0, rateLimitAddress: 0, ...config.config } });
  const admin = await new Api(d.url).login('admin', d.adminPassword);
  const alice = await userApi(d.url, admin, 'alice', 'user');
  const instance = (await alice.post('/svc/v1/mcps', { name: 'notes', url: risky.url })).body.instance.id as string;
  const key = await alice.post('/svc/v1/keys', { name: 'notes key', mcp_servers: [{ url: risky.url, instance_ids: [instance] }] });
  expect(key.status, key.text).toBe(201);
  const execute = (id: string, signal?: AbortSignal) =>
    fetch(`${d.url}/svc/v1/apps/mcps/${instance}/tools/delete_note/execute`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key.body.key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ params: { id } }),
      signal,
    });
  return { d, admin, alice, instance, execute };
}

const pendingOf = (who: Api) =>
  eventually(async () => ((await who.get('/svc/v1/calls?status=pending')).body.data as { id: string }[])[0], 'a held call');

describe('held calls over time', () => {
  let d: TestDaemon | undefined;
  afterAll(async () => {
    await d?.stop();
  });

  it('nobody answers within the timeout: the app gets a result saying so, the call is expired, and it never runs', async () => {
    const s = await setup({ config: { callApprovalTimeoutS: 1, notify: false } });
    d = s.d;
    const before = risky.runs('delete_note');
    const answer = s.execute('e1');
    const call = await pendingOf(s.alice);
    const res = await answer;
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.result.isError).toBe(true);
    expect(JSON.stringify(body.result.content)).toMatch(/Nobody answered/);
    const expired = (await s.alice.get('/svc/v1/calls?status=expired')).body.data;
    expect(expired.map((c: { id: string }) => c.id)).toEqual([call.id]);
    expect(expired[0].waited_ms).toBeGreaterThanOrEqual(900);
    const late = await s.alice.post(`/svc/v1/calls/${call.id}/approve`, {});
    expect(late.status).toBe(409);
    expect(late.body.error.code).toBe('not_pending');
    expect(risky.runs('delete_note')).toBe(before);
    const event = await eventually(async () => ((await s.alice.get('/svc/v1/activity')).body.data as { reason?: string }[]).find((e) => e.reason === 'call_expired'), 'the activity event');
    expect(event).toMatchObject({ kind: 'mcp', mcp_method: 'tools/call', tool: 'delete_note', outcome: 'refused' });
    // this daemon notifies nobody (notify off): no notification links to it
    expect(await readFile(notified, 'utf8')).not.toContain(s.d.url);
  });

  it('a call held when the daemon stops is answered as not run, and the next start never runs it', async () => {
    const dataDir = await tempDir();
    const first = await setup({ dataDir, config: { notify: false } });
    const before = risky.runs('delete_note');
    const answer = first.execute('restart-1').then(
      async (r) => ({ status: r.status, body: await r.text() }),
      (err: Error) => ({ status: 0, body: err.message }),
    );
    const call = await pendingOf(first.alice);
    await first.d.close();
    const got = await answer;
    // told at once that it did not run (or cut off with the connection): never the upstream's answer
    expect(got.body).not.toContain('deleted restart-1');
    if (got.status === 200) expect(got.body).toMatch(/did not run/);
    expect(risky.runs('delete_note')).toBe(before);

    const second = await startTestDaemon({ dataDir, config: { notify: false } });
    d = second;
    try {
      const alice = await new Api(second.url).login('alice', 'pw-alice-12345');
      expect((await alice.get('/svc/v1/calls')).body.data).toEqual([]);
      expect((await alice.post(`/svc/v1/calls/${call.id}/approve`, {})).status).toBe(404);
      expect(risky.runs('delete_note')).toBe(before);
    } finally {
      await second.stop();
      d = undefined;
    }
  });

  it('the desktop notifier names the app and the tool and links to /ui/calls; a new access request is announced too', async () => {
    const s = await setup();
    d = s.d;
    const { clientId } = await registerClient(s.admin, { name: 'Evil <b>App</b>' });
    const answer = s.execute('n1');
    const call = await pendingOf(s.alice);
    const line = await eventually(async () => (await readFile(notified, 'utf8')).split('\n').find((l) => l.includes('delete_note')), 'a notification of the held call');
    expect(line).toContain('notes key');
    expect(line).toContain(`${s.d.url}/ui/calls`);
    await s.alice.post(`/svc/v1/calls/${call.id}/deny`);
    await answer;

    const created = await new Api(s.d.url).post('/svc/v1/apps/request-access', {
      app_client_id: clientId,
      flow_type: 'popup',
      requested_role: 'scope_user_user',
      requested: { version: '1', mcp_servers: [] },
    });
    const request = await eventually(async () => (await readFile(notified, 'utf8')).split('\n').find((l) => l.includes(created.body.id)), 'a notification of the access request');
    expect(request).toMatch(/asks for access/);
    // the app's name as its own argument (the summary, which notifiers show as plain text)
    expect(request).toContain('svc: Evil <b>App</b> asks for access|');
  });

  it('--no-notify and SVC_NOTIFY=0 turn notifications off; the approval timeout is 55 s unless set', () => {
    expect(resolveConfig({}, {}).notify).toBe(true);
    expect(resolveConfig({ notify: false }, {}).notify).toBe(false);
    expect(resolveConfig({}, { SVC_NOTIFY: '0' }).notify).toBe(false);
    expect(resolveConfig({}, {}).callApprovalTimeoutS).toBe(55);
    expect(resolveConfig({ callApprovalTimeout: '120' }, {}).callApprovalTimeoutS).toBe(120);
    expect(resolveConfig({}, { SVC_CALL_APPROVAL_TIMEOUT: '9' }).callApprovalTimeoutS).toBe(9);
    expect(() => resolveConfig({}, { SVC_CALL_APPROVAL_TIMEOUT: '0' })).toThrow(/call-approval-timeout/);
  });
});
