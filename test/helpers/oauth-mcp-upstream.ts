/**
 * A hosted MCP server of the tests' own that signs people in with OAuth, on loopback: an
 * authorization server (oidc-provider: PKCE, refresh-token rotation, short-lived JWT access tokens,
 * RFC 8707 resource indicators, RFC 7009 revocation, RFC 9207 `iss`) and, beside it, an MCP SDK
 * server that accepts only its Bearer tokens (audience = its own URL) and points at its
 * authorization server with RFC 9728 protected-resource metadata.
 *
 * Three ways a client gets registered, one per variant: RFC 7591 dynamic registration
 * (`dynamic`), a client registered beforehand only (`pre_registered`, confidential), or a Client
 * ID Metadata Document the authorization server fetches from the client's URL (`metadata_document`).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Page } from 'playwright-core';
import { createLocalJWKSet, exportJWK, generateKeyPair, type JWK, jwtVerify } from 'jose';
import Provider, { errors as oidcErrors } from 'oidc-provider';
import { z } from 'zod';

export type RegistrationKind = 'dynamic' | 'pre_registered' | 'metadata_document';

export interface OAuthUpstreamOptions {
  registration: RegistrationKind;
  /** the client's redirect URI, for the pre-registered client */
  redirectUri?: string;
  /** seconds an access token lasts */
  accessTokenTtl?: number;
  /** a refresh token only for a grant that includes offline_access (as OpenID Connect providers do) */
  refreshOnlyOffline?: boolean;
}

const SCOPE = 'mcp:tools';
export const PRE_CLIENT_ID = 'svc-pre-registered';
export const PRE_CLIENT_SECRET = 'pre-registered-secret-4f1c9e7a2b';

