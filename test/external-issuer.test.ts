import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import Provider from 'oidc-provider';
import * as oidc from 'openid-client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ConfigError, resolveConfig } from '../src/config.js';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, createBody, userApi } from './helpers/http.js';

/**
 * `svc serve --issuer URL --audience AUD [--allow-jwt-typ]` against a second, separately started
 * oidc-provider on 127.0.0.1 acting as the external (Keycloak-like) authorization server. It
 * issues real JWT access tokens with the client_credentials grant and resource indicators; a
 * token customizer sets the subject to the svc user who approved the grant (as a real IdP's user
 * mapping would) and, per test, swaps client_id for azp or the typ header for JWT. svc finds the
 * JWKS only through the issuer's discovery document, over HTTP.
 */

const AUDIENCE = 'https://svc.example.test/api';
const CLIENT_ID = 'ext-notes-app';
const CLIENT_SECRET = 'ext-notes-app-secret-0123456789';
const MCP_URL = 'http://127.0.0.1:9321/mcp';

interface Knobs {
  sub?: string;
  azp?: boolean;
  typ?: string;
}

async function newKey(): Promise<JWK> {
  const { privateKey } = await generateKeyPair('ES256', { extractable: true });
  return { ...(await exportJWK(privateKey)), kid: randomUUID(), alg: 'ES256', use: 'sig' };
}

