import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, runSvcInProcess } from './helpers/cli.js';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, createBody } from './helpers/http.js';

/**
 * The short ids svc shows are taken back, and `svc requests approve`
 * never grants less than the review page would without being told to.
 */
describe('short ids and the approve default in the CLI', () => {
  let d: TestDaemon;
  let admin: Api;
  const URL_A = 'http://127.0.0.1:9501/mcp';
  let first: string;
  let second: string;
  beforeAll(async () => {
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    first = (await admin.post('/svc/v1/mcps', { name: 'first', url: URL_A })).body.instance.id;
    second = (await admin.post('/svc/v1/mcps', { name: 'second', url: URL_A })).body.instance.id;
  });
  afterAll(() => d.stop());

  const svc = (args: string[]) => runSvcInProcess(args, { env: cleanEnv({ SVC_HOME: d.dataDir }) });
  const draft = async () =>
    (await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ requested: { version: '1', mcp_servers: [{ url: URL_A }] } }))).body.id as string;
  const granted = async (id: string) => (await admin.get(`/svc/v1/access-requests/${id}/review`)).body.approved?.mcp_servers ?? [];

  it('requests show and deny take the 8-character id the page and the TUI show', async () => {
    const id = await draft();
    const show = await svc(['requests', 'show', id.slice(0, 8)]);
    expect(show.exitCode, show.stderr).toBe(0);
    expect(show.stdout).toContain(id);
    const deny = await svc(['requests', 'deny', id.slice(0, 8)]);
    expect(deny.exitCode, deny.stderr).toBe(0);
    expect((await admin.get(`/svc/v1/access-requests/${id}/review`)).body.status).toBe('denied');
  });

  it('approve without --mcp grants the same default as the page, and says so; --no-mcp grants none', async () => {
    const id = await draft();
    const approve = await svc(['requests', 'approve', id.slice(0, 8)]);
    expect(approve.exitCode, approve.stderr).toBe(0);
    expect(await granted(id)).toEqual([{ url: URL_A, instance_ids: [first] }]);
    expect(approve.stderr).toContain(`granting ${first.slice(0, 8)} for ${URL_A}`);
    const none = await draft();
    const bare = await svc(['requests', 'approve', none, '--no-mcp']);
    expect(bare.exitCode, bare.stderr).toBe(0);
    expect(await granted(none)).toEqual([]);
    expect(bare.stderr).toContain('with no MCP instance');
  });

  it('approve without --mcp never grants less than asked: a URL with no enabled instance of yours stops it, deciding nothing', async () => {
    const id = (
      await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ requested: { version: '1', mcp_servers: [{ url: URL_A }, { url: 'http://127.0.0.1:9599/none-of-mine' }] } }))
    ).body.id as string;
    const refused = await svc(['requests', 'approve', id]);
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr).toContain('Nothing decided');
    expect(refused.stderr).toContain('--no-mcp');
    expect((await admin.get(`/svc/v1/access-requests/${id}/review`)).body.status).toBe('draft');
  });

  it('--mcp URL=PREFIX and the mcp commands take a unique prefix of the instance id', async () => {
    const id = await draft();
    const approve = await svc(['requests', 'approve', id, '--mcp', `${URL_A}=${second.slice(0, 8)}`]);
    expect(approve.exitCode, approve.stderr).toBe(0);
    expect(await granted(id)).toEqual([{ url: URL_A, instance_ids: [second] }]);
    const disable = await svc(['mcp', 'disable', second.slice(0, 7)]);
    expect(disable.exitCode, disable.stderr).toBe(0);
    expect((await admin.get(`/svc/v1/mcps/${second}`)).body.instance.enabled).toBe(false);
  });

  it('the short id `svc mcp list` shows works in every command that takes an instance id: keys create --mcp as in requests approve', async () => {
    const URL_K = 'http://127.0.0.1:9503/mcp';
    const mine = (await admin.post('/svc/v1/mcps', { name: 'keyed', url: URL_K })).body.instance.id as string;
    const listed = await runSvcInProcess(['mcp', 'list'], { env: cleanEnv({ SVC_HOME: d.dataDir }), tty: { columns: 200 } });
    expect(listed.exitCode, listed.stderr).toBe(0);
    const shown = listed.stdout.split('\n').find((l) => /\bkeyed\b/.test(l))!.split(/\s+/)[0];
    expect(shown).toBe(mine.slice(0, 8));
    const key = await svc(['keys', 'create', 'short-id', '--mcp', `${URL_K}=${shown}`, '--json']);
    expect(key.exitCode, key.stderr).toBe(0);
    expect(JSON.parse(key.stdout).mcp_servers).toEqual([{ url: URL_K, instance_ids: [mine] }]);
    const id = (await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ requested: { version: '1', mcp_servers: [{ url: URL_K }] } }))).body.id as string;
    const approve = await svc(['requests', 'approve', id, '--mcp', `${URL_K}=${shown}`]);
    expect(approve.exitCode, approve.stderr).toBe(0);
    expect(await granted(id)).toEqual([{ url: URL_K, instance_ids: [mine] }]);
    // and the key's own id, by the prefix `svc keys list` starts with
    const revoke = await svc(['keys', 'revoke', JSON.parse(key.stdout).id.slice(0, 8)]);
    expect(revoke.exitCode, revoke.stderr).toBe(0);
  });

  it('an instance id that is none of yours is said so, with where to look, not blamed on your rights', async () => {
    for (const args of [
      ['keys', 'create', 'nope', '--mcp', `${URL_A}=ffffffff`],
      ['requests', 'approve', 'placeholder', '--mcp', `${URL_A}=ffffffff`],
    ]) {
      if (args[2] === 'placeholder') args[2] = await draft();
      const r = await svc(args);
      expect(r.exitCode, args.join(' ')).toBe(1);
      expect(r.stderr).toContain('svc mcp list');
      expect(r.stderr).not.toMatch(/not allowed/);
    }
    // an instance of yours for another URL: the daemon's refusal, with the same pointer
    const other = (await admin.post('/svc/v1/mcps', { name: 'other', url: 'http://127.0.0.1:9502/mcp' })).body.instance.id as string;
    const wrongUrl = await svc(['keys', 'create', 'wrong-url', '--mcp', `${URL_A}=${other.slice(0, 8)}`]);
    expect(wrongUrl.exitCode).toBe(4);
    expect(wrongUrl.stderr).toContain('svc mcp list');
    expect(wrongUrl.stderr).not.toMatch(/not allowed/);
  });

  it('a failed svc login is not told to run svc login', async () => {
    const wrong = await runSvcInProcess(['login', '--username', 'admin', '--password-stdin'], { env: cleanEnv({ SVC_HOME: d.dataDir }), input: 'not-the-password' });
    expect(wrong.exitCode).toBe(4);
    expect(wrong.stderr).not.toContain('svc login');
    expect(wrong.stderr).toMatch(/check the username and password/);
  });
});