/** oidc-provider's storage, in memory; a URL client_id is a Client ID Metadata Document, fetched. */
function memoryAdapter(store: Map<string, { payload: Record<string, unknown>; consumed?: number }>, fetchDocuments: boolean) {
  return class MemoryAdapter {
    constructor(private readonly model: string) {}
    private key(id: string) {
      return `${this.model}:${id}`;
    }
    async upsert(id: string, payload: Record<string, unknown>) {
      store.set(this.key(id), { payload });
      if (typeof payload.grantId === 'string') {
        const grantKey = `grant:${payload.grantId}`;
        const list = (store.get(grantKey)?.payload.keys as string[] | undefined) ?? [];
        store.set(grantKey, { payload: { keys: [...list, this.key(id)] } });
      }
    }
    async find(id: string) {
      if (this.model === 'Client' && fetchDocuments && /^https?:\/\//.test(id)) return fetchClientDocument(id);
      const found = store.get(this.key(id));
      if (!found) return undefined;
      return { ...found.payload, ...(found.consumed ? { consumed: found.consumed } : {}) };
    }
    async findByUid(uid: string) {
      for (const [k, v] of store) if (k.startsWith(`${this.model}:`) && v.payload.uid === uid) return { ...v.payload, ...(v.consumed ? { consumed: v.consumed } : {}) };
      return undefined;
    }
    async findByUserCode() {
      return undefined;
    }
    async consume(id: string) {
      const found = store.get(this.key(id));
      if (found) found.consumed = Math.floor(Date.now() / 1000);
    }
    async destroy(id: string) {
      store.delete(this.key(id));
    }
    async revokeByGrantId(grantId: string) {
      const grantKey = `grant:${grantId}`;
      for (const k of (store.get(grantKey)?.payload.keys as string[] | undefined) ?? []) store.delete(k);
      store.delete(grantKey);
    }
  };
}

/** A client described by the document at its own URL (the client_id), as a public client. */
async function fetchClientDocument(url: string) {
  const res = await fetch(url, { redirect: 'error' });
  if (!res.ok) return undefined;
  const doc = (await res.json()) as Record<string, unknown>;
  if (doc.client_id !== url) return undefined;
  return { ...doc, client_id: url, token_endpoint_auth_method: 'none' };
}

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function readJson(req: http.IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const raw = Buffer.concat(chunks).toString('utf8');
  return raw ? JSON.parse(raw) : undefined;
}

function buildMcp(seenTools: string[], authorization: () => string | undefined) {
  const server = new McpServer({ name: 'oauth-upstream', version: '1.0.0' });
  server.registerTool('echo', { description: 'Echoes its message', inputSchema: { message: z.string() } }, async ({ message }) => {
    seenTools.push('echo');
    return { content: [{ type: 'text', text: `echo: ${message}` }] };
  });
  // a careless server that quotes the request's credential back: svc must not pass it on
  server.registerTool('whoami', { description: 'Quotes the Authorization header it got' }, async () => {
    seenTools.push('whoami');
    return { content: [{ type: 'text', text: `you sent ${authorization() ?? 'nothing'}` }] };
  });
  return server;
}

export interface OAuthUpstream {
  /** the authorization server's issuer */
  issuer: string;
  /** the MCP server's URL (its canonical resource) */
  mcpUrl: string;
  /** the Bearer tokens the MCP server was sent (accepted or not) */
  tokensSeen: string[];
  /** access tokens the authorization server issued */
  issued: string[];
  /** refresh tokens it issued */
  refreshTokens: string[];
  /** refresh_token grants the authorization server answered (successfully or not) */
  refreshes: () => number;
  /** the authorization requests it got, as their query */
  authorizeRequests: URLSearchParams[];
  /** client registrations it answered (RFC 7591) */
  registrations: () => number;
  /** the kind of each token it revoked (RFC 7009): refresh_token, access_token or other */
  revoked: string[];
  /** tools the MCP server ran */
  toolsRun: string[];
  /** every access token issued so far fails at the MCP server from now on (as an expired or revoked one would) */
  rejectIssuedTokens(): void;
  /** every refresh is refused from now on (invalid_grant) */
  refuseRefresh: boolean;
  /** while set, the MCP server refuses every token, new ones too (invalid_token) */
  refuseEveryToken: boolean;
  /** while set, the person is not sent back to the client: the answer's URL is kept in `callbacks` */
  holdCallbacks: boolean;
  callbacks: string[];
  /** while set, the MCP server answers each request with a 307 to this URL */
  redirectTo: string | null;
  close(): Promise<void>;
}

/** The authorization server and its MCP server, started on loopback. */
export async function startOAuthMcpUpstream(opts: OAuthUpstreamOptions): Promise<OAuthUpstream> {
  const asServer = http.createServer();
  const mcpServer = http.createServer();
  const issuer = await listen(asServer);
  const mcpOrigin = await listen(mcpServer);
  const mcpUrl = `${mcpOrigin}/mcp`;
  const ttl = opts.accessTokenTtl ?? 60;

  const { privateKey } = await generateKeyPair('ES256', { extractable: true });
  const jwk = { ...(await exportJWK(privateKey)), alg: 'ES256', use: 'sig', kid: 'k1' } as JWK;
  const { d: _d, ...publicJwk } = jwk;
  const jwks = createLocalJWKSet({ keys: [publicJwk] });

  const state = {
    refreshes: 0,
    registrations: 0,
    refuseRefresh: false,
    refuseEveryToken: false,
    redirectTo: null as string | null,
    holdCallbacks: false,
  };
  const tokensSeen: string[] = [];
  const issued: string[] = [];
  const refreshTokens: string[] = [];
  const authorizeRequests: URLSearchParams[] = [];
  const revoked: string[] = [];
  const toolsRun: string[] = [];
  const rejected = new Set<string>();
  const store = new Map<string, { payload: Record<string, unknown>; consumed?: number }>();

  const staticClients =
    opts.registration === 'pre_registered'
      ? [
          {
            client_id: PRE_CLIENT_ID,
            client_secret: PRE_CLIENT_SECRET,
            client_name: 'svc (registered by hand)',
            redirect_uris: [opts.redirectUri ?? 'http://127.0.0.1:1/none'],
            grant_types: ['authorization_code', 'refresh_token'],
            response_types: ['code'],
            token_endpoint_auth_method: 'client_secret_basic',
          },
        ]
      : [];

  const provider = new Provider(issuer, {
    adapter: memoryAdapter(store, opts.registration === 'metadata_document') as never,
    clients: staticClients,
    jwks: { keys: [jwk] as never },
    cookies: { keys: ['fixture-cookie-key-0123456789abcdef'] },
    pkce: { required: () => true },
    // its one signing key is an ES256 one
    clientDefaults: { id_token_signed_response_alg: 'ES256', grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'] },
    scopes: ['openid', 'offline_access'],
    discovery: opts.registration === 'metadata_document' ? { client_id_metadata_document_supported: true } : {},
    issueRefreshToken: async (_ctx: unknown, client: { grantTypeAllowed(t: string): boolean }, code: { scopes: Set<string> }) =>
      client.grantTypeAllowed('refresh_token') && (!opts.refreshOnlyOffline || code.scopes.has('offline_access')),
    rotateRefreshToken: () => true,
    ttl: { AccessToken: ttl, RefreshToken: 86_400, AuthorizationCode: 60, Interaction: 600, Session: 3600, Grant: 86_400 },
    features: {
      devInteractions: { enabled: true },
      revocation: { enabled: true },
      registration: { enabled: opts.registration === 'dynamic' },
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => mcpUrl,
        useGrantedResource: async () => true,
        async getResourceServerInfo(_ctx: unknown, resource: string) {
          if (resource !== mcpUrl) throw new oidcErrors.InvalidTarget();
          return { scope: SCOPE, audience: mcpUrl, accessTokenTTL: ttl, accessTokenFormat: 'jwt' as const, jwt: { sign: { alg: 'ES256' } } };
        },
      },
    },
  } as never);
  provider.on('grant.success', (ctx: { oidc: { params?: { grant_type?: string } }; body?: { access_token?: string; refresh_token?: string } }) => {
    if (ctx.oidc.params?.grant_type === 'refresh_token') state.refreshes++;
    const token = ctx.body?.access_token;
    if (token) issued.push(token);
    if (ctx.body?.refresh_token) refreshTokens.push(ctx.body.refresh_token);
  });
  provider.on('grant.error', (ctx: { oidc: { params?: { grant_type?: string } } }) => {
    if (ctx.oidc.params?.grant_type === 'refresh_token') state.refreshes++;
  });
  provider.on('registration_create.success', () => {
    state.registrations++;
  });
  provider.on('revocation.success', (ctx: { oidc: { entities?: { RefreshToken?: { jti?: string }; AccessToken?: { jti?: string } } } }) => {
    const entities = ctx.oidc.entities ?? {};
    revoked.push(entities.RefreshToken ? 'refresh_token' : entities.AccessToken ? 'access_token' : 'other');
  });
  const callback = provider.callback();
  const callbacks: string[] = [];
  asServer.on('request', (req, res) => {
    const url = new URL(req.url ?? '/', issuer);
    if (state.holdCallbacks) {
      const setHeader = res.setHeader.bind(res);
      res.setHeader = (name: string, value: number | string | readonly string[]) => {
        if (name.toLowerCase() === 'location' && String(value).includes('/ui/mcp-oauth/callback')) {
          callbacks.push(String(value));
          return setHeader(name, `${issuer}/held`);
        }
        return setHeader(name, value);
      };
    }
    if (url.pathname === '/auth') authorizeRequests.push(url.searchParams);
    if (url.pathname === '/token/revocation' && req.method === 'POST') revoked.push('request');
    // a refused refresh, as when the person revoked svc's access at the provider
    if (url.pathname === '/token' && state.refuseRefresh && req.method === 'POST') {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
        if (body.get('grant_type') === 'refresh_token') {
          state.refreshes++;
          res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'invalid_grant', error_description: 'grant request is invalid' }));
          return;
        }
        res.writeHead(500).end();
      });
      return;
    }
    callback(req, res);
  });

  const resourceMetadataUrl = `${mcpOrigin}/.well-known/oauth-protected-resource/mcp`;
  const metadata = { resource: mcpUrl, authorization_servers: [issuer], scopes_supported: [SCOPE], bearer_methods_supported: ['header'] };
  const challenge = (res: http.ServerResponse, error?: string) =>
    res
      .writeHead(401, { 'www-authenticate': `Bearer resource_metadata="${resourceMetadataUrl}"${error ? `, error="${error}"` : ''}, scope="${SCOPE}"`, 'content-type': 'application/json' })
      .end(JSON.stringify({ error: error ?? 'unauthorized' }));

  mcpServer.on('request', (req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', mcpOrigin);
      if (url.pathname === '/.well-known/oauth-protected-resource/mcp' || url.pathname === '/.well-known/oauth-protected-resource') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(metadata));
        return;
      }
      if (url.pathname !== '/mcp') {
        res.writeHead(404).end();
        return;
      }
      const auth = req.headers.authorization;
      const token = auth?.startsWith('Bearer ') ? auth.slice(7) : undefined;
      if (token) tokensSeen.push(token);
      if (state.redirectTo) {
        res.writeHead(307, { location: state.redirectTo }).end();
        return;
      }
      if (!token) return challenge(res);
      try {
        const { payload } = await jwtVerify(token, jwks, { issuer, audience: mcpUrl });
        if (rejected.has(token) || state.refuseEveryToken) return challenge(res, 'invalid_token');
        if (!String(payload.scope ?? '').split(' ').includes(SCOPE)) return challenge(res, 'insufficient_scope');
      } catch {
        return challenge(res, 'invalid_token');
      }
      const body = await readJson(req);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      const mcp = buildMcp(toolsRun, () => auth);
      res.on('close', () => {
        void transport.close();
        void mcp.close();
      });
      await mcp.connect(transport);
      await transport.handleRequest(req, res, body);
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500).end();
    });
  });

  return {
    issuer,
    mcpUrl,
    tokensSeen,
    issued,
    refreshTokens,
    authorizeRequests,
    revoked,
    toolsRun,
    refreshes: () => state.refreshes,
    registrations: () => state.registrations,
    rejectIssuedTokens() {
      for (const t of issued) rejected.add(t);
    },
    get refuseRefresh() {
      return state.refuseRefresh;
    },
    get refuseEveryToken() {
      return state.refuseEveryToken;
    },
    set refuseEveryToken(v: boolean) {
      state.refuseEveryToken = v;
    },
    set refuseRefresh(v: boolean) {
      state.refuseRefresh = v;
    },
    callbacks,
    get holdCallbacks() {
      return state.holdCallbacks;
    },
    set holdCallbacks(v: boolean) {
      state.holdCallbacks = v;
    },
    get redirectTo() {
      return state.redirectTo;
    },
    set redirectTo(v: string | null) {
      state.redirectTo = v;
    },
    async close() {
      for (const s of [asServer, mcpServer]) {
        s.closeAllConnections();
        await new Promise<void>((r) => s.close(() => r()));
      }
    },
  };
}

/** A server that only records what reaches it: where a redirect would take svc's requests. */
/** Signs in and consents on the test upstream's own pages, as a person would (any login and password do). */
export async function signInOnUpstreamPage(page: Page): Promise<void> {
  await page.locator('input[name=login]').fill('person@example.org');
  await page.locator('input[name=password]').fill('anything');
  await page.locator('button[type=submit]').click();
  await page.locator('button[type=submit]', { hasText: 'Continue' }).click();
}

export async function startCatcher() {
  const seen: http.IncomingHttpHeaders[] = [];
  const server = http.createServer((req, res) => {
    seen.push(req.headers);
    req.resume();
    res.writeHead(404).end();
  });
  const url = await listen(server);
  return {
    url: `${url}/caught`,
    seen,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
