/**
 * What a person living with svc meets on a terminal and in scripts: one word for a waiting
 * request, `requests show` that shows what applies to the status, times as people read them,
 * copyable values never cut, failures that exit non-zero.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, runSvcInProcess } from './helpers/cli.js';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, createBody } from './helpers/http.js';
import { authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { closedPort } from './helpers/cli.js';
import { DaemonClient } from '../src/cli/client.js';
import { createActions } from '../src/tui/actions.js';
import { daemonReviewClient } from '../src/tui/client.js';

describe('the CLI on the second day', () => {
  let d: TestDaemon;
  let admin: Api;
  beforeAll(async () => {
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
  });
  afterAll(() => d.stop());

  const env = () => cleanEnv({ SVC_HOME: d.dataDir });
  const svc = (args: string[], input?: string) => runSvcInProcess(args, { env: env(), input });
  const onTerminal = (args: string[], columns = 200) => runSvcInProcess(args, { env: env(), tty: { columns } });
  const draft = async (overrides: Record<string, unknown> = {}) => (await new Api(d.url).post('/svc/v1/apps/request-access', createBody(overrides))).body.id as string;
  const fields = (stdout: string) => Object.fromEntries(stdout.split('\n').filter(Boolean).map((l) => l.split('\t')));

  it('`svc status --url` prints just where browsers and apps reach the daemon, whatever its port; nothing and exit 1 with none', async () => {
    const r = await svc(['status', '--url']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toBe(`${d.baseUrl}\n`);
    expect(JSON.parse((await svc(['status', '--json'])).stdout).base_url).toBe(d.baseUrl);
    // and where a new key is used, said with the same URL
    const key = await svc(['keys', 'create', 'where', '--expires', '1h']);
    expect(key.stderr).toContain(`base URL ${d.baseUrl}/v1`);
    const none = await runSvcInProcess(['status', '--url'], { env: cleanEnv({ SVC_HOME: `${d.dataDir}-none` }) });
    expect(none.exitCode).toBe(1);
    expect(none.stdout).toBe('');
    expect(none.stderr).toContain('svc serve');
  });

  it('`--status pending` is draft, in the CLI and in the API', async () => {
    const id = await draft({ app_client_id: 'pending-word' });
    const cli = await svc(['requests', 'list', '--status', 'pending', '--json']);
    expect(cli.exitCode, cli.stderr).toBe(0);
    const listed = JSON.parse(cli.stdout) as { id: string; status: string }[];
    expect(listed.map((r) => r.id)).toContain(id);
    expect(listed.every((r) => r.status === 'draft')).toBe(true);
    const api = await admin.get('/svc/v1/access-requests?status=pending');
    expect(api.status, api.text).toBe(200);
    expect(api.body.data.map((r: { id: string }) => r.id)).toContain(id);
    const help = await svc(['requests', 'list', '--help']);
    expect(help.stdout).toMatch(/pending is draft/);
  });

  it('the home page names the word once: pending (draft)', async () => {
    const home = await admin.get('/ui');
    expect(home.status).toBe(200);
    expect(home.text).toContain('pending (draft)');
  });

  it('requests show: a sign-in waiting shows where it signs in from and its time left; approved, neither an expiry nor svc\'s internal URL', async () => {
    const { clientId } = await registerClient(admin, { name: 'Show App', public: true });
    const config = await oidcConfig(d, clientId);
    let waiting = '';
    let approved = '';
    let id = '';
    const result = await authorize(config, admin, 'scope_user_user', {}, undefined, async (requestId) => {
      id = requestId;
      waiting = (await svc(['requests', 'show', requestId])).stdout;
      const ok = await svc(['requests', 'approve', requestId]);
      expect(ok.exitCode, ok.stderr).toBe(0);
      approved = (await svc(['requests', 'show', requestId])).stdout;
    });
    expect(result.tokens, JSON.stringify(result)).toBeDefined();
    const w = fields(waiting);
    expect(w.status).toBe('draft');
    expect(w['signs in from']).toBe('http://127.0.0.1:65010');
    expect(Date.parse(w.expires)).toBeGreaterThan(Date.now());
    expect(w['you may grant']).toBeDefined();
    expect(waiting).not.toContain('/oauth/interaction');
    const a = fields(approved);
    expect(a.status).toBe('approved');
    expect(a.expires).toBeUndefined();
    expect(a['you may grant']).toBeUndefined();
    expect(a['signs in from']).toBeUndefined();
    expect(approved).not.toContain('/oauth/interaction');
    expect(Date.parse(a.approved)).toBeGreaterThan(0);
    // revoked: when, and still no expiry
    expect((await svc(['requests', 'revoke', id])).exitCode).toBe(0);
    const r = fields((await svc(['requests', 'show', id])).stdout);
    expect(r.status).toBe('revoked');
    expect(Date.parse(r.revoked)).toBeGreaterThan(0);
    expect(r.expires).toBeUndefined();
  });

  it('times read as people read them on a terminal, ISO when piped and in --json', async () => {
    const id = await draft({ app_client_id: 'times' });
    const tty = await onTerminal(['requests', 'list']);
    const row = tty.stdout.split('\n').find((l) => l.startsWith(id.slice(0, 8)))!;
    expect(row).toMatch(/just now|\d+ s ago/);
    expect(row).not.toMatch(/\d{4}-\d{2}-\d{2}T/);
    const shown = await onTerminal(['requests', 'show', id]);
    expect(shown.stdout).toMatch(/expires\s+in \d+m\d\ds/);
    const piped = await svc(['requests', 'list']);
    expect(piped.stdout.split('\n').find((l) => l.startsWith(id))!.split('\t')[6]).toMatch(/^\d{4}-\d{2}-\d{2}T.*Z$/);
    const json = JSON.parse((await svc(['requests', 'list', '--json'])).stdout) as { id: string; created_at: string }[];
    expect(json.find((r) => r.id === id)!.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    const users = await onTerminal(['users', 'list']);
    expect(users.stdout).toMatch(/admin\s+admin\s+\S+\s+(just now|\d+ (s|min) ago)/);
  });

  it('a narrow terminal cuts the descriptive columns, never the id or the URLs to copy', async () => {
    const url = 'http://127.0.0.1:3001/a/rather/long/path/to/an/mcp/server';
    const id = (await admin.post('/svc/v1/mcps', { name: 'a-name-that-is-long-enough-to-cut', url })).body.instance.id as string;
    const r = await onTerminal(['mcp', 'list'], 80);
    expect(r.exitCode, r.stderr).toBe(0);
    const row = r.stdout.split('\n').find((l) => l.startsWith(id.slice(0, 8)))!;
    expect(row).toContain(`${d.url}/svc/v1/apps/mcps/${id}/mcp`);
    expect(row).toContain(url);
    expect(row).toContain('…'); // the name gave way
  });

  it('clients add prints just the client id when piped; its --json is one flat object, as keys create --json is', async () => {
    const piped = await svc(['clients', 'add', 'Piped App', '--redirect-uri', 'http://127.0.0.1:5173/callback', '--public']);
    expect(piped.exitCode, piped.stderr).toBe(0);
    expect(piped.stdout).toMatch(/^svc-[\w-]+\n$/);
    const confidential = await svc(['clients', 'add', 'Secret App', '--redirect-uri', 'http://127.0.0.1:5173/callback']);
    expect(confidential.stdout).toMatch(/^svc-[\w-]+\n$/);
    expect(confidential.stderr).toMatch(/client_secret: \S{20,}/); // still shown to the person, once
    const client = JSON.parse((await svc(['clients', 'add', 'Json App', '--redirect-uri', 'http://127.0.0.1:5173/callback', '--json'])).stdout);
    const key = JSON.parse((await svc(['keys', 'create', 'json-shape', '--json'])).stdout);
    // the record's fields and the one-time secret side by side, nothing nested
    expect(client).toMatchObject({ client_id: expect.stringMatching(/^svc-/), name: 'Json App', client_secret: expect.any(String) });
    expect(key).toMatchObject({ id: expect.any(String), name: 'json-shape', key: expect.stringMatching(/^svc_/) });
    for (const value of [client, key]) expect(Object.values(value).filter((v) => v !== null && typeof v === 'object' && !Array.isArray(v))).toEqual([]);
  });

  it('providers refresh of a provider that does not answer exits 1 and says why', async () => {
    const add = await svc(['providers', 'add', 'gone', '--base-url', `http://127.0.0.1:${await closedPort()}/v1`]);
    expect(add.exitCode, add.stderr).toBe(0); // an offline provider may be added
    const refresh = await svc(['providers', 'refresh', 'gone']);
    expect(refresh.exitCode).toBe(1);
    expect(refresh.stderr).toMatch(/discovery failed/);
    const json = await svc(['providers', 'refresh', 'gone', '--json']);
    expect(json.exitCode).toBe(1);
    expect(JSON.parse(json.stdout).discovery_error).toBeTruthy();
  });
});

describe('a long-lived command (svc review) when the CLI\'s login is replaced', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d.stop());

  it('follows the new login after `svc users passwd` and `svc login`, and says it is logged out in between', async () => {
    const env = cleanEnv({ SVC_HOME: d.dataDir });
    const svc = (args: string[], input?: string) => runSvcInProcess(args, { env, input });
    // the client `svc review` holds for its whole run
    const client = await DaemonClient.connect({}, env);
    const review = daemonReviewClient(client);
    expect((await client.request<{ user: { username: string } }>('GET', '/svc/v1/auth/me')).body.user.username).toBe('admin');
    await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ app_client_id: 'while-reviewing' }));
    expect((await review.listPending()).map((r) => r.app_client_id)).toContain('while-reviewing');

    // a new password ends every session of the account, the CLI's among them
    expect((await svc(['users', 'passwd', 'admin', '--password-stdin'], 'a-new-password-1\n')).exitCode).toBe(0);
    const loggedOut = await review.listPending().catch((err: unknown) => err);
    expect((loggedOut as { code?: string }).code).toBe('login_required');
    const ui = createActionsFor(review);
    await ui.actions.refresh();
    expect(ui.failed()).toMatch(/^Not logged in\..* Run `svc login` in another terminal; this screen carries on with the new login\.$/);

    // logged in again: the running review carries on with the new login
    expect((await svc(['login', '--password-stdin'], 'a-new-password-1\n')).exitCode).toBe(0);
    expect((await review.listPending()).map((r) => r.app_client_id)).toContain('while-reviewing');
  });
});

/** The TUI's actions over a review client, with the last list failure they reported. */
function createActionsFor(client: ReturnType<typeof daemonReviewClient>) {
  let failed = '';
  const actions = createActions({
    client,
    dispatch: (a) => {
      if (a.type === 'list-failed') failed = a.message;
    },
    getState: () => ({}) as never,
    clock: Date.now,
    exit: () => undefined,
  });
  return { actions, failed: () => failed };
}
