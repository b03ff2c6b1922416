/**
 * A remembered yes ("and this tool for 10 minutes") can be taken back: a change of the tool's
 * choice, or of the instance's default, ends it; it is listed with the grant's tool choices (the
 * API, `svc requests show`), and ended at once through the API or `svc requests tools --forget`.
 * The real daemon, a real MCP SDK server that counts its runs, the REST execute endpoint.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, runSvcInProcess } from './helpers/cli.js';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { startRiskyServer } from './helpers/risky-mcp.js';
import { eventually } from './helpers/wait.js';

describe('remembered approvals end when the choice changes, and can be listed and ended', () => {
  let d: TestDaemon;
  let admin: Api;
  let bob: Api;
  let risky: Awaited<ReturnType<typeof startRiskyServer>>;
  let instance: string;
  const svc = (...args: string[]) => runSvcInProcess(args, { env: cleanEnv({ SVC_HOME: d.dataDir }) });

  beforeAll(async () => {
    risky = await startRiskyServer();
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, notify: false, callApprovalTimeoutS: 30 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    bob = await userApi(d.url, admin, 'bob', 'user');
    instance = (await admin.post('/svc/v1/mcps', { name: 'notes', url: risky.url })).body.instance.id;
  }, 60_000);
  afterAll(async () => {
    await d.stop();
    await risky.close();
  });

  /** A grant of its own (an API key of admin's), and how to call delete_note with it. */
  async function grant() {
    const created = await admin.post('/svc/v1/keys', { name: `key ${Math.random()}`, mcp_servers: [{ url: risky.url, instance_ids: [instance] }] });
    expect(created.status, created.text).toBe(201);
    const id = created.body.access_request_id as string;
    const execute = (tool: string, note: string) =>
      new Api(d.url).post(`/svc/v1/apps/mcps/${instance}/tools/${tool}/execute`, { params: tool === 'touch' ? { path: note } : { id: note } }, { Authorization: `Bearer ${created.body.key}` });
    const pending = (tool: string) =>
      eventually(async () => ((await admin.get('/svc/v1/calls?status=pending')).body.data as { id: string; tool: string; access_request_id: string }[]).find((c) => c.tool === tool && c.access_request_id === id), `a held ${tool}`);
    /** Holds a call of `tool`, approves it remembered for 10 minutes, and sees the next run at once. */
    async function remember(tool = 'delete_note') {
      const first = execute(tool, 'r1');
      const call = await pending(tool);
      expect((await admin.post(`/svc/v1/calls/${call.id}/approve`, { remember_minutes: 10 })).status).toBe(200);
      await first;
      const runs = risky.runs(tool);
      expect((await execute(tool, 'r2')).body.result.isError).toBeFalsy();
      expect(risky.runs(tool)).toBe(runs + 1);
      return call.id;
    }
    /** That the next call of `tool` is held again (it is then denied, and never runs). */
    async function heldAgain(tool = 'delete_note') {
      const runs = risky.runs(tool);
      const answer = execute(tool, 'again');
      const call = await pending(tool);
      expect((await admin.post(`/svc/v1/calls/${call.id}/deny`)).status).toBe(200);
      expect((await answer).body.result.isError).toBe(true);
      expect(risky.runs(tool)).toBe(runs);
    }
    const remembered = async () => ((await admin.get(`/svc/v1/access-requests/${id}/review`)).body.tool_choices[0].remembered as { tool: string; until: string; approved_by: string; call_id: string }[]);
    return { id, remember, heldAgain, remembered };
  }

  it('deny, then ask again: the remembered yes is gone, and the next call is held', async () => {
    const g = await grant();
    await g.remember();
    expect((await admin.put(`/svc/v1/access-requests/${g.id}/tools`, { [instance]: { tools: { delete_note: 'deny' } } })).status).toBe(200);
    expect((await admin.put(`/svc/v1/access-requests/${g.id}/tools`, { [instance]: { tools: { delete_note: 'ask' } } })).status).toBe(200);
    await g.heldAgain();
  });

  it("a change of the instance's default ends them; a choice of another tool does not", async () => {
    const g = await grant();
    await g.remember();
    // another tool's choice: delete_note stays remembered
    expect((await admin.put(`/svc/v1/access-requests/${g.id}/tools`, { [instance]: { tools: { touch: 'allow' } } })).status).toBe(200);
    expect((await g.remembered()).map((r) => r.tool)).toEqual(['delete_note']);
    const put = await admin.put(`/svc/v1/access-requests/${g.id}/tools`, { [instance]: { default: 'ask' } });
    expect(put.body.tool_choices[0].remembered).toEqual([]);
    await g.heldAgain();
  });

  it('they are listed with the tool choices, and ended through the API (the approver or an admin only; bad input is a 400)', async () => {
    const g = await grant();
    const callId = await g.remember();
    const listed = await g.remembered();
    expect(listed).toEqual([{ tool: 'delete_note', until: expect.any(String), approved_by: 'admin', call_id: callId }]);
    expect(Date.parse(listed[0].until)).toBeGreaterThan(Date.now() + 9 * 60_000);
    // another user: no such grant, and nothing ended
    expect((await bob.delete(`/svc/v1/access-requests/${g.id}/remembered`)).status).toBe(404);
    expect(await g.remembered()).toHaveLength(1);
    for (const bad of ['?tool=delete_note', '?tool=a&tool=b&instance_id=x', '?what=1']) {
      const res = await admin.delete(`/svc/v1/access-requests/${g.id}/remembered${bad}`);
      expect(res.status, bad).toBe(400);
      expect(res.body.error.code).toBe('invalid_body');
    }
    expect(await g.remembered()).toHaveLength(1);
    const ended = await admin.delete(`/svc/v1/access-requests/${g.id}/remembered?instance_id=${instance}&tool=delete_note`);
    expect(ended.status, ended.text).toBe(200);
    expect(ended.body.tool_choices[0].remembered).toEqual([]);
    await g.heldAgain();
  });

  it('svc requests show lists them; svc requests tools --forget ends them', async () => {
    const g = await grant();
    await g.remember('delete_note');
    const shown = await svc('requests', 'show', g.id);
    expect(shown.exitCode, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/remembered\s+delete_note\s+runs without asking until/);
    const forgot = await svc('requests', 'tools', g.id.slice(0, 8), '--forget');
    expect(forgot.exitCode, forgot.stderr).toBe(0);
    expect(forgot.stderr).toMatch(/Ended the remembered approvals/);
    expect(await g.remembered()).toEqual([]);
    await g.heldAgain();
  });

  it('the grant\'s tool-choices page lists them, and its Stop remembering button ends one (with the page\'s token only)', async () => {
    const g = await grant();
    await g.remember();
    const page = await admin.get(`/ui/grants/tools?id=${g.id}`);
    expect(page.status).toBe(200);
    expect(page.text).toMatch(/<li data-remembered="delete_note"><code>delete_note<\/code> for <time datetime="[^"]+">\d+ more min<\/time>, approved by admin <button[^>]*name="forget" value="[^"]+:delete_note"/);
    const csrf = /id="forget-form"><input type="hidden" name="_csrf" value="([^"]+)"/.exec(page.text)![1];
    const form = { 'Content-Type': 'application/x-www-form-urlencoded' };
    const body = (token: string) => `_csrf=${encodeURIComponent(token)}&id=${g.id}&forget=${encodeURIComponent(`${instance}:delete_note`)}`;
    // without the page's token nothing ends
    expect((await admin.request('POST', '/ui/grants/tools/forget', body('stale'), form)).status).toBe(403);
    expect(await g.remembered()).toHaveLength(1);
    const done = await admin.request('POST', '/ui/grants/tools/forget', body(csrf), form);
    expect(done.status).toBe(303);
    expect(done.headers.get('location')).toBe(`/ui/grants/tools?id=${g.id}&forgot=1`);
    expect((await admin.get(`/ui/grants/tools?id=${g.id}&forgot=1`)).text).toContain('No longer remembered');
    expect(await g.remembered()).toEqual([]);
    await g.heldAgain();
  });
});
