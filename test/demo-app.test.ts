import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import net from 'node:net';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv } from './helpers/cli.js';
import { startTestDaemon, tempDir, type TestDaemon } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { startMcpServer } from './helpers/mcp-servers.js';
import { registerClient } from './helpers/oauth.js';
import { startUpstream } from './helpers/upstream.js';
import { needs } from './helpers/requirements.js';

const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

/**
 * The README's walkthrough, end to end in a real browser: the demo app in examples/ asks for
 * access, the user logs in and approves in the popup, the app gets a token with code + PKCE and
 * lists the models and MCP tools it was granted.
 */
describe.skipIf(!needs(Boolean(CHROMIUM), 'demo-app', 'Chromium at /usr/bin/chromium'))('the demo app in examples/', () => {
  let d: TestDaemon;
  let browser: Browser;
  let demo: ChildProcess;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let mcp: Awaited<ReturnType<typeof startMcpServer>>;
  let demoUrl: string;

  beforeAll(async () => {
    upstream = await startUpstream();
    mcp = await startMcpServer({ stateful: true });
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    await admin.post('/svc/v1/providers', { name: 'local', base_url: upstream.url });
    await admin.post('/svc/v1/mcps', { name: 'files', url: mcp.url });
    const port = await freePort();
    demoUrl = `http://127.0.0.1:${port}`;
    const { clientId } = await registerClient(admin, { name: 'Demo App', public: true, redirect_uris: [`${demoUrl}/callback`] });
    // no --svc: it finds the daemon of its data dir, as the README runs it
    demo = spawn(process.execPath, ['examples/demo-app/server.mjs', '--client-id', clientId, '--port', String(port)], { stdio: ['ignore', 'pipe', 'inherit'], env: cleanEnv({ SVC_HOME: d.dataDir }) });
    await new Promise<void>((resolve, reject) => {
      demo.stdout!.on('data', (c) => String(c).includes('demo app on') && resolve());
      demo.once('exit', (code) => reject(new Error(`demo app exited ${code}`)));
    });
    const { chromium } = await import('playwright-core');
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    demo?.kill();
    await d?.stop();
    await upstream?.close();
    await mcp?.close();
  });

  it('requests, reviews in a popup, gets a token and lists models and tools', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(demoUrl);
    await page.fill('#mcp', mcp.url);
    // the MCP field stays inside its column (it once overflowed by about 17 px)
    const overflow = await page.evaluate(() => {
      const input = document.getElementById('mcp')!;
      return input.getBoundingClientRect().right - input.parentElement!.getBoundingClientRect().right;
    });
    expect(overflow).toBeLessThanOrEqual(0);
    const reviewPopup = page.waitForEvent('popup');
    await page.click('#ask');
    const review = await reviewPopup;
    await review.waitForLoadState();
    // no svc session in this browser yet: the login form, then back to the review page
    await review.fill('#username', 'admin');
    await review.fill('#password', d.adminPassword);
    await Promise.all([review.waitForNavigation(), review.click('button[type=submit]')]);
    await review.waitForSelector('#approve');
    expect(await review.textContent('body')).toContain('Demo App');
    const signIn = page.waitForEvent('popup');
    await review.click('#approve');
    await signIn; // the authorization popup: passes on the svc session, lands on /callback, closes
    await page.waitForFunction(() => document.getElementById('status')?.textContent?.startsWith('Done'), undefined, { timeout: 20_000 });
    expect(await page.textContent('#models')).toContain('fake-model');
    expect(await page.textContent('#tools')).toContain('echo');
    await context.close();
  });
});

/** The demo app needs no --svc: like the CLI, it reads where the daemon of its data dir serves. */
describe('the demo app finds its daemon', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d?.stop());

  const run = async (args: string[], env: Record<string, string>) => {
    const child = spawn(process.execPath, ['examples/demo-app/server.mjs', '--client-id', 'x', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
    let out = '';
    let err = '';
    child.stdout!.on('data', (c) => (out += c));
    child.stderr!.on('data', (c) => (err += c));
    const result = await new Promise<{ url?: string; code?: number | null }>((resolve) => {
      child.stdout!.on('data', () => {
        const m = /demo app on (http:\/\/127\.0\.0\.1:\d+)\//.exec(out);
        if (m) resolve({ url: m[1] });
      });
      child.once('exit', (code) => resolve({ code }));
    });
    return { ...result, out: () => out, err: () => err, stop: () => child.kill() };
  };

  it('from SVC_HOME or --data-dir, on whatever port it listens', async () => {
    for (const [args, env] of [
      [[], cleanEnv({ SVC_HOME: d.dataDir })],
      [['--data-dir', d.dataDir], cleanEnv({ SVC_HOME: undefined })],
    ] as const) {
      const demo = await run([...args], env);
      try {
        expect(demo.url, demo.err()).toBeDefined();
        const config = await (await fetch(`${demo.url}/config.json`)).json();
        expect(config.svc).toBe(d.baseUrl);
      } finally {
        demo.stop();
      }
    }
  });

  it('with no daemon for its data dir, says so and exits 1', async () => {
    const empty = await tempDir('svc-demo-empty-');
    const demo = await run([], cleanEnv({ SVC_HOME: empty }));
    await rm(empty, { recursive: true, force: true });
    expect(demo.code).toBe(1);
    expect(demo.err()).toContain(`no svc daemon runs for the data dir ${empty}`);
  });
});

describe('the demo app without a client id', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d.stop());

  /** The demo app's whole run with these arguments, to its exit. */
  const exitOf = (args: string[]) =>
    new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
      const child = spawn(process.execPath, ['examples/demo-app/server.mjs', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: cleanEnv({ SVC_HOME: d.dataDir, DEMO_CLIENT_ID: undefined }) });
      let out = '';
      let err = '';
      child.stdout!.on('data', (c) => (out += c));
      child.stderr!.on('data', (c) => (err += c));
      // one that started anyway is stopped, and fails the test below on its exit code
      child.stdout!.on('data', () => /demo app on/.test(out) && child.kill());
      child.once('exit', (code) => resolve({ code, out, err }));
    });

  it('an empty, a missing or no --client-id is one line that says how to get one, and a non-zero exit; never a stack trace', async () => {
    for (const args of [['--client-id', ''], ['--client-id'], [], ['--client-id', '   '], ['--bogus']]) {
      const r = await exitOf(args);
      expect(r.code, `${args.join(' ')}: ${r.out}`).toBe(2);
      expect(r.err.trimEnd().split('\n'), r.err).toHaveLength(1);
      expect(r.err).not.toMatch(/\n\s+at |TypeError|ERR_PARSE_ARGS/);
      if (args[0] !== '--bogus') expect(r.err).toContain('svc clients add');
    }
  });
});
