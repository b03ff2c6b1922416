/**
 * Hosted MCP servers that sign people in with OAuth: svc notices the need when an instance is
 * added, signs its owner in through a real browser (the upstream's own login and consent), holds
 * the tokens sealed, refreshes them once for every call that meets a stale one, and never lets an
 * app (or a log line, or a file of the data dir) see them.
 */
import { chmod, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../src/cli/main.js';
import { cleanEnv } from './helpers/cli.js';
import { launchChromium } from './helpers/consent.js';
import { startTestDaemon, type TestDaemon, tempDir, testClock } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { eventually } from './helpers/wait.js';
import { authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { type OAuthUpstream, PRE_CLIENT_ID, PRE_CLIENT_SECRET, type RegistrationKind, startCatcher, signInOnUpstreamPage, startOAuthMcpUpstream } from './helpers/oauth-mcp-upstream.js';

const CALLBACK = '/ui/mcp-oauth/callback';

describe('hosted MCP servers that sign in with OAuth', { timeout: 60_000 }, () => {
  const clock = testClock();
  let d: TestDaemon;
  let admin: Api;
  let browser: Browser;
  let clientId: string;
  let secret: string | undefined;
  const upstreams: Record<RegistrationKind, OAuthUpstream> = {} as never;
  /** every answer an app or the owner got, to look for tokens in */
  const answers: string[] = [];

  const cli = async (args: string[], input = '', onOut?: (t: string) => void, env: Record<string, string> = {}) => {
    let stdout = '';
    let stderr = '';
    const exitCode = await main(['node', 'svc', ...args], {
      out: (t) => {
        stdout += t;
        onOut?.(t);
      },
      err: (t) => void (stderr += t),
      isTTY: false,
      env: cleanEnv({ SVC_HOME: d.dataDir, ...env }),
      stdin: async () => input,
    });
    answers.push(stdout, stderr);
    return { exitCode, stdout, stderr };
  };

  const instance = async (id: string) => {
    const res = await admin.get(`/svc/v1/mcps/${id}`);
    answers.push(res.text);
    return res.body.instance;
  };

  /** The person at the upstream: its login form, then its consent, in the browser page on `url`. */
  async function signInAtUpstream(url: string, held?: OAuthUpstream): Promise<{ final: string; callback?: string; cookies: string }> {
    const context = await browser.newContext();
    const page = await context.newPage();
    const stopAtCallback = Boolean(held);
    const before = held?.callbacks.length ?? 0;
    if (held) held.holdCallbacks = true;
    let callback: string | undefined;
    try {
      await page.goto(url);
      await signInOnUpstreamPage(page);
      if (held) callback = await eventually(() => held.callbacks[before], 'the upstream sends the browser back');
      else await page.locator('#state').waitFor({ timeout: 15_000 });
      const text = stopAtCallback ? '' : await page.locator('body').innerText();
      answers.push(text);
      const cookies = (await context.cookies(d.baseUrl)).map((c) => `${c.name}=${c.value}`).join('; ');
      return { final: text, callback, cookies };
    } finally {
      if (held) held.holdCallbacks = false;
      await context.close();
    }
  }

  /** A one-time link that signs a browser in to svc as the admin and starts the sign-in of `id`. */
  async function signInLink(id: string): Promise<string> {
    const link = await admin.post('/svc/v1/auth/login-links');
    const url = new URL(link.body.url);
    url.searchParams.set('next', `/ui/mcps/${id}/sign-in`);
    return url.href;
  }

  async function addInstance(name: string, url: string, oauth?: Record<string, string>) {
    const res = await admin.post('/svc/v1/mcps', { name, url, ...(oauth ? { oauth } : {}) });
    expect(res.status, res.text).toBe(201);
    answers.push(res.text);
    return res.body.instance.id as string;
  }

  /** the access request of the last token appToken made */
  let lastGrant = '';
  async function appToken(ids: string[], url: string) {
    const app = new Api(d.url);
    const created = await app.post('/svc/v1/apps/request-access', {
      app_client_id: clientId,
      flow_type: 'popup',
      requested_role: 'scope_user_user',
      requested: { version: '1', mcp_servers: [{ url }] },
    });
    lastGrant = created.body.id;
    const approved = await admin.put(`/svc/v1/access-requests/${created.body.id}/approve`, { approved_role: 'scope_user_user', approved: { version: '1', mcp_servers: [{ url, instance_ids: ids }] } });
    expect(approved.status, approved.text).toBe(200);
    const { tokens } = await authorize(await oidcConfig(d, clientId, secret), admin, approved.body.access_request_scope);
    return tokens!.access_token as string;
  }

  const execute = async (token: string, id: string, tool = 'echo', params: Record<string, unknown> = { message: 'hi' }) => {
    const res = await new Api(d.url).post(`/svc/v1/apps/mcps/${id}/tools/${tool}/execute`, { params }, { Authorization: `Bearer ${token}` });
    answers.push(res.text);
    return res;
  };

  async function proxyClient(token: string, id: string) {
    const client = new Client({ name: 'app', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${d.url}/svc/v1/apps/mcps/${id}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
    return client;
  }

  beforeAll(async () => {
    d = await startTestDaemon({ clock, config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    ({ clientId, secret } = await registerClient(admin));
    const [dynamic, pre, cimd] = await Promise.all([
      startOAuthMcpUpstream({ registration: 'dynamic' }),
      startOAuthMcpUpstream({ registration: 'pre_registered', redirectUri: `${d.baseUrl}${CALLBACK}` }),
      startOAuthMcpUpstream({ registration: 'metadata_document' }),
    ]);
    Object.assign(upstreams, { dynamic, pre_registered: pre, metadata_document: cimd });
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await Promise.all(Object.values(upstreams).map((u) => u.close()));
    await d?.stop();
  });

  let named = 0;
  /** A new instance of the `kind` server, signed in through the browser, and an app's token granted it. */
  async function connected(kind: RegistrationKind) {
    const name = `${kind}-${++named}`;
    const id = await addInstance(name, upstreams[kind].mcpUrl, kind === 'pre_registered' ? { client_id: PRE_CLIENT_ID, client_secret: PRE_CLIENT_SECRET } : undefined);
    const { final } = await signInAtUpstream(await signInLink(id));
    expect(final).toContain(`Signed in to ${name}`);
    return { id, token: await appToken([id], upstreams[kind].mcpUrl) };
  }

  it('svc mcp add notices a server that answers 401 with a Bearer challenge, and says how to sign in', async () => {
    const added = await cli(['mcp', 'add', '--name', 'noticed', '--url', upstreams.dynamic.mcpUrl]);
    expect(added.exitCode, added.stderr).toBe(0);
    const id = added.stdout.trim();
    expect(added.stderr).toContain(`svc mcp login ${id}`);
    expect((await instance(id)).auth).toMatchObject({ kind: 'oauth', status: 'needs_sign_in', reason: 'not_signed_in' });
    const list = await cli(['mcp', 'list']);
    expect(list.stdout).toMatch(/needs sign-in/);
    // an app granted it meets a clear error, not the upstream's 401
    const token = await appToken([id], upstreams.dynamic.mcpUrl);
    const rest = await execute(token, id);
    expect(rest.status).toBe(502);
    expect(rest.body.error.code).toBe('mcp_sign_in_required');
    const app = await proxyClient(token, id).catch((err: Error) => err);
    expect(String(app instanceof Error ? app.message : 'connected')).toMatch(/sign in again/);
  });

  it('svc mcp login --print prints the server\'s own authorization URL; Chromium signs in there (dynamic registration, RFC 7591), with no svc session', async () => {
    const added = await cli(['mcp', 'add', '--name', 'hosted', '--url', upstreams.dynamic.mcpUrl]);
    const id = added.stdout.trim();
    const registered = upstreams.dynamic.registrations();
    let link = '';
    const running = cli(['mcp', 'login', id, '--print'], '', (t) => (link += t));
    let ended: unknown;
    void running.then((r) => (ended = r));
    await eventually(() => link.trim().startsWith('http') || ended, 'the link printed', 30_000);
    expect(link.trim(), JSON.stringify(ended)).toMatch(new RegExp(`^${upstreams.dynamic.issuer}/auth\\?`));
    const { final } = await signInAtUpstream(link.trim());
    expect(final).toContain('Signed in to hosted');
    const done = await running;
    expect(done.exitCode, done.stderr).toBe(0);
    expect(done.stderr).toContain('Connected');
    expect((await instance(id)).auth).toMatchObject({ kind: 'oauth', status: 'connected', client: 'dynamic' });
    expect(upstreams.dynamic.registrations() - registered).toBe(1);
    const asked = upstreams.dynamic.authorizeRequests.at(-1)!;
    expect(asked.get('code_challenge_method')).toBe('S256');
    expect(asked.get('resource')).toBe(upstreams.dynamic.mcpUrl);
    // its authorization server lists offline_access: asked for, with the consent it needs
    expect(asked.get('scope')).toBe('mcp:tools offline_access');
    expect(asked.get('prompt')).toBe('consent');
    expect(asked.get('state')).toMatch(new RegExp(`^${id}\\.`));
    expect((await cli(['mcp', 'list'])).stdout).toMatch(/signed in/);
  });

  it('svc mcp login without --print opens the server\'s authorization URL in the browser ($BROWSER) and says when connected', async () => {
    const id = await addInstance('opened', upstreams.dynamic.mcpUrl);
    // a BROWSER that writes down the URL it is given
    const dir = await tempDir('svc-browser-');
    const opened = path.join(dir, 'opened.txt');
    await writeFile(path.join(dir, 'browser'), `#!/bin/sh\nprintf '%s' "$1" > '${opened}'\n`);
    await chmod(path.join(dir, 'browser'), 0o755);
    const running = cli(['mcp', 'login', id], '', undefined, { BROWSER: path.join(dir, 'browser') });
    const url = await eventually(async () => (await readFile(opened, 'utf8').catch(() => '')) || undefined, 'the browser opened');
    expect(url).toMatch(new RegExp(`^${upstreams.dynamic.issuer}/auth\\?`));
    const { final } = await signInAtUpstream(url);
    expect(final).toContain('Signed in to opened');
    const done = await running;
    expect(done.exitCode, done.stderr).toBe(0);
    expect(done.stdout).toBe('');
    expect(done.stderr).toContain('Connected: opened is signed in');
  });

  it('a CLI-started sign-in is the CLI\'s alone: its status needs its secret, its state works once and only for its instance', async () => {
    const id = await addInstance('cli-bound', upstreams.dynamic.mcpUrl);
    const other = await addInstance('cli-other', upstreams.dynamic.mcpUrl);
    const started = await admin.post(`/svc/v1/mcps/${id}/oauth/login`);
    expect(started.status, started.text).toBe(200);
    expect(started.body.authorization_url).toMatch(new RegExp(`^${upstreams.dynamic.issuer}/`));
    // no app or stranger may start one: the route is the owner's session API
    expect((await new Api(d.url).post(`/svc/v1/mcps/${id}/oauth/login`)).status).toBe(401);
    expect((await admin.post(`/svc/v1/mcps/${id}/oauth/login/status`, { login: 'guessed' })).body.status).toBe('unknown');
    expect((await admin.post(`/svc/v1/mcps/${other}/oauth/login/status`, { login: started.body.login })).body.status).toBe('unknown');
    expect((await admin.post(`/svc/v1/mcps/${id}/oauth/login/status`, { login: started.body.login })).body.status).toBe('pending');
    expect((await admin.post(`/svc/v1/mcps/${id}/oauth/login/status`, {})).status).toBe(400);
    const { callback } = await signInAtUpstream(started.body.authorization_url, upstreams.dynamic);
    // the state names its instance: moved to another one it is unknown there
    const moved = new URL(callback!);
    moved.searchParams.set('state', `${other}.${moved.searchParams.get('state')!.split('.').at(-1)}`);
    expect((await fetch(`${d.baseUrl}${CALLBACK}${moved.search}`)).status).toBe(400);
    // any browser finishes it (no svc session), once
    const first = await fetch(`${d.baseUrl}${CALLBACK}${new URL(callback!).search}`);
    expect(first.status).toBe(200);
    expect((await fetch(`${d.baseUrl}${CALLBACK}${new URL(callback!).search}`)).status).toBe(400);
    expect((await admin.post(`/svc/v1/mcps/${id}/oauth/login/status`, { login: started.body.login })).body.status).toBe('connected');
    expect((await instance(id)).auth.status).toBe('connected');
    expect((await instance(other)).auth.status).toBe('needs_sign_in');
  });

  it('the owner\'s --oauth-scope is asked for as given, without offline_access', async () => {
    const id = await addInstance('scoped', upstreams.dynamic.mcpUrl, { scope: 'mcp:tools' });
    const started = await admin.post(`/svc/v1/mcps/${id}/oauth/login`);
    const asked = new URL(started.body.authorization_url).searchParams;
    expect(asked.get('scope')).toBe('mcp:tools');
    expect(asked.get('prompt')).toBeNull();
  });

  it('app calls through the proxy and REST reach the server with its token; the app never sees it', async () => {
    const { id, token } = await connected('dynamic');
    const rest = await execute(token, id, 'whoami', {});
    expect(rest.status, rest.text).toBe(200);
    expect(rest.text).toContain('you sent');
    const client = await proxyClient(token, id);
    const viaProxy = await client.callTool({ name: 'whoami', arguments: {} });
    await client.close();
    answers.push(JSON.stringify(viaProxy));
    const upstreamToken = upstreams.dynamic.issued.at(-1)!;
    expect(upstreams.dynamic.tokensSeen).toContain(upstreamToken);
    expect(rest.text).not.toContain(upstreamToken);
    expect(JSON.stringify(viaProxy)).not.toContain(upstreamToken);
    expect(JSON.stringify(viaProxy)).toContain('[redacted]');
  });

  it('svc mcp login with a pre-registered confidential client (--oauth-client-id, secret on stdin)', async () => {
    const added = await cli(['mcp', 'add', '--name', 'pre', '--url', upstreams.pre_registered.mcpUrl, '--oauth-client-id', PRE_CLIENT_ID, '--oauth-client-secret-stdin'], PRE_CLIENT_SECRET);
    expect(added.exitCode, added.stderr).toBe(0);
    const id = added.stdout.trim();
    const { final } = await signInAtUpstream(await signInLink(id));
    expect(final).toContain('Signed in to pre');
    expect((await instance(id)).auth).toMatchObject({ status: 'connected', client: 'pre_registered' });
    expect(upstreams.pre_registered.authorizeRequests.at(-1)!.get('client_id')).toBe(PRE_CLIENT_ID);
    const token = await appToken([id], upstreams.pre_registered.mcpUrl);
    expect((await execute(token, id)).body.result.content[0].text).toBe('echo: hi');
  });

  it('svc mcp login with a Client ID Metadata Document served at svc\'s base URL', async () => {
    const registered = upstreams.metadata_document.registrations();
    const id = await addInstance('cimd', upstreams.metadata_document.mcpUrl);
    const { final } = await signInAtUpstream(await signInLink(id));
    expect(final).toContain('Signed in to cimd');
    expect((await instance(id)).auth).toMatchObject({ status: 'connected', client: 'metadata_document' });
    expect(upstreams.metadata_document.authorizeRequests.at(-1)!.get('client_id')).toBe(`${d.baseUrl}/svc/oauth/mcp-client.json`);
    expect(upstreams.metadata_document.registrations() - registered).toBe(0);
    const token = await appToken([id], upstreams.metadata_document.mcpUrl);
    expect((await execute(token, id)).status).toBe(200);
  });

  it('an expired token met by twenty racing calls is refreshed exactly once, and all twenty succeed', async () => {
    const { id, token } = await connected('dynamic');
    const before = upstreams.dynamic.refreshes();
    clock.advance(61_000);
    // half over REST, half through the proxy
    const viaProxy = (i: number) =>
      new Api(d.url).post(`/svc/v1/apps/mcps/${id}/mcp`, { jsonrpc: '2.0', id: i, method: 'tools/call', params: { name: 'echo', arguments: { message: `n${i}` } } }, { Authorization: `Bearer ${token}`, Accept: 'application/json, text/event-stream' });
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? viaProxy(i) : execute(token, id, 'echo', { message: `n${i}` }))));
    for (const [i, r] of results.entries()) expect(r.body.result?.content[0].text, r.text).toBe(`echo: n${i}`);
    expect(upstreams.dynamic.refreshes() - before).toBe(1);
    expect(upstreams.dynamic.tokensSeen.at(-1)).toBe(upstreams.dynamic.issued.at(-1));
  });

  it('a token the server refuses (401) is refreshed and the call tried again', async () => {
    const { id, token } = await connected('dynamic');
    const before = upstreams.dynamic.refreshes();
    upstreams.dynamic.rejectIssuedTokens();
    const r = await execute(token, id);
    expect(r.status, r.text).toBe(200);
    expect(upstreams.dynamic.refreshes() - before).toBe(1);
  });

  it('a token the server refuses (401) on a proxied call is refreshed once and the call tried again; the app never gets the 401', async () => {
    const { id, token } = await connected('dynamic');
    const before = upstreams.dynamic.refreshes();
    const ranBefore = upstreams.dynamic.toolsRun.length;
    // revoked at the server, not expired by svc's clock
    upstreams.dynamic.rejectIssuedTokens();
    const client = await proxyClient(token, id);
    const viaSdk = await client.callTool({ name: 'echo', arguments: { message: 'again' } });
    await client.close();
    answers.push(JSON.stringify(viaSdk));
    expect(viaSdk.content).toEqual([{ type: 'text', text: 'echo: again' }]);
    expect(upstreams.dynamic.refreshes() - before).toBe(1);
    expect(upstreams.dynamic.toolsRun.length - ranBefore).toBe(1);
    expect((await instance(id)).auth.status).toBe('connected');
  });

  it('an approved held call whose token the server refuses (401) is not sent again with the refreshed one: the person approved one run', async () => {
    const { id, token } = await connected('dynamic');
    const grant = lastGrant;
    const asked = await admin.put(`/svc/v1/access-requests/${grant}/tools`, { [id]: { tools: { echo: 'ask' } } });
    expect(asked.status, asked.text).toBe(200);
    const before = upstreams.dynamic.refreshes();
    const ranBefore = upstreams.dynamic.toolsRun.length;
    upstreams.dynamic.rejectIssuedTokens();
    const answering = new Api(d.url).post(`/svc/v1/apps/mcps/${id}/mcp`, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'echo', arguments: { message: 'once' } } }, { Authorization: `Bearer ${token}`, Accept: 'application/json, text/event-stream' });
    const held = await eventually(async () => ((await admin.get('/svc/v1/calls?status=pending')).body.data as { id: string; access_request_id: string }[]).find((c) => c.access_request_id === grant), 'the call held');
    expect((await admin.post(`/svc/v1/calls/${held.id}/approve`, {})).status).toBe(200);
    const answer = await answering;
    answers.push(answer.text);
    // the refused token is refreshed for the calls after it, but this one is not tried again
    expect(upstreams.dynamic.refreshes() - before).toBe(1);
    expect(upstreams.dynamic.toolsRun.length - ranBefore).toBe(0);
    expect(answer.text).not.toContain('echo: once');
    expect(answer.status).not.toBe(200);
  });

  it('a proxied call whose new token is refused too (a second 401) leaves the instance needing a sign-in, answered as a JSON-RPC error', async () => {
    const { id, token } = await connected('dynamic');
    const before = upstreams.dynamic.refreshes();
    upstreams.dynamic.refuseEveryToken = true;
    try {
      const rpc = await new Api(d.url).post(`/svc/v1/apps/mcps/${id}/mcp`, { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'echo', arguments: { message: 'hi' } } }, { Authorization: `Bearer ${token}`, Accept: 'application/json, text/event-stream' });
      answers.push(rpc.text);
      expect(rpc.body, rpc.text).toMatchObject({ jsonrpc: '2.0', id: 9, error: { code: -32003, data: { code: 'mcp_sign_in_required' } } });
      expect(upstreams.dynamic.refreshes() - before).toBe(1);
      expect((await instance(id)).auth).toMatchObject({ status: 'needs_sign_in', reason: 'token_refused' });
    } finally {
      upstreams.dynamic.refuseEveryToken = false;
    }
  });

  it('a server that redirects the call to another origin never gets the token sent there', async () => {
    const { id, token } = await connected('dynamic');
    const catcher = await startCatcher();
    try {
      upstreams.dynamic.redirectTo = catcher.url;
      const rest = await execute(token, id);
      expect(rest.status).toBeGreaterThanOrEqual(400);
      const viaProxy = await new Api(d.url).post(`/svc/v1/apps/mcps/${id}/mcp`, { jsonrpc: '2.0', id: 1, method: 'ping' }, { Authorization: `Bearer ${token}`, Accept: 'application/json, text/event-stream' });
      answers.push(viaProxy.text);
      expect(catcher.seen.filter((h) => h.authorization)).toEqual([]);
    } finally {
      upstreams.dynamic.redirectTo = null;
      await catcher.close();
    }
  });

  it('a refused refresh leaves the instance needing a sign-in: REST says 502 mcp_sign_in_required, the proxy a JSON-RPC error', async () => {
    const { id, token } = await connected('pre_registered');
    upstreams.pre_registered.refuseRefresh = true;
    clock.advance(61_000);
    try {
      const rest = await execute(token, id);
      expect(rest.status).toBe(502);
      expect(rest.body.error.code).toBe('mcp_sign_in_required');
      expect(rest.body.error.message).toMatch(/sign in again/);
      expect((await instance(id)).auth).toMatchObject({ status: 'needs_sign_in', reason: 'refresh_refused' });
      const rpc = await new Api(d.url).post(`/svc/v1/apps/mcps/${id}/mcp`, { jsonrpc: '2.0', id: 7, method: 'tools/list' }, { Authorization: `Bearer ${token}`, Accept: 'application/json, text/event-stream' });
      answers.push(rpc.text);
      expect(rpc.body).toMatchObject({ jsonrpc: '2.0', id: 7, error: { data: { code: 'mcp_sign_in_required' } } });
      const page = await admin.get('/ui/mcps');
      expect(page.text).toMatch(/needs sign-in/);
      expect(page.text).toContain(`/ui/mcps/${id}/sign-in`);
      // the review page of a request for that server offers the sign-in beside the instance
      const draft = await new Api(d.url).post('/svc/v1/apps/request-access', { app_client_id: clientId, flow_type: 'popup', requested_role: 'scope_user_user', requested: { version: '1', mcp_servers: [{ url: upstreams.pre_registered.mcpUrl }] } });
      const review = await admin.get(`/ui/apps/access-requests/review?id=${encodeURIComponent(draft.body.id)}`);
      expect(review.status).toBe(200);
      expect(review.text).toContain(`href="/ui/mcps/${id}/sign-in"`);
    } finally {
      upstreams.pre_registered.refuseRefresh = false;
    }
  });

  it('a sign-in revoked at the server (its token refused, its refresh refused) needs a sign-in', async () => {
    const { id, token } = await connected('metadata_document');
    upstreams.metadata_document.rejectIssuedTokens();
    upstreams.metadata_document.refuseRefresh = true;
    try {
      const rest = await execute(token, id);
      expect(rest.body.error?.code, rest.text).toBe('mcp_sign_in_required');
      expect((await instance(id)).auth.status).toBe('needs_sign_in');
    } finally {
      upstreams.metadata_document.refuseRefresh = false;
    }
  });

  it('the callback refuses a wrong iss, another session\'s state, a replayed state and a code for another instance, storing nothing', async () => {
    const id = await addInstance('attacked', upstreams.dynamic.mcpUrl);
    const other = await addInstance('other', upstreams.dynamic.mcpUrl);
    const first = await signInAtUpstream(await signInLink(id), upstreams.dynamic);
    const url = new URL(first.callback!);
    const at = (u: URL, cookies: string) => fetch(`${d.baseUrl}${CALLBACK}${u.search}`, { headers: { cookie: cookies }, redirect: 'manual' });
    // a wrong iss (a mix-up)
    const wrongIss = new URL(url);
    wrongIss.searchParams.set('iss', 'http://127.0.0.1:1');
    const mixed = await at(wrongIss, first.cookies);
    expect(mixed.status).toBe(400);
    expect(await mixed.text()).toContain('another server');
    // another session (the admin's API session is not the browser's)
    const stolen = await at(url, admin.cookieHeader);
    expect(stolen.status).toBe(403);
    expect((await instance(id)).auth.status).toBe('needs_sign_in');
    // a code of another instance's sign-in with this state
    const second = await signInAtUpstream(await signInLink(other), upstreams.dynamic);
    const swapped = new URL(url);
    swapped.searchParams.set('code', new URL(second.callback!).searchParams.get('code')!);
    const swap = await at(swapped, first.cookies);
    expect(swap.status).toBe(400);
    expect((await instance(id)).auth.status).toBe('needs_sign_in');
    // the state was used by that attempt: the real answer with it is refused as used
    const replay = await at(url, first.cookies);
    expect(replay.status).toBe(400);
    expect(await replay.text()).toContain('not one svc started');
    expect((await instance(id)).auth.status).toBe('needs_sign_in');
    // the other instance's own answer still works, once
    const good = await at(new URL(second.callback!), second.cookies);
    expect(good.status).toBe(200);
    expect((await instance(other)).auth.status).toBe('connected');
    expect((await at(new URL(second.callback!), second.cookies)).status).toBe(400);
  });

  it('svc mcp logout forgets the tokens and revokes them (RFC 7009); removing an instance does the same', async () => {
    const { id, token } = await connected('dynamic');
    const revokedBefore = upstreams.dynamic.revoked.length;
    const out = await cli(['mcp', 'logout', id]);
    expect(out.exitCode, out.stderr).toBe(0);
    expect(out.stderr).toContain('revoked');
    expect(upstreams.dynamic.revoked.slice(revokedBefore)).toContain('request');
    expect((await instance(id)).auth).toMatchObject({ status: 'needs_sign_in', reason: 'signed_out' });
    expect((await execute(token, id)).body.error.code).toBe('mcp_sign_in_required');
    const doomed = await connected('dynamic');
    const beforeRemoval = upstreams.dynamic.revoked.length;
    const removed = await cli(['mcp', 'remove', doomed.id]);
    expect(removed.exitCode, removed.stderr).toBe(0);
    expect(upstreams.dynamic.revoked.slice(beforeRemoval)).toContain('request');
    expect((await admin.get(`/svc/v1/mcps/${doomed.id}`)).status).toBe(404);
  });

  it('no token is in any answer, log line or file of the data dir', async () => {
    // whatever ran before, a sign-in of each kind, called and refreshed, is in the data dir and the logs
    const made = [];
    for (const kind of ['dynamic', 'pre_registered', 'metadata_document'] as const) {
      const one = await connected(kind);
      expect((await execute(one.token, one.id, 'whoami', {})).status).toBe(200);
      made.push(one);
    }
    clock.advance(61_000);
    for (const one of made) expect((await execute(one.token, one.id, 'whoami', {})).status).toBe(200);
    const all = Object.values(upstreams).flatMap((u) => [...u.issued, ...u.refreshTokens]);
    expect(all.length).toBeGreaterThanOrEqual(6);
    const files: string[] = [];
    const walk = async (dir: string) => {
      for (const e of await readdir(dir, { withFileTypes: true })) {
        const p = path.join(dir, e.name);
        if (e.isDirectory()) await walk(p);
        else if (e.isFile()) files.push(await readFile(p, 'latin1'));
      }
    };
    await walk(d.dataDir);
    const list = await admin.get('/svc/v1/mcps');
    answers.push(list.text);
    for (const t of all) {
      for (const a of answers) expect(a.includes(t)).toBe(false);
      for (const line of d.logs) expect(line.includes(t)).toBe(false);
      for (const f of files) expect(f.includes(t)).toBe(false);
    }
    expect(files.length).toBeGreaterThan(0);
  });
});
