/**
 * The official MCP conformance suite's authorization-server scenarios against svc's embedded
 * authorization server at <base>/oauth, with a pre-registered public client that asks for no
 * scope: `conformance authorization --url <base>/oauth --client-id ID --port P` runs
 * `authorization-server-metadata-endpoint` (RFC 8414 / OIDC discovery) and then
 * `authorization-code-grant`, whose browser step it prints ("Access the following URL in your
 * browser ..."); Chromium walks that URL: the login form, then Approve on svc's review page, and
 * the suite's own callback server on 127.0.0.1:P receives the code.
 *
 * The suite (@modelcontextprotocol/conformance 0.2.0-alpha, the first with these scenarios) needs
 * Node >= 22 (it imports fs.globSync); test/helpers/tools.ts installs it with Node 24 from the npm
 * registry when the tests run on Node 20.
 */
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { closedPort } from './helpers/cli.js';
import { consentInBrowser, launchChromium, waitForOutput } from './helpers/consent.js';
import { startTestDaemon, tempDir, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { registerClient } from './helpers/oauth.js';
import { ensureTools, spawnTool, type Tools, toolEnv } from './helpers/tools.js';

vi.setConfig({ testTimeout: 180_000, hookTimeout: 600_000 });

const PAT_PASSWORD = 'pw-pat-12345';

interface Check {
  id: string;
  name: string;
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | 'SKIPPED';
  description: string;
  errorMessage?: string;
}

async function checksUnder(dir: string): Promise<Check[]> {
  const out: Check[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && entry.name === 'checks.json') {
      out.push(...(JSON.parse(await readFile(path.join(entry.parentPath, entry.name), 'utf8')) as Check[]));
    }
  }
  return out;
}

describe('MCP conformance suite: authorization server scenarios against <base>/oauth', () => {
  let tools: Tools;
  let d: TestDaemon;
  let browser: Browser;
  let admin: Api;
  let pat: Api;
  let root: string;
  let instanceId: string;

  beforeAll(async () => {
    root = await tempDir('svc-conformance-');
    [tools, browser, d] = await Promise.all([ensureTools(), launchChromium(), startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } })]);
    admin = await new Api(d.url).login('admin', d.adminPassword);
    pat = await userApi(d.url, admin, 'pat', 'power_user');
    const res = await pat.post('/svc/v1/mcps', { name: 'Notes', url: 'http://127.0.0.1:9/mcp', enabled: true });
    if (res.status !== 201) throw new Error(`instance: ${res.status} ${res.text}`);
    instanceId = res.body.instance.id;
  });

  afterAll(async () => {
    await browser?.close();
    await d?.stop();
    if (root) await rm(root, { recursive: true, force: true });
  });

  /** One full run of the suite; the person approves in Chromium. */
  async function runSuite(name: string, extraArgs: string[] = []) {
    const port = await closedPort();
    const { clientId } = await registerClient(admin, { name: `Conformance ${name}`, public: true, redirect_uris: [`http://127.0.0.1:${port}/callback`] });
    const outDir = path.join(root, name);
    const home = path.join(root, `${name}-home`);
    await mkdir(home, { recursive: true });
    const run = spawnTool(
      tools.node,
      [tools.conformance, 'authorization', '--url', `${d.baseUrl}/oauth`, '--client-id', clientId, '--port', String(port), '--output-dir', outDir, ...extraArgs],
      { env: toolEnv(home), cwd: root },
    );
    const log = () => `--- conformance stdout ---\n${run.out()}\n--- stderr ---\n${run.err()}`;
    try {
      // The browser step: the suite prints the authorization URL and waits on its callback server.
      const urlLine = await Promise.race([
        waitForOutput(run.out, /Access the following URL in your browser[^\n]*\n(\S+)\n/, 60_000, 'conformance'),
        run.exited.then((code) => {
          throw new Error(`conformance exited (${code}) before its browser step\n${log()}`);
        }),
      ]);
      const consent = await consentInBrowser(browser, new URL(d.url).origin, urlLine[1], { username: 'pat', password: PAT_PASSWORD, decision: 'approve' });
      const code = await Promise.race([
        run.exited,
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`conformance did not finish\n${log()}`)), 60_000)),
      ]);
      const checks = await checksUnder(outDir);
      return { code, checks, consent, clientId, log: log() };
    } finally {
      await run.stop();
    }
  }

  const summary = (checks: Check[]) => checks.map((c) => `${c.status} ${c.id}${c.errorMessage ? `: ${c.errorMessage}` : ''}`).join('\n');

  it('passes with a public client that asks for no scope and no resource (model access)', async () => {
    const r = await runSuite('no-resource');
    expect(r.checks.filter((c) => c.status === 'FAILURE'), `${summary(r.checks)}\n${r.log}`).toEqual([]);
    expect(r.checks.map((c) => [c.id, c.status])).toEqual(
      expect.arrayContaining([
        ['authorization-server-metadata', 'SUCCESS'],
        ['authorization-server-metadata-cimd', 'SUCCESS'],
        ['authorization-code-grant', 'SUCCESS'],
      ]),
    );
    expect(r.code, r.log).toBe(0);
    // svc's side: the flow went through an access request that the person approved on the page.
    expect(r.consent.requestId).toBeTruthy();
    const list = await pat.get('/svc/v1/access-requests?status=approved');
    expect(list.status, list.text).toBe(200);
    expect((list.body.data as any[]).find((x) => x.id === r.consent.requestId)).toMatchObject({
      app_client_id: r.clientId,
      status: 'approved',
      requested_role: 'scope_user_user',
      user: 'pat',
    });
  });

  it('passes with --resource naming an MCP instance proxy URL; the grant holds that instance', async () => {
    const resource = `${d.baseUrl}/svc/v1/apps/mcps/${instanceId}/mcp`;
    const r = await runSuite('mcp-resource', ['--resource', resource]);
    expect(r.checks.filter((c) => c.status === 'FAILURE'), `${summary(r.checks)}\n${r.log}`).toEqual([]);
    expect(r.checks.find((c) => c.id === 'authorization-code-grant')?.status).toBe('SUCCESS');
    expect(r.code, r.log).toBe(0);
    const list = await pat.get('/svc/v1/access-requests?status=approved');
    expect(list.status, list.text).toBe(200);
    const grant = (list.body.data as any[]).find((x) => x.id === r.consent.requestId);
    expect(grant, JSON.stringify(list.body)).toBeTruthy();
    expect(JSON.stringify(grant)).toContain(instanceId);
  });
});
