import { readFileSync } from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, cleanEnv, REPO } from './helpers/cli.js';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { startUpstream } from './helpers/upstream.js';

/** The README's walkthrough blocks that a user copies, run as written against a test daemon. */
function readmeBlock(marker: string): string {
  const readme = readFileSync(path.join(REPO, 'README.md'), 'utf8');
  const at = readme.indexOf(`<!-- walkthrough:${marker}`);
  expect(at, `README has no walkthrough:${marker} block`).toBeGreaterThan(-1);
  const start = readme.indexOf('```sh\n', at) + '```sh\n'.length;
  return readme.slice(start, readme.indexOf('\n```', start));
}

describe('README walkthrough, step 8: call svc yourself', () => {
  let d: TestDaemon;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;

  beforeAll(async () => {
    d = await startTestDaemon();
    upstream = await startUpstream();
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    expect((await admin.post('/svc/v1/providers', { name: 'local', base_url: upstream.url })).status).toBe(201);
  });
  afterAll(async () => {
    await d.stop();
    await upstream.close();
  });

  it('runs as written: a key, curl for models and chat, the openai client, the key list', async () => {
    // the reader's `svc` alias and daemon address, pointed at this test's daemon and data dir
    const script = `svc() { node ${JSON.stringify(BIN)} "$@"; }\nset -e\n${readmeBlock('call-svc-yourself').replaceAll('http://127.0.0.1:7878', d.url)}`;
    const run = await execa('bash', ['-c', script], { cwd: REPO, env: cleanEnv({ SVC_HOME: d.dataDir }), extendEnv: false, reject: false, timeout: 60_000 });
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stdout).toContain('"fake-model"');
    expect(run.stdout).toMatch(/"chat\.completion"/);
    expect(run.stdout).toMatch(/echo: Hello\n/); // the openai client printed the reply
    expect(run.stdout).toMatch(/\bme\b.*active/);
    expect(run.stdout + run.stderr).not.toMatch(/svc_[A-Za-z0-9_-]{43}/);
  });
});
