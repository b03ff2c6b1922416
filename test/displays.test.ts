/**
 * What a person reads on a terminal and a page, and what a script reads piped: a held call's
 * arguments in full where the person decides, times as people read them (ISO for scripts), one
 * name for an app everywhere, ids that fit an 80-column table, and OpenAI's answer for a /v1 URL
 * svc does not serve.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, runSvcInProcess } from './helpers/cli.js';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { startRiskyServer } from './helpers/risky-mcp.js';
import { startUpstream } from './helpers/upstream.js';
import { eventually } from './helpers/wait.js';

const ISO = /\d{4}-\d\d-\d\dT\d\d:\d\d/;

describe('displays', () => {
  let d: TestDaemon;
  let admin: Api;
  let risky: Awaited<ReturnType<typeof startRiskyServer>>;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let instance: string;
  let key: string;
  let keyId: string;
  let grantId: string;
  const env = () => cleanEnv({ SVC_HOME: d.dataDir });
  const piped = (...args: string[]) => runSvcInProcess(args, { env: env() });
  const onTerminal = (columns: number, ...args: string[]) => runSvcInProcess(args, { env: env(), tty: { columns } });
  const bearer = () => ({ Authorization: `Bearer ${key}` });

  beforeAll(async () => {
    risky = await startRiskyServer();
    upstream = await startUpstream();
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, notify: false } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    expect((await admin.post('/svc/v1/providers', { name: 'local', base_url: upstream.url })).status).toBe(201);
    instance = (await admin.post('/svc/v1/mcps', { name: 'notes', url: risky.url })).body.instance.id;
    const created = await admin.post('/svc/v1/keys', { name: 'display key', mcp_servers: [{ url: risky.url, instance_ids: [instance] }] });
    expect(created.status, created.text).toBe(201);
    key = created.body.key;
    keyId = created.body.id ?? created.body.api_key?.id;
    grantId = created.body.access_request_id;
    // one call, so there is activity and a "last used"
    expect((await new Api(d.url).get('/v1/models', bearer())).status).toBe(200);
  }, 60_000);
  afterAll(async () => {
    await d?.stop();
    await risky?.close();
    await upstream?.close();
  });

  it('a held call\'s long arguments: in full piped, `svc calls show` and the page; an 80-column table says how much more and how to see it', async () => {
    const note = `${'harmless '.repeat(70)}AND THEN rm -rf /`;
    const answer = new Api(d.url).post(`/svc/v1/apps/mcps/${instance}/tools/delete_note/execute`, { params: { id: 'n1', note } }, bearer());
    const call = await eventually(async () => ((await admin.get('/svc/v1/calls?status=pending')).body.data as { id: string; tool: string }[]).find((c) => c.tool === 'delete_note'), 'a held delete_note');

    const rows = await piped('calls', 'list');
    expect(rows.exitCode, rows.stderr).toBe(0);
    expect(rows.stdout.split('\n').find((l) => l.startsWith(call.id))).toContain('AND THEN rm -rf /');

    const table = await onTerminal(80, 'calls', 'list');
    const row = table.stdout.split('\n').find((l) => l.startsWith(call.id.slice(0, 8)))!;
    expect(row).toMatch(/… \(\d[\d,]* more characters: svc calls show [0-9a-f]{8}\)$/);

    const shown = await onTerminal(80, 'calls', 'show', call.id.slice(0, 8));
    expect(shown.exitCode, shown.stderr).toBe(0);
    expect(shown.stdout).toContain('AND THEN rm -rf /');
    expect(shown.stdout).toContain('delete_note');
    const json = JSON.parse((await piped('calls', 'show', call.id, '--json')).stdout);
    expect(json).toMatchObject({ id: call.id, arguments: { id: 'n1', note } });

    const page = await admin.get('/ui/calls');
    expect(page.text).toContain('AND THEN rm -rf /');

    expect((await piped('calls', 'deny', call.id)).exitCode).toBe(0);
    await answer;
  });

  it('times: relative on a terminal (svc activity, svc status, the calls page), ISO piped and in --json', async () => {
    const table = await onTerminal(80, 'activity');
    expect(table.exitCode, table.stderr).toBe(0);
    const [, first] = table.stdout.split('\n');
    expect(first).toMatch(/^(just now|\d+ s ago)/);
    expect(table.stdout).not.toMatch(/\d{4}-\d\d…/);
    expect((await piped('activity')).stdout.split('\n')[0]).toMatch(new RegExp(`^${ISO.source}`));

    const status = await onTerminal(100, 'status');
    expect(status.stdout).toMatch(/provider local\s+discovered (just now|\d+ s ago)/);
    expect(status.stdout).not.toMatch(ISO);
    expect(JSON.parse((await piped('status', '--json')).stdout).providers[0].discovered_at).toMatch(ISO);

    const answer = new Api(d.url).post(`/svc/v1/apps/mcps/${instance}/tools/delete_note/execute`, { params: { id: 'n2' } }, bearer());
    const call = await eventually(async () => ((await admin.get('/svc/v1/calls?status=pending')).body.data as { id: string; created_at: string }[])[0], 'a held call');
    const page = await admin.get('/ui/calls');
    expect(page.text).toMatch(new RegExp(`<time datetime="${call.created_at}"[^>]*>(just now|\\d+ s ago)</time>`));
    expect(page.text).not.toContain(`>${call.created_at}<`);
    expect((await piped('calls', 'deny', call.id)).exitCode).toBe(0);
    await answer;
  });

  it('svc activity names the app as every other surface does (API key "display key"), never its raw client id', async () => {
    const table = await onTerminal(200, 'activity');
    expect(table.stdout).toContain('API key "display key"');
    expect(table.stdout).not.toContain('svc-key:');
    expect((await piped('activity')).stdout).toContain('API key "display key"');
    const listed = await admin.get(`/svc/v1/activity?grant=${grantId}`);
    expect(listed.body.data[0]).toMatchObject({ app_client_id: expect.stringMatching(/^svc-key:/), app_name: 'API key "display key"' });
  });

  it('svc keys list fits 80 columns with short ids; piped and --json keep the whole ids', async () => {
    const table = await onTerminal(80, 'keys', 'list');
    expect(table.exitCode, table.stderr).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^ID\s+NAME\s+.*ACCESS REQUEST/);
    for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(80);
    expect(table.stdout).toContain(keyId.slice(0, 8));
    expect(table.stdout).not.toContain(keyId);
    expect((await piped('keys', 'list')).stdout).toContain(`${keyId}\t`);
    expect((await piped('keys', 'list')).stdout).toContain(grantId);
  });

  it('a /v1 URL svc does not serve answers as OpenAI does: 404 invalid_request_error "Invalid URL (METHOD /path)", with a code', async () => {
    for (const [method, path] of [
      ['POST', '/v1/unknown'],
      ['GET', '/v1/unknown'],
      ['POST', '/v1/images/generations'],
    ]) {
      const r = await new Api(d.url).request(method, path, method === 'POST' ? {} : undefined, bearer());
      expect(r.status, `${method} ${path}`).toBe(404);
      expect(r.body.error).toMatchObject({ type: 'invalid_request_error', code: 'unsupported_endpoint' });
      expect(r.body.error.message).toMatch(new RegExp(`^Invalid URL \\(${method} ${path}\\)`));
    }
  });
});
