/**
 * An MCP host built on the official SDK, with the SDK's own OAuth support and no svc-specific
 * code: `StreamableHTTPClientTransport` with an `authProvider` (OAuthClientProvider), pointed at
 * an instance's proxy URL `<base>/svc/v1/apps/mcps/{id}/mcp`. The SDK takes the 401, reads the
 * RFC 9728 metadata, finds svc's authorization server and registers itself: by Dynamic Client
 * Registration, or with a Client ID Metadata Document (an https client_id served on loopback with
 * a throwaway CA). The person decides on svc's review page in Chromium.
 *
 * The daemon runs as a `svc serve` child (dist/: run `npm run build` first) because the CA has to
 * reach it through NODE_EXTRA_CA_CERTS, which Node reads only at process start, and the metadata
 * document lives on loopback, which svc fetches only with SVC_CLIENT_METADATA_ALLOW_LOOPBACK=1.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { mkdir, rm } from 'node:fs/promises';
import { type OAuthClientProvider, UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import * as oidc from 'openid-client';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { cleanEnv, runSvcInProcess, type ServeProcess, startServe } from './helpers/cli.js';
import { consentInBrowser, launchChromium } from './helpers/consent.js';
import { tempDir } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { startMcpServer } from './helpers/mcp-servers.js';
import { authorize, REDIRECT_URI } from './helpers/oauth.js';
import { BAD_REDIRECTS, GOOD_REDIRECTS } from './helpers/redirects.js';
import { makeTestCa, startHttpsDocs } from './helpers/tls.js';

vi.setConfig({ testTimeout: 120_000, hookTimeout: 120_000 });

const PAT_PASSWORD = 'pw-pat-12345';

/** What every request of the host looked like (method, URL, status; the token grant type). */
interface Seen {
  method: string;
  url: string;
  status: number;
  grantType?: string;
  error?: string;
}

