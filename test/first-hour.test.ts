import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, cleanEnv, REPO } from './helpers/cli.js';
import { rm } from 'node:fs/promises';
import { startTestDaemon, tempDir, type TestDaemon } from './helpers/daemon.js';
import { Api, createBody } from './helpers/http.js';
import { needs } from './helpers/requirements.js';
import { eventually } from './helpers/wait.js';

/** The polish a person notices in the browser pages. */
describe('what a person reads in the pages', () => {
  let d: TestDaemon;
  let admin: Api;
  beforeAll(async () => {
    d = await startTestDaemon();
    admin = await new Api(d.url).login('admin', d.adminPassword);
  });
  afterAll(() => d.stop());

  it('the home page names roles as people do (item 11); JSON keeps the wire values', async () => {
    const created = await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ requested_role: 'scope_user_power_user' }));
    const home = await admin.get('/ui');
    expect(home.status).toBe(200);
    expect(home.text).toContain('asks for Power User');
    expect(home.text).toContain('(Admin)');
    expect(home.text).not.toContain('scope_user_power_user');
    const review = await admin.get(`/svc/v1/access-requests/${created.body.id}/review`);
    expect(review.body.requested_role).toBe('scope_user_power_user');
  });

  it('every page names an icon, so no browser asks for /favicon.ico and logs a 404 (item 12)', async () => {
    for (const page of ['/ui', '/ui/apps/access-requests/review?id=nothing']) {
      const res = await admin.get(page);
      expect(res.text, page).toContain('<link rel="icon" href="data:,">');
    }
  });
});

const haveScript = (await execa('sh', ['-c', 'command -v script'], { reject: false })).exitCode === 0;

describe.skipIf(!needs(haveScript, 'first-hour (the daemon on a terminal)', 'script (bsdutils)'))('the daemon on a terminal and in a pipe (item 8)', () => {
  /** `svc serve` for a few seconds with a health check in the middle, on a pseudo-terminal or piped. */
  async function serveFor(onTerminal: boolean, extra: string[] = []) {
    const dataDir = await tempDir();
    const cmd = `node ${JSON.stringify(BIN)} serve --port 0 --keychain file ${extra.join(' ')}`;
    const run = onTerminal
      ? execa('script', ['-qfec', cmd, '/dev/null'], { cwd: REPO, env: cleanEnv({ SVC_HOME: dataDir }), extendEnv: false, reject: false, all: true })
      : execa('node', [BIN, 'serve', '--port', '0', '--keychain', 'file', ...extra], { cwd: REPO, env: cleanEnv({ SVC_HOME: dataDir }), extendEnv: false, reject: false, all: true });
    let output = '';
    run.all!.on('data', (c: Buffer) => (output += c.toString()));
    try {
      const url = (await eventually(() => /svc listening on (http:\/\/\S+)/.exec(output), 'the "svc listening" line', 20_000))[1];
      await fetch(`${url}/svc/v1/health`);
      // the request's own log line, in either format, before the daemon is stopped
      await eventually(() => output.includes('/svc/v1/health'), 'the log line of the health check', 10_000);
    } finally {
      run.kill('SIGTERM');
      await run;
      await rm(dataDir, { recursive: true, force: true });
    }
    return output.replace(/\r/g, '');
  }

  it('on a terminal: the banner, one listening line and short request lines, no JSON', async () => {
    const out = await serveFor(true);
    expect(out).toContain('shown only once');
    expect(out.match(/listening/g)).toHaveLength(1);
    expect(out).toMatch(/\d\d:\d\d:\d\d GET \/svc\/v1\/health 200 \d+ ms/);
    expect(out).not.toMatch(/^\{"level"/m);
  });

  it('piped, or with --log-format json: JSON lines', async () => {
    const piped = await serveFor(false);
    expect(piped).toMatch(/^\{"level":30/m);
    const forced = await serveFor(true, ['--log-format', 'json']);
    expect(forced).toMatch(/\{"level":30/);
  });
});