/** The external issuer: a real oidc-provider behind a server whose keys can be rotated. */
class ExternalIssuer {
  url = '';
  knobs: Knobs = {};
  keys: JWK[] = [];
  /** paths svc (or anyone) fetched, to show discovery and JWKS went over HTTP */
  hits: string[] = [];
  /** while set, every request gets a 503, as from an issuer that is down */
  down = false;
  private handler: http.RequestListener | null = null;
  private readonly server = http.createServer((req, res) => {
    this.hits.push(req.url ?? '');
    if (this.down) {
      res.writeHead(503).end();
      return;
    }
    this.handler!(req, res);
  });

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    await this.useKeys([await newKey()]);
  }

  /** A key rotation: a fresh provider (same issuer, same clients) publishing `keys`, the first signing. */
  async useKeys(keys: JWK[]): Promise<void> {
    this.keys = keys;
    const knobs = () => this.knobs;
    const provider = new Provider(this.url, {
      jwks: { keys: keys as never },
      clients: [
        {
          client_id: CLIENT_ID,
          client_secret: CLIENT_SECRET,
          grant_types: ['client_credentials'],
          redirect_uris: [],
          response_types: [],
          token_endpoint_auth_method: 'client_secret_basic',
          id_token_signed_response_alg: 'ES256',
        },
      ],
      features: {
        devInteractions: { enabled: false },
        clientCredentials: { enabled: true },
        resourceIndicators: {
          enabled: true,
          defaultResource: async () => AUDIENCE,
          useGrantedResource: async () => true,
          // any resource is a resource server here (so a token for another audience can be had)
          async getResourceServerInfo(ctx: { oidc: { params: { scope?: string } } }, resource: string) {
            return {
              scope: String(ctx.oidc.params.scope ?? ''),
              audience: resource,
              accessTokenTTL: 300,
              accessTokenFormat: 'jwt' as const,
              jwt: { sign: { alg: 'ES256' } },
            };
          },
        },
      },
      formats: {
        customizers: {
          async jwt(_ctx: unknown, _token: unknown, jwt: { header?: Record<string, unknown>; payload: Record<string, unknown> }) {
            const k = knobs();
            if (k.sub) jwt.payload.sub = k.sub;
            if (k.azp) {
              jwt.payload.azp = jwt.payload.client_id;
              delete jwt.payload.client_id;
            }
            if (k.typ) jwt.header = { ...jwt.header, typ: k.typ };
          },
        },
      },
    } as never);
    this.handler = provider.callback();
  }

  async token(scope: string, knobs: Knobs, resource = AUDIENCE): Promise<string> {
    this.knobs = knobs;
    try {
      const config = await oidc.discovery(new URL(this.url), CLIENT_ID, undefined, oidc.ClientSecretBasic(CLIENT_SECRET), {
        execute: [oidc.allowInsecureRequests],
      });
      const res = await oidc.clientCredentialsGrant(config, { scope, resource });
      return res.access_token;
    } catch (err) {
      const e = err as { error?: string; error_description?: string; message: string };
      throw new Error(`the issuer refused the token request: ${e.error ?? e.message} ${e.error_description ?? ''}`);
    } finally {
      this.knobs = {};
    }
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

const decode = (token: string) => {
  const [h, p] = token.split('.');
  return { header: JSON.parse(Buffer.from(h, 'base64url').toString()), payload: JSON.parse(Buffer.from(p, 'base64url').toString()) };
};

/** an svc daemon trusting the issuer, with alice, her MCP instance and her approved grant for the app */
async function svcFor(issuer: ExternalIssuer, allowJwtTyp: boolean) {
  const d = await startTestDaemon({ config: { issuer: issuer.url, audience: AUDIENCE, allowJwtTyp, rateLimitClient: 0, rateLimitAddress: 0 } });
  const admin = await new Api(d.url).login('admin', d.adminPassword);
  const alice = await userApi(d.url, admin, 'alice', 'power_user');
  const aliceId = (await alice.get('/svc/v1/auth/me')).body.user.id as string;
  const instanceId = (await alice.post('/svc/v1/mcps', { name: 'files', url: MCP_URL })).body.instance.id as string;
  const grant = async () => {
    const created = await new Api(d.url).post(
      '/svc/v1/apps/request-access',
      createBody({ app_client_id: CLIENT_ID, requested_role: 'scope_user_user', requested: { version: '1', mcp_servers: [{ url: MCP_URL }] } }),
    );
    expect(created.status).toBe(201);
    const res = await alice.put(`/svc/v1/access-requests/${created.body.id}/approve`, {
      approved_role: 'scope_user_user',
      approved: { version: '1', mcp_servers: [{ url: MCP_URL, instance_ids: [instanceId] }] },
    });
    expect(res.status).toBe(200);
    return { id: created.body.id as string, scope: res.body.access_request_scope as string };
  };
  const list = (token: string) => new Api(d.url).get('/svc/v1/apps/mcps', { Authorization: `Bearer ${token}` });
  return { d, admin, alice, aliceId, instanceId, grant, list, first: await grant() };
}

describe('external issuer mode (--issuer/--audience)', () => {
  let issuer: ExternalIssuer;
  let strict: Awaited<ReturnType<typeof svcFor>>;
  let lenient: Awaited<ReturnType<typeof svcFor>>;

  beforeAll(async () => {
    issuer = new ExternalIssuer();
    await issuer.start();
    strict = await svcFor(issuer, false);
    lenient = await svcFor(issuer, true);
  });
  afterAll(async () => {
    await strict?.d.stop();
    await lenient?.d.stop();
    await issuer?.stop();
  });

  const expect401 = (res: { status: number; body: any; headers: Headers }, d: TestDaemon) => {
    expect(res.status).toBe(401);
    expect(res.body.error).toMatchObject({ type: 'authentication_error', code: 'invalid_token' });
    expect(res.headers.get('www-authenticate')).toBe(`Bearer error="invalid_token", resource_metadata="${d.baseUrl}/.well-known/oauth-protected-resource", scope="scope_user_user"`);
  };

  it('accepts a token of the external issuer, found through its discovery document and JWKS over HTTP', async () => {
    const token = await issuer.token(strict.first.scope, { sub: strict.aliceId });
    const { header, payload } = decode(token);
    expect(header).toMatchObject({ alg: 'ES256', typ: 'at+jwt', kid: issuer.keys[0].kid });
    expect(payload).toMatchObject({ iss: issuer.url, aud: AUDIENCE, sub: strict.aliceId, client_id: CLIENT_ID, scope: strict.first.scope });

    const res = await strict.list(token);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.map((m: { id: string }) => m.id)).toEqual([strict.instanceId]);
    // since the daemon started: the first token verified (by this test or another) found the keys this way
    expect(issuer.hits).toContain('/.well-known/openid-configuration');
    expect(issuer.hits.some((p) => p.startsWith('/jwks'))).toBe(true);
    // cached afterwards: no further fetch for a known key
    issuer.hits.length = 0;
    expect((await strict.list(token)).status).toBe(200);
    expect(issuer.hits).toEqual([]);
  });

  it('names the external issuer and the configured audience in RFC 9728 metadata', async () => {
    const prm = await new Api(strict.d.url).get('/.well-known/oauth-protected-resource');
    expect(prm.body).toMatchObject({ resource: AUDIENCE, authorization_servers: [issuer.url] });
    expect(strict.d.app.issuer).toBe(issuer.url);
  });

  it('accepts azp in place of client_id', async () => {
    const token = await issuer.token(strict.first.scope, { sub: strict.aliceId, azp: true });
    const { payload } = decode(token);
    expect(payload.client_id).toBeUndefined();
    expect(payload.azp).toBe(CLIENT_ID);
    expect((await strict.list(token)).status).toBe(200);
  });

  it('finds the one access-request scope among other space-separated scopes', async () => {
    const token = await issuer.token(`mcp:read ${strict.first.scope} profile:basic`, { sub: strict.aliceId });
    expect(decode(token).payload.scope.split(' ')).toHaveLength(3);
    expect((await strict.list(token)).status).toBe(200);
    // but not two of them
    const second = await strict.grant();
    const two = await issuer.token(`${strict.first.scope} ${second.scope}`, { sub: strict.aliceId });
    expect401(await strict.list(two), strict.d);
  });

  it('refuses typ JWT unless --allow-jwt-typ, and accepts it with the flag', async () => {
    const forStrict = await issuer.token(strict.first.scope, { sub: strict.aliceId, typ: 'JWT' });
    expect(decode(forStrict).header.typ).toBe('JWT');
    const refused = await strict.list(forStrict);
    expect401(refused, strict.d);
    expect(refused.body.error.message).toMatch(/typ/);

    const forLenient = await issuer.token(lenient.first.scope, { sub: lenient.aliceId, typ: 'JWT' });
    const res = await lenient.list(forLenient);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.map((m: { id: string }) => m.id)).toEqual([lenient.instanceId]);
    // at+jwt stays accepted with the flag, and the flag opens no other check
    expect((await lenient.list(await issuer.token(lenient.first.scope, { sub: lenient.aliceId }))).status).toBe(200);
    expect401(await lenient.list(await issuer.token(lenient.first.scope, { sub: lenient.aliceId, typ: 'JWT' }, 'https://other.example.test')), lenient.d);
  });

  it('refuses a token for another audience', async () => {
    const token = await issuer.token(strict.first.scope, { sub: strict.aliceId }, 'https://other.example.test');
    expect(decode(token).payload.aud).toBe('https://other.example.test');
    const res = await strict.list(token);
    expect401(res, strict.d);
    expect(res.body.error.message).toMatch(/aud/);
    // nor does svc's own base URL stand in for the configured audience
    expect401(await strict.list(await issuer.token(strict.first.scope, { sub: strict.aliceId }, strict.d.baseUrl)), strict.d);
  });

  it('still checks the record: another user, another client, a revoked grant', async () => {
    expect401(await strict.list(await issuer.token(strict.first.scope, { sub: randomUUID() })), strict.d);
    // the same grant id approved on another svc does not carry over
    expect401(await strict.list(await issuer.token(lenient.first.scope, { sub: strict.aliceId })), strict.d);
    const g = await strict.grant();
    const token = await issuer.token(g.scope, { sub: strict.aliceId });
    expect((await strict.list(token)).status).toBe(200);
    expect((await strict.alice.post(`/svc/v1/access-requests/${g.id}/revoke`)).status).toBe(200);
    expect401(await strict.list(token), strict.d);
  });

  it('picks up a key rotation at the issuer (new kid) by refetching the JWKS', async () => {
    const before = await issuer.token(strict.first.scope, { sub: strict.aliceId });
    expect((await strict.list(before)).status).toBe(200);
    const oldKid = issuer.keys[0].kid;

    await issuer.useKeys([await newKey(), issuer.keys[0]]);
    const after = await issuer.token(strict.first.scope, { sub: strict.aliceId });
    expect(decode(after).header.kid).toBe(issuer.keys[0].kid);
    expect(decode(after).header.kid).not.toBe(oldKid);

    // jose refetches on an unknown kid at most every 30 s after the last fetch; move its clock
    // (only Date.now: svc's own clock and all timers stay real) past that cooldown
    const realNow = Date.now.bind(Date);
    const spy = vi.spyOn(Date, 'now').mockImplementation(() => realNow() + 31_000);
    try {
      issuer.hits.length = 0;
      const res = await strict.list(after);
      expect(res.status, res.text).toBe(200);
      expect(issuer.hits.some((p) => p.startsWith('/jwks'))).toBe(true);
    } finally {
      spy.mockRestore();
    }
    // the old key is still published, so its tokens still verify
    expect((await strict.list(await issuer.token(strict.first.scope, { sub: strict.aliceId }))).status).toBe(200);
  });

  it('an issuer that is down at first use: 503 issuer_unavailable with Retry-After (never 500, never 401), then works once it answers', async () => {
    const token = await issuer.token(strict.first.scope, { sub: strict.aliceId });
    const fresh = await svcFor(issuer, false);
    try {
      const ours = await issuer.token(fresh.first.scope, { sub: fresh.aliceId });
      issuer.down = true;
      const res = await fresh.list(ours);
      expect(res.status).toBe(503);
      expect(res.body.error).toMatchObject({ type: 'upstream_error', code: 'issuer_unavailable' });
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(res.text).not.toContain(ours);
      // the app keeps its token and retries; the operator's log says why
      const logs = fresh.d.logs.join('');
      expect(logs).toContain("cannot get the issuer's signing keys: discovery document of");
      expect(logs).not.toContain(ours);
      issuer.down = false;
      expect((await fresh.list(ours)).status).toBe(200);
      // and a token of the same issuer for another svc's grant still finds no record here
      expect401(await fresh.list(token), fresh.d);
    } finally {
      issuer.down = false;
      await fresh.d.stop();
    }
  });

  it('does not run the embedded authorization server: /oauth answers 404', async () => {
    for (const path of ['/oauth/.well-known/openid-configuration', '/oauth/auth', '/oauth/token', '/oauth/jwks']) {
      const res = await new Api(strict.d.url).get(path);
      expect(res.status, path).toBe(404);
      expect(res.body.error).toMatchObject({ type: 'not_found_error', code: 'not_found' });
    }
    const post = await new Api(strict.d.url).post('/oauth/token', 'grant_type=client_credentials', { 'Content-Type': 'application/x-www-form-urlencoded' });
    expect([404, 405]).toContain(post.status);
  });
});

