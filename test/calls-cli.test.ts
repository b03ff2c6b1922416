/**
 * `svc calls` and `svc requests tools` / `show` against the real daemon (the CLI's commands run
 * in-process over the data dir's socket, logged in as admin by the first start).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTROL_BYTES, cleanEnv, runSvcInProcess } from './helpers/cli.js';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { startRiskyServer } from './helpers/risky-mcp.js';
import { eventually } from './helpers/wait.js';

describe('svc calls and svc requests tools', () => {
  let d: TestDaemon;
  let admin: Api;
  let risky: Awaited<ReturnType<typeof startRiskyServer>>;
  let instance: string;
  let grantId: string;
  let key: string;
  const svc = (...args: string[]) => runSvcInProcess(args, { env: cleanEnv({ SVC_HOME: d.dataDir }) });
  const execute = (tool: string, params: Record<string, unknown>) =>
    new Api(d.url).post(`/svc/v1/apps/mcps/${instance}/tools/${tool}/execute`, { params }, { Authorization: `Bearer ${key}` });
  const pending = (tool: string) =>
    eventually(async () => ((await admin.get('/svc/v1/calls?status=pending')).body.data as { id: string; tool: string }[]).find((c) => c.tool === tool), `a held ${tool}`);

  beforeAll(async () => {
    risky = await startRiskyServer();
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, notify: false } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    instance = (await admin.post('/svc/v1/mcps', { name: 'notes', url: risky.url })).body.instance.id;
    const created = await admin.post('/svc/v1/keys', { name: 'cli key', mcp_servers: [{ url: risky.url, instance_ids: [instance] }] });
    expect(created.status, created.text).toBe(201);
    key = created.body.key;
    grantId = created.body.access_request_id ?? (await admin.get('/svc/v1/access-requests?status=approved')).body.data[0].id;
  }, 60_000);
  afterAll(async () => {
    await d.stop();
    await risky.close();
  });

  it('lists a held call with its arguments (invisible characters shown as escapes), approves it by a short id, remembering it for 10 minutes', async () => {
    const before = risky.runs('delete_note');
    const answer = execute('delete_note', { id: 'c1', note: 'a\u202eb\u0007' });
    const call = await pending('delete_note');
    const listed = await svc('calls', 'list');
    expect(listed.exitCode, listed.stderr).toBe(0);
    const row = listed.stdout.split('\n').find((l) => l.startsWith(call.id))!;
    expect(row.split('\t').slice(1, 5)).toEqual(['pending', 'API key "cli key"', 'delete_note', 'notes']);
    expect(row).toContain('\\u202e');
    expect(row).not.toMatch(CONTROL_BYTES);
    expect(row).not.toContain('\u202e');
    const json = JSON.parse((await svc('calls', 'list', '--json')).stdout);
    expect(json[0]).toMatchObject({ id: call.id, arguments: { id: 'c1', note: 'a\u202eb\u0007' } });

    const approved = await svc('calls', 'approve', call.id.slice(0, 8), '--for', '10m');
    expect(approved.exitCode, approved.stderr).toBe(0);
    expect(approved.stderr).toMatch(/Approved delete_note .*runs without asking until/);
    expect((await answer).body.result.content).toEqual([{ type: 'text', text: 'deleted c1' }]);
    expect(risky.runs('delete_note')).toBe(before + 1);
    // remembered: the next one runs at once
    expect((await execute('delete_note', { id: 'c2' })).body.result.content).toEqual([{ type: 'text', text: 'deleted c2' }]);
    // a second decision is refused, with the CLI's usual exit code for a conflict
    const again = await svc('calls', 'deny', call.id);
    expect(again.exitCode).toBe(1);
    expect(again.stderr).toMatch(/already approved/);
    expect((await svc('calls', 'approve', call.id, '--for', 'forever')).exitCode).toBe(2);
  });

  it('svc calls deny: the call does not run and the app is told', async () => {
    expect((await svc('requests', 'tools', grantId, '--instance', instance.slice(0, 8), '--ask', 'touch')).exitCode).toBe(0);
    const before = risky.runs('touch');
    const answer = execute('touch', { path: '/etc' });
    const call = await pending('touch');
    const denied = await svc('calls', 'deny', call.id.slice(0, 6));
    expect(denied.exitCode, denied.stderr).toBe(0);
    expect(denied.stderr).toMatch(/Denied touch/);
    expect((await answer).body.result.isError).toBe(true);
    expect(risky.runs('touch')).toBe(before);
  });

  it('svc requests tools sets choices (and shows them); svc requests show lists a draft\'s tools with annotations and defaults', async () => {
    const set = await svc('requests', 'tools', grantId.slice(0, 8), '--instance', instance.slice(0, 8), '--deny', 'read_notes', '--allow', 'delete_note', '--json');
    expect(set.exitCode, set.stderr).toBe(0);
    const choices = JSON.parse(set.stdout);
    expect(choices[0]).toMatchObject({ instance_id: instance, choices: { read_notes: 'deny', delete_note: 'allow' } });
    const shown = await svc('requests', 'tools', grantId);
    expect(shown.stdout).toMatch(/tool\tread_notes {2}deny \(default allow\) {2}\[read-only\]/);
    expect(shown.stdout).toMatch(/tool\tdelete_note {2}allow \(default ask\) {2}\[destructive\]/);
    const refused = await execute('read_notes', {});
    expect(refused.status).toBe(403);
    expect((await svc('requests', 'tools', grantId, '--instance', instance, '--reset', 'read_notes', '--reset', 'delete_note', '--reset', 'touch')).exitCode).toBe(0);
    expect((await svc('requests', 'tools', grantId, '--deny', 'x')).exitCode).toBe(2);
    expect((await svc('requests', 'tools', grantId, '--instance', instance, '--deny', 'x', '--allow', 'x')).exitCode).toBe(2);

    const draft = await new Api(d.url).post('/svc/v1/apps/request-access', {
      app_client_id: 'cli-app',
      flow_type: 'popup',
      requested_role: 'scope_user_user',
      requested: { version: '1', mcp_servers: [{ url: risky.url }] },
    });
    const show = await svc('requests', 'show', draft.body.id);
    expect(show.exitCode, show.stderr).toBe(0);
    expect(show.stdout).toMatch(/tool\tread_notes {2}allow \(default\) {2}\[read-only\]/);
    expect(show.stdout).toMatch(/tool\tdelete_note {2}ask \(default\) {2}\[destructive\]/);
    expect(show.stdout).toMatch(/tool\ttouch {2}allow \(default\)$/m);
    const approvedShow = JSON.parse((await svc('requests', 'show', grantId, '--json')).stdout);
    expect(approvedShow.tool_choices[0]).toMatchObject({ instance_id: instance, tools_known: true });
    expect(approvedShow.tool_choices[0].tools.map((t: { name: string }) => t.name).sort()).toEqual(['delete_note', 'read_notes', 'touch']);
  });
});