/** The host's callback listener on 127.0.0.1: the redirect URI it registers. */
async function startCallbackServer() {
  const received: URL[] = [];
  let waiter: ((u: URL) => void) | undefined;
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', `http://${req.headers.host}`);
    if (url.pathname !== '/callback') {
      res.writeHead(404).end();
      return;
    }
    received.push(url);
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', Connection: 'close' }).end('<!doctype html><title>host</title><p>You can close this window.</p>');
    waiter?.(url);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const redirectUri = `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`;
  return {
    redirectUri,
    received,
    /** the next callback, or the one the browser already delivered */
    next(timeoutMs = 30_000): Promise<URL> {
      const already = received.length;
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no OAuth callback reached the host')), timeoutMs);
        const check = () => {
          if (received.length > already) {
            clearTimeout(timer);
            resolve(received[received.length - 1]);
          }
        };
        waiter = () => check();
        check();
      });
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/**
 * A host's OAuthClientProvider, as the SDK docs describe one: in-memory storage and a
 * "browser" that only records where the SDK wants to send the person.
 */
class HostAuthProvider implements OAuthClientProvider {
  redirects: URL[] = [];
  private info?: OAuthClientInformationMixed;
  private saved?: OAuthTokens;
  private verifier = '';
  private lastState = '';

  constructor(
    private readonly redirectUri: string,
    readonly clientMetadataUrl?: string,
  ) {}

  get redirectUrl() {
    return this.redirectUri;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'SDK test host',
      redirect_uris: [this.redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  state() {
    this.lastState = randomBytes(16).toString('base64url');
    return this.lastState;
  }
  get expectedState() {
    return this.lastState;
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.redirects.push(url);
  }
  invalidateCredentials(scope: 'all' | 'client' | 'tokens' | 'verifier' | 'discovery') {
    if (scope === 'all' || scope === 'client') this.info = undefined;
    if (scope === 'all' || scope === 'tokens') this.saved = undefined;
    if (scope === 'all' || scope === 'verifier') this.verifier = '';
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
}

const observe = (seen: Seen[]): typeof fetch =>
  (async (input: string | URL | Request, init?: RequestInit) => {
    const res = await fetch(input, init);
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const entry: Seen = { method: init?.method ?? 'GET', url, status: res.status };
    if (init?.body instanceof URLSearchParams) entry.grantType = init.body.get('grant_type') ?? undefined;
    else if (typeof init?.body === 'string' && init.body.includes('grant_type=')) entry.grantType = new URLSearchParams(init.body).get('grant_type') ?? undefined;
    if (entry.grantType && !res.ok) entry.error = (await res.clone().json().catch(() => ({}))).error;
    seen.push(entry);
    return res;
  }) as typeof fetch;

describe('the MCP SDK client\'s own OAuth against an instance proxy URL', () => {
  let root: string;
  let daemon: ServeProcess;
  let base: string;
  let browser: Browser;
  let pat: Api;
  let upstream: Awaited<ReturnType<typeof startMcpServer>>;
  let callback: Awaited<ReturnType<typeof startCallbackServer>>;
  let docs: Awaited<ReturnType<typeof startHttpsDocs>>;
  let cimdUrl: string;
  let instanceA: string;
  let instanceB: string;
  const documents = new Map<string, unknown>();
  let dataDir: string;

  const proxyUrl = (id: string) => `${base}/svc/v1/apps/mcps/${id}/mcp`;

  beforeAll(async () => {
    root = await tempDir('svc-mcp-oauth-');
    const ca = await makeTestCa(root);
    [callback, upstream, browser] = await Promise.all([startCallbackServer(), startMcpServer({ stateful: true }), launchChromium()]);
    // The Client ID Metadata Document, at an https URL that is its own client_id.
    docs = await startHttpsDocs(ca, documents);
    cimdUrl = `${docs.origin}/oauth/client-metadata.json`;
    documents.set('/oauth/client-metadata.json', {
      client_id: cimdUrl,
      client_name: 'SDK test host (metadata document)',
      redirect_uris: [callback.redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    });
    dataDir = path.join(root, 'data');
    await mkdir(dataDir, { recursive: true });
    daemon = await startServe(
      dataDir,
      cleanEnv({
        SVC_KEYCHAIN: 'file',
        SVC_HOME: dataDir,
        SVC_RATE_LIMIT_CLIENT: '0',
        SVC_RATE_LIMIT_ADDRESS: '0',
        SVC_CLIENT_METADATA_ALLOW_LOOPBACK: '1',
        NODE_EXTRA_CA_CERTS: ca.caFile,
      }),
    );
    base = daemon.url;
    const m = daemon.stdout().match(/shown only once\):\s*\n\s*\n\s+(\S+)\s*\n/);
    if (!m) throw new Error(`no admin password in:\n${daemon.stdout()}`);
    const admin = await new Api(base).login('admin', m[1]);
    pat = await userApi(base, admin, 'pat', 'power_user');
    const add = async (name: string) => {
      const res = await pat.post('/svc/v1/mcps', { name, url: upstream.url, enabled: true });
      if (res.status !== 201) throw new Error(`instance: ${res.status} ${res.text}`);
      return res.body.instance.id as string;
    };
    instanceA = await add('Notes A');
    instanceB = await add('Notes B');
  });

  afterAll(async () => {
    await browser?.close();
    await daemon?.stop();
    await Promise.all([upstream?.close(), callback?.close(), docs?.close()]);
    if (root) await rm(root, { recursive: true, force: true });
  });

  /**
   * What a host does: connect; on UnauthorizedError send the person to the URL the SDK handed
   * the provider; on the callback finish the authorization and connect again.
   */
  async function connectAsHost(
    kind: 'dcr' | 'cimd',
    serverUrl: string,
    decide: { decision: 'approve' | 'deny'; instances?: string[] },
  ) {
    const provider = new HostAuthProvider(callback.redirectUri, kind === 'cimd' ? cimdUrl : undefined);
    const seen: Seen[] = [];
    const first = new StreamableHTTPClientTransport(new URL(serverUrl), { authProvider: provider, fetch: observe(seen) });
    const pre = new Client({ name: 'sdk-test-host', version: '1.0.0' });
    const err = await pre.connect(first).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err, `the first connect should need authorization; got ${String(err)}; requests: ${JSON.stringify(seen)}`).toBeInstanceOf(UnauthorizedError);
    expect(provider.redirects).toHaveLength(1);
    const authUrl = provider.redirects[0];
    const gotCallback = callback.next();
    const consent = await consentInBrowser(browser, new URL(base).origin, authUrl.href, { username: 'pat', password: PAT_PASSWORD, ...decide });
    const cb = await gotCallback;
    expect(cb.searchParams.get('state')).toBe(provider.expectedState);
    return { provider, seen, first, authUrl, consent, cb };
  }

  async function finish(flow: Awaited<ReturnType<typeof connectAsHost>>, serverUrl: string) {
    const code = flow.cb.searchParams.get('code');
    expect(code, `callback: ${flow.cb.href}`).toBeTruthy();
    await flow.first.finishAuth(code!);
    const transport = new StreamableHTTPClientTransport(new URL(serverUrl), { authProvider: flow.provider, fetch: observe(flow.seen) });
    const client = new Client({ name: 'sdk-test-host', version: '1.0.0' });
    return { client, transport };
  }

  async function asMetadata() {
    const res = await fetch(`${base}/.well-known/oauth-authorization-server/oauth`);
    expect(res.status).toBe(200);
    return (await res.json()) as { token_endpoint: string; registration_endpoint?: string; client_id_metadata_document_supported?: boolean };
  }

  it('a metadata document that is missing, not an object, names another client_id or holds a secret stops the sign-in with an error and makes no request', async () => {
    const good = documents.get('/oauth/client-metadata.json') as Record<string, unknown>;
    documents.set('/bad/not-object.json', 'just a string');
    documents.set('/bad/other-id.json', { ...good, client_id: `${docs.origin}/oauth/client-metadata.json` });
    documents.set('/bad/secret.json', { ...good, client_id: `${docs.origin}/bad/secret.json`, token_endpoint_auth_method: 'client_secret_basic', client_secret: 'x' });
    const before = (await pat.get('/svc/v1/access-requests')).body.data.length;
    for (const docPath of ['/bad/missing.json', '/bad/not-object.json', '/bad/other-id.json', '/bad/secret.json']) {
      const clientId = `${docs.origin}${docPath}`;
      const url = new URL(`${base}/oauth/auth`);
      for (const [k, v] of Object.entries({ client_id: clientId, response_type: 'code', redirect_uri: callback.redirectUri, code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256', resource: proxyUrl(instanceA) })) {
        url.searchParams.set(k, v);
      }
      const res = await fetch(url, { redirect: 'manual', headers: { Cookie: pat.cookieHeader } });
      expect(res.status, `${docPath}: ${res.headers.get('location')}`).toBe(400);
      expect(await res.text(), docPath).toMatch(/invalid_client/);
    }
    expect(docs.hits).toEqual(expect.arrayContaining(['/bad/missing.json', '/bad/not-object.json', '/bad/other-id.json', '/bad/secret.json']));
    expect((await pat.get('/svc/v1/access-requests')).body.data.length).toBe(before);
  });

  /** The first answer of svc's authorization endpoint to a metadata-document client with this redirect. */
  async function authorizeWithDocument(docPath: string, redirectUri: string) {
    const url = new URL(`${base}/oauth/auth`);
    const params = { client_id: `${docs.origin}${docPath}`, response_type: 'code', redirect_uri: redirectUri, code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256', resource: proxyUrl(instanceA) };
    for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
    return fetch(url, { redirect: 'manual', headers: { Cookie: pat.cookieHeader } });
  }

  it('a metadata document\'s redirect URIs pass the same allow-list as a registration: every bad scheme stops the sign-in and makes no request, the good ones go on', async () => {
    const good = documents.get('/oauth/client-metadata.json') as Record<string, unknown>;
    const before = (await pat.get('/svc/v1/access-requests')).body.data.length;
    for (const [i, uri] of BAD_REDIRECTS.entries()) {
      const docPath = `/redirects/bad-${i}.json`;
      documents.set(docPath, { ...good, client_id: `${docs.origin}${docPath}`, redirect_uris: [uri], application_type: /^https?:/.test(uri) ? 'web' : 'native' });
      const res = await authorizeWithDocument(docPath, uri);
      expect(res.status, `${uri}: ${res.headers.get('location')}`).toBe(400);
      expect(await res.text(), uri).toMatch(/invalid_redirect_uri|invalid_client/);
    }
    expect((await pat.get('/svc/v1/access-requests')).body.data.length).toBe(before);
    for (const [i, uri] of GOOD_REDIRECTS.entries()) {
      const docPath = `/redirects/good-${i}.json`;
      documents.set(docPath, { ...good, client_id: `${docs.origin}${docPath}`, redirect_uris: [uri], application_type: /^https?:/.test(uri) ? 'web' : 'native' });
      const res = await authorizeWithDocument(docPath, uri);
      expect(res.status, `${uri}: ${await res.clone().text()}`).toBe(303);
      expect(res.headers.get('location'), uri).toContain('/oauth/interaction/');
    }
  });

  it('a metadata document\'s client_name reaches the review API and page without bidi or invisible characters, as a client svc does not vouch for', async () => {
    const good = documents.get('/oauth/client-metadata.json') as Record<string, unknown>;
    const docPath = '/names/sneaky.json';
    const clientId = `${docs.origin}${docPath}`;
    const config = await oidc.discovery(new URL(`${base}/oauth`), clientId, undefined, oidc.None(), { execute: [oidc.allowInsecureRequests] });
    documents.set(docPath, { ...good, client_id: clientId, client_name: 'Notes\u202eppA\u2066\u200b Host', redirect_uris: [REDIRECT_URI] });
    let seen = false;
    const result = await authorize(config, pat, 'scope_user_user', { resource: proxyUrl(instanceA) }, undefined, async (id) => {
      const review = await pat.get(`/svc/v1/access-requests/${id}/review`);
      expect(review.body).toMatchObject({ app_client_id: clientId, client_kind: 'metadata_document', app_registered: false, app_name: 'Notes\uFFFDppA\uFFFD\uFFFD Host' });
      const page = await pat.get(`/ui/apps/access-requests/review?id=${id}`);
      expect(page.text).toContain('Known by its metadata document');
      for (const c of ['\u202e', '\u2066', '\u200b']) expect(page.text).not.toContain(c);
      // `svc requests list` names it as the page does, and says how svc knows it
      const listed = await runSvcInProcess(['requests', 'list'], { env: cleanEnv({ SVC_HOME: dataDir }), tty: { columns: 200 } });
      expect(listed.exitCode, listed.stderr).toBe(0);
      expect(listed.stdout.split('\n').find((l) => l.startsWith(id.slice(0, 8)))).toContain('Notes\uFFFDppA\uFFFD\uFFFD Host (metadata document)');
      expect((await pat.post(`/svc/v1/access-requests/${id}/deny`)).status).toBe(200);
      seen = true;
    });
    expect(seen).toBe(true);
    expect(result.error).toBe('access_denied');
  });

  for (const kind of ['dcr', 'cimd'] as const) {
    describe(kind === 'dcr' ? 'registered by Dynamic Client Registration' : 'known by a Client ID Metadata Document over HTTPS', () => {
      it('approve: tools/list and tools/call; then revoke: the next call is 401 and refresh is refused', async () => {
        const url = proxyUrl(instanceA);
        const flow = await connectAsHost(kind, url, { decision: 'approve' });
        const as = await asMetadata();
        // How the SDK got here: 401 -> RFC 9728 metadata for this very URL -> AS metadata -> registration.
        expect(flow.seen[0]).toMatchObject({ method: 'POST', url, status: 401 });
        expect(flow.seen.some((s) => s.url === `${base}/.well-known/oauth-protected-resource/svc/v1/apps/mcps/${instanceA}/mcp` && s.status === 200)).toBe(true);
        if (kind === 'dcr') {
          expect(flow.seen.some((s) => s.url === as.registration_endpoint && s.status === 201), JSON.stringify(flow.seen)).toBe(true);
        } else {
          expect(as.client_id_metadata_document_supported).toBe(true);
          expect(flow.provider.clientInformation()?.client_id).toBe(cimdUrl);
          expect(flow.seen.some((s) => s.url === as.registration_endpoint)).toBe(false);
          expect(docs.hits).toContain('/oauth/client-metadata.json');
        }
        expect(flow.authUrl.searchParams.get('resource')).toBe(url);
        // The person saw the client's redirect origin on the review page.
        expect(flow.consent.reviewText).toContain(new URL(callback.redirectUri).host);

        const { client, transport } = await finish(flow, url);
        await client.connect(transport);
        try {
          const tools = await client.listTools();
          expect(tools.tools.map((t) => t.name)).toEqual(expect.arrayContaining(['echo', 'add']));
          const called = await client.callTool({ name: 'echo', arguments: { message: 'through consent' } });
          expect(called.content).toEqual([{ type: 'text', text: 'echo: through consent' }]);

          // svc's record: an approved request of this client, made by pat on the page.
          const requestId = flow.consent.requestId!;
          const list = await pat.get('/svc/v1/access-requests?status=approved');
          const record = (list.body.data as any[]).find((x) => x.id === requestId);
          expect(record).toMatchObject({ app_client_id: flow.provider.clientInformation()!.client_id, user: 'pat' });
          expect(record.approved.mcp_servers).toEqual([{ url: upstream.url, instance_ids: [instanceA] }]);

          // Refresh works while the grant stands (public client: client_id in the body).
          const clientId = flow.provider.clientInformation()!.client_id;
          const refresh = (token: string) =>
            fetch(as.token_endpoint, {
              method: 'POST',
              headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
              body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: token, client_id: clientId }),
            });
          const tokens = flow.provider.tokens()!;
          expect(tokens.refresh_token, 'the SDK host asked for refresh_token; svc should issue one').toBeTruthy();
          const refreshed = await refresh(tokens.refresh_token!);
          expect(refreshed.status, await refreshed.clone().text()).toBe(200);
          const fresh = (await refreshed.json()) as OAuthTokens;
          flow.provider.saveTokens({ ...tokens, ...fresh });

          const revoked = await pat.post(`/svc/v1/access-requests/${requestId}/revoke`);
          expect(revoked.status, revoked.text).toBe(200);

          // The very next call: 401 at the proxy, the SDK tries its refresh token and is refused.
          const before = flow.seen.length;
          const after = await client.listTools().then(
            () => null,
            (e: unknown) => e,
          );
          expect(after).toBeInstanceOf(UnauthorizedError);
          const next = flow.seen.slice(before);
          expect(next[0]).toMatchObject({ url, status: 401 });
          expect(next.find((s) => s.grantType === 'refresh_token'), JSON.stringify(next)).toMatchObject({ status: 400, error: 'invalid_grant' });
          // ...so it would send the person to authorize again.
          expect(flow.provider.redirects).toHaveLength(2);

          // The same, as a plain HTTP client sees it.
          const direct = await fetch(url, {
            method: 'POST',
            headers: { Authorization: `Bearer ${fresh.access_token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
            body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
          });
          expect(direct.status).toBe(401);
          expect(direct.headers.get('www-authenticate')).toMatch(/resource_metadata="[^"]+"/);
          const denied = await refresh(fresh.refresh_token ?? tokens.refresh_token!);
          expect(denied.status).toBe(400);
          expect((await denied.json()).error).toBe('invalid_grant');
        } finally {
          await client.close().catch(() => undefined);
        }
      });

      it('deny: the host gets access_denied and no token', async () => {
        const flow = await connectAsHost(kind, proxyUrl(instanceA), { decision: 'deny' });
        expect(flow.cb.searchParams.get('error')).toBe('access_denied');
        expect(flow.cb.searchParams.get('code')).toBeNull();
        expect(flow.provider.tokens()).toBeUndefined();
        const list = await pat.get('/svc/v1/access-requests?status=denied');
        expect((list.body.data as any[]).find((x) => x.id === flow.consent.requestId)).toMatchObject({ status: 'denied' });
      });

      it('granting another instance than the one the host signs in for is a denial: its token could reach nothing', async () => {
        // The host asks for instance B; the person ticks only A (same server URL) on the page and
        // approves. A token bound to B's proxy URL could do nothing, so the host is told no.
        const url = proxyUrl(instanceB);
        const flow = await connectAsHost(kind, url, { decision: 'approve', instances: [instanceA] });
        expect(flow.cb.searchParams.get('error')).toBe('access_denied');
        expect(flow.cb.searchParams.get('code')).toBeNull();
        expect(flow.provider.tokens()).toBeUndefined();
        const list = await pat.get('/svc/v1/access-requests?status=denied');
        expect((list.body.data as any[]).find((x) => x.id === flow.consent.requestId)).toMatchObject({ status: 'denied' });
      });
    });
  }
});