describe('external issuer configuration', () => {
  it('reads --issuer, --audience and --allow-jwt-typ from flags and the environment', () => {
    expect(resolveConfig({ issuer: 'https://idp.example/realms/x', audience: 'svc-api', allowJwtTyp: true }, {})).toMatchObject({
      issuer: 'https://idp.example/realms/x',
      audience: 'svc-api',
      allowJwtTyp: true,
    });
    expect(resolveConfig({}, { SVC_ISSUER: 'https://idp.example', SVC_AUDIENCE: 'aud', SVC_ALLOW_JWT_TYP: '1' })).toMatchObject({
      issuer: 'https://idp.example',
      audience: 'aud',
      allowJwtTyp: true,
    });
    expect(resolveConfig({}, {})).toMatchObject({ issuer: null, audience: null, allowJwtTyp: false });
    // the issuer is compared by exact string (OpenID Discovery), so a trailing slash (Auth0) stays
    expect(resolveConfig({ issuer: 'https://tenant.auth0.example/' }, {}).issuer).toBe('https://tenant.auth0.example/');
    expect(() => resolveConfig({ audience: 'aud' }, {})).toThrow(ConfigError);
    expect(() => resolveConfig({ issuer: 'not a url' }, {})).toThrow(ConfigError);
    expect(() => resolveConfig({ issuer: 'ftp://idp.example' }, {})).toThrow(ConfigError);
  });
});
