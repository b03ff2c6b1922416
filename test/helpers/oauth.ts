import * as oidc from 'openid-client';
import type { TestDaemon } from './daemon.js';
import { Api, createBody } from './http.js';

export const REDIRECT_URI = 'http://127.0.0.1:65010/callback';

/** Registers an OAuth client through the admin API, as `svc clients add` does. */
export async function registerClient(admin: Api, opts: { name?: string; description?: string; public?: boolean; redirect_uris?: string[] } = {}) {
  const res = await admin.post('/admin/v1/clients', {
    name: opts.name ?? 'Demo App',
    description: opts.description,
    redirect_uris: opts.redirect_uris ?? [REDIRECT_URI],
    public: opts.public ?? false,
  });
  if (res.status !== 201) throw new Error(`register client: ${res.status} ${res.text}`);
  return { clientId: res.body.client.client_id as string, secret: res.body.client_secret as string | undefined };
}

/** openid-client configured for the daemon's embedded issuer (plain http on loopback). */
export async function oidcConfig(d: TestDaemon, clientId: string, secret?: string) {
  return oidc.discovery(new URL(`${d.baseUrl}/oauth`), clientId, undefined, secret ? oidc.ClientSecretBasic(secret) : oidc.None(), {
    execute: [oidc.allowInsecureRequests],
  });
}

/**
 * The authorization-code + PKCE dance of a real app: build the URL with openid-client, follow
 * the redirects with the user's svc session cookie (as the browser would), and redeem the code.
 */
export async function authorize(
  config: oidc.Configuration,
  user: Api,
  scope: string,
  extra: Record<string, string | string[]> = {},
  login?: { username: string; password: string },
  /** a standard client's sign-in stops at the review page: the person decides there (or elsewhere) */
  decide?: (accessRequestId: string) => Promise<void>,
) {
  const verifier = oidc.randomPKCECodeVerifier();
  const state = oidc.randomState();
  const built = oidc.buildAuthorizationUrl(config, {
    redirect_uri: REDIRECT_URI,
    ...(scope ? { scope } : {}),
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
  });
  // repeated parameters (RFC 8707 allows several `resource` values)
  for (const [k, v] of Object.entries(extra)) for (const one of Array.isArray(v) ? v : [v]) built.searchParams.append(k, one);
  let url: string = built.href;
  let decided = false;
  const jar = new Map<string, string>();
  for (const part of user.cookieHeader.split('; ').filter(Boolean)) {
    const at = part.indexOf('=');
    jar.set(part.slice(0, at), part.slice(at + 1));
  }
  for (let hop = 0; hop < 12; hop++) {
    if (decide && !decided && new URL(url).pathname === '/ui/apps/access-requests/review') {
      decided = true;
      await decide(new URL(url).searchParams.get('id')!);
    }
    if (url.startsWith(REDIRECT_URI)) {
      const callback = new URL(url);
      if (callback.searchParams.get('error')) return { error: callback.searchParams.get('error')!, description: callback.searchParams.get('error_description') };
      const tokens = await oidc.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state }, extra.resource ? { resource: String([extra.resource].flat()[0]) } : undefined);
      return { tokens };
    }
    const res = await fetch(url, { redirect: 'manual', headers: { Cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') } });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const at = pair.indexOf('=');
      const value = pair.slice(at + 1);
      if (value) jar.set(pair.slice(0, at), value);
      else jar.delete(pair.slice(0, at));
      // the same browser signs in again later with what it was given (the OAuth session among it)
      user.keepCookie(pair.slice(0, at), value || null);
    }
    let location = res.headers.get('location');
    if (!location && login && res.status === 200 && new URL(url).pathname === '/ui/login') {
      // the browser user fills in the login form
      const page = await res.text();
      const field = (name: string) => new RegExp(`name="${name}" value="([^"]*)"`).exec(page)?.[1] ?? '';
      const form = new URLSearchParams({ username: login.username, password: login.password, next: field('next').replace(/&amp;/g, '&'), _csrf: field('_csrf') });
      const posted = await fetch(new URL('/ui/login', url), {
        method: 'POST',
        redirect: 'manual',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded', Cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') },
        body: form,
      });
      for (const c of posted.headers.getSetCookie()) {
        const [pair] = c.split(';');
        const at = pair.indexOf('=');
        jar.set(pair.slice(0, at), pair.slice(at + 1));
      }
      location = posted.headers.get('location');
      if (!location && posted.status === 200) {
        // mid-authorization the login answers with a page that moves on by script (see src/ui/login.ts)
        location = /href="([^"]*)" id="continue"/.exec(await posted.text())?.[1]?.replace(/&amp;/g, '&') ?? null;
      }
    }
    if (!location) return { error: `stopped at ${res.status}`, description: (await res.text()).slice(0, 300), status: res.status };
    url = new URL(location, url).href;
  }
  throw new Error('too many redirects');
}

/** Creates a request for `clientId` and has `reviewer` approve it; answers the scope. */
export async function approvedScope(d: TestDaemon, reviewer: Api, clientId: string, role: 'scope_user_user' | 'scope_user_power_user' = 'scope_user_user', approved?: unknown) {
  const app = new Api(d.url);
  const created = await app.post('/svc/v1/apps/request-access', createBody({ app_client_id: clientId, requested_role: role }));
  if (created.status !== 201) throw new Error(`create: ${created.status} ${created.text}`);
  const res = await reviewer.put(`/svc/v1/access-requests/${created.body.id}/approve`, { approved_role: role, ...(approved ? { approved } : {}) });
  if (res.status !== 200) throw new Error(`approve: ${res.status} ${res.text}`);
  return { id: created.body.id as string, scope: res.body.access_request_scope as string };
}
