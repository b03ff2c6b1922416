/**
 * Two real MCP hosts completing their own OAuth against an instance proxy URL, headless:
 *
 * - MCP Inspector 2.x, CLI mode: `inspector --cli <url> --method tools/list --callback-url
 *   http://127.0.0.1:P/oauth/callback --format json`. On a 401 it registers (DCR), prints
 *   "Please navigate to: <url>" on stderr and waits on its callback listener; it opens a browser
 *   itself (the `open` package) only on a TTY or with MCP_AUTO_OPEN_ENABLED=true, and never under
 *   VITEST. It keeps its OAuth state under $HOME/.mcp-inspector. Needs Node >= 22.19.
 * - mcp-remote, the stdio bridge: `mcp-remote <url> P --host 127.0.0.1`, driven by the MCP SDK
 *   client over stdio. It prints "Please authorize this client by visiting: <url>" on stderr and
 *   opens the browser with the `open` package (then xdg-open and friends). It keeps its state in
 *   MCP_REMOTE_CONFIG_DIR (default ~/.mcp-auth). Runs on Node 20.
 *
 * Their "open the browser" step is replaced by $BROWSER: with no desktop, `open` runs its bundled
 * xdg-open, whose generic mode runs $BROWSER <url>; ours writes the URL down and the test walks it
 * in Chromium (login, then Approve on svc's review page), which lands on the tool's own callback.
 */
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { closedPort } from './helpers/cli.js';
import { browserShim, consentInBrowser, launchChromium } from './helpers/consent.js';
import { startTestDaemon, tempDir, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { startMcpServer } from './helpers/mcp-servers.js';
import { ensureTools, spawnTool, type Tools, toolEnv } from './helpers/tools.js';

vi.setConfig({ testTimeout: 180_000, hookTimeout: 600_000 });

const PAT_PASSWORD = 'pw-pat-12345';

describe('MCP hosts completing their own OAuth against svc, browser step in Chromium', () => {
  let tools: Tools;
  let d: TestDaemon;
  let browser: Browser;
  let pat: Api;
  let root: string;
  let upstream: Awaited<ReturnType<typeof startMcpServer>>;
  let instanceId: string;

  const proxyUrl = () => `${d.baseUrl}/svc/v1/apps/mcps/${instanceId}/mcp`;
  const approvedFor = async (clientIdPattern: RegExp) => {
    const list = await pat.get('/svc/v1/access-requests?status=approved');
    return (list.body.data as any[]).filter((x) => clientIdPattern.test(x.app_client_id));
  };

  beforeAll(async () => {
    root = await tempDir('svc-mcp-hosts-');
    [tools, browser, d, upstream] = await Promise.all([
      ensureTools(),
      launchChromium(),
      startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } }),
      startMcpServer({ stateful: true }),
    ]);
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    pat = await userApi(d.url, admin, 'pat', 'power_user');
    const res = await pat.post('/svc/v1/mcps', { name: 'Notes', url: upstream.url, enabled: true });
    if (res.status !== 201) throw new Error(`instance: ${res.status} ${res.text}`);
    instanceId = res.body.instance.id;
  });

  afterAll(async () => {
    await browser?.close();
    await d?.stop();
    await upstream?.close();
    if (root) await rm(root, { recursive: true, force: true });
  });

  it('MCP Inspector CLI: DCR, consent in the browser, tools/list; then tools/call on the stored token', async () => {
    const home = path.join(root, 'inspector-home');
    await mkdir(home, { recursive: true });
    const shim = await browserShim(home);
    const port = await closedPort();
    // No Secret Service here: keep the Inspector's tokens in a file under the temp HOME, so the second run finds them.
    const env = toolEnv(home, { ...shim.env, MCP_AUTO_OPEN_ENABLED: 'true', MCP_INSPECTOR_SECRET_STORE: 'file' });
    const inspector = (args: string[]) =>
      spawnTool(tools.node, [tools.inspector, '--cli', proxyUrl(), '--callback-url', `http://127.0.0.1:${port}/oauth/callback`, '--format', 'json', ...args], { env, cwd: home });

    const list = inspector(['--method', 'tools/list']);
    const log = (p = list) => `--- inspector stdout ---\n${p.out()}\n--- stderr ---\n${p.err()}`;
    try {
      const authUrl = await Promise.race([
        shim.next(60_000, () => log()),
        list.exited.then((code) => {
          throw new Error(`the Inspector exited (${code}) before opening the browser\n${log()}`);
        }),
      ]);
      // The URL it prints is the one it opens.
      expect(list.err()).toContain(`Please navigate to: ${authUrl}`);
      const consent = await consentInBrowser(browser, new URL(d.url).origin, authUrl, { username: 'pat', password: PAT_PASSWORD, decision: 'approve' });
      expect(consent.finalUrl.startsWith(`http://127.0.0.1:${port}/oauth/callback?`), consent.finalUrl).toBe(true);
      const code = await Promise.race([list.exited, new Promise((_, reject) => setTimeout(() => reject(new Error(`the Inspector did not finish\n${log()}`)), 60_000))]);
      expect(code, log()).toBe(0);
      const out = JSON.parse(list.out());
      expect((out.tools ?? out.result?.tools ?? []).map((t: { name: string }) => t.name), log()).toEqual(expect.arrayContaining(['echo', 'add']));
      const grants = await approvedFor(/^svc-dyn-/);
      expect(grants.map((g) => g.id)).toContain(consent.requestId);
    } finally {
      await list.stop();
    }

    // A second run uses the stored token: no browser this time.
    const call = inspector(['--method', 'tools/call', '--tool-name', 'echo', '--tool-arg', 'message=from the inspector', '--stored-auth-only']);
    try {
      const code = await Promise.race([call.exited, new Promise((_, reject) => setTimeout(() => reject(new Error(`the Inspector did not finish\n${log(call)}`)), 60_000))]);
      expect(code, log(call)).toBe(0);
      expect(call.out()).toContain('echo: from the inspector');
      expect(await shim.opened()).toHaveLength(1);
    } finally {
      await call.stop();
    }
  });

  it('mcp-remote (stdio bridge): DCR, consent in the browser, then tools/list and tools/call through it', async () => {
    const home = path.join(root, 'mcp-remote-home');
    await mkdir(home, { recursive: true });
    const shim = await browserShim(home);
    const port = await closedPort();
    let stderr = '';
    const transport = new StdioClientTransport({
      command: tools.hostNode,
      args: [tools.mcpRemote, proxyUrl(), String(port), '--host', '127.0.0.1', '--auth-timeout', '120'],
      env: toolEnv(home, { ...shim.env, MCP_REMOTE_CONFIG_DIR: path.join(home, '.mcp-auth') }),
      cwd: home,
      stderr: 'pipe',
    });
    transport.stderr?.on('data', (c) => (stderr += String(c)));
    const client = new Client({ name: 'stdio-host', version: '1.0.0' });
    const connecting = client.connect(transport);
    connecting.catch(() => undefined);
    try {
      const authUrl = await shim.next(60_000, () => `--- mcp-remote stderr ---\n${stderr}`);
      expect(stderr).toContain('Please authorize this client by visiting:');
      expect(new URL(authUrl).searchParams.get('redirect_uri')).toBe(`http://127.0.0.1:${port}/oauth/callback`);
      const consent = await consentInBrowser(browser, new URL(d.url).origin, authUrl, { username: 'pat', password: PAT_PASSWORD, decision: 'approve' });
      expect(consent.finalUrl.startsWith(`http://127.0.0.1:${port}/oauth/callback?`), consent.finalUrl).toBe(true);
      await Promise.race([connecting, new Promise((_, reject) => setTimeout(() => reject(new Error(`mcp-remote did not connect\n${stderr}`)), 60_000))]);
      const listed = await client.listTools();
      expect(listed.tools.map((t) => t.name)).toEqual(expect.arrayContaining(['echo', 'add']));
      const called = await client.callTool({ name: 'echo', arguments: { message: 'from mcp-remote' } });
      expect(called.content).toEqual([{ type: 'text', text: 'echo: from mcp-remote' }]);
      const grants = await approvedFor(/^svc-dyn-/);
      expect(grants.map((g) => g.id)).toContain(consent.requestId);
    } catch (err) {
      (err as Error).message += `\n--- mcp-remote stderr ---\n${stderr.slice(-4000)}`;
      throw err;
    } finally {
      await client.close().catch(() => undefined);
    }
  });
});
