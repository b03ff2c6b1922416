import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, cleanEnv, REPO } from './helpers/cli.js';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';

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
  let demo: ChildProcess;

  beforeAll(async () => {
    d = await startTestDaemon();
    // step 3: `npm run demo` beside it, as the reader has it running
    demo = spawn(process.execPath, ['demo/run.mjs'], { cwd: REPO, env: cleanEnv({ SVC_HOME: d.dataDir }), stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      let out = '';
      demo.stdout!.on('data', (c) => (out += c) && out.includes('Ctrl-C stops the demo') && resolve());
      demo.once('exit', (code) => reject(new Error(`the demo exited (${code}): ${out}`)));
    });
  });
  afterAll(async () => {
    // the demo removes what it added through the daemon, so it goes first
    if (demo && demo.exitCode === null) await new Promise((resolve) => demo.once('exit', resolve).kill('SIGINT'));
    await d.stop();
  });

  it('runs as written, on whatever port the daemon has: a key, curl for models and chat, the openai client, the key list', async () => {
    // only the reader's `svc` alias; the block finds the daemon's URL itself
    const script = `svc() { node ${JSON.stringify(BIN)} "$@"; }\nset -e\n${readmeBlock('call-svc-yourself')}`;
    const run = await execa('bash', ['-c', script], { cwd: REPO, env: cleanEnv({ SVC_HOME: d.dataDir }), extendEnv: false, reject: false, timeout: 60_000 });
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stdout).toContain('"demo-chat"');
    expect(run.stdout).toMatch(/"chat\.completion"/);
    expect(run.stdout).toMatch(/Hello from the svc demo model\. You said: "Hello"\n/); // the openai client printed the reply
    expect(run.stdout).toMatch(/\bme\b.*active/);
    expect(run.stdout + run.stderr).not.toMatch(/svc_[A-Za-z0-9_-]{43}/);
  });
});

describe('README commands', () => {
  it('assume no port: every shell block reads the daemon\'s URL instead of naming 7878', () => {
    const readme = readFileSync(path.join(REPO, 'README.md'), 'utf8');
    const blocks = [...readme.matchAll(/```sh\n([\s\S]*?)\n```/g)].map((m) => m[1]);
    expect(blocks.length).toBeGreaterThan(5);
    for (const block of blocks) expect(block, block).not.toMatch(/:7878\b/);
  });
});
