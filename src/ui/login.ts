import { randomBytes, timingSafeEqual } from 'node:crypto';
import type Router from '@koa/router';
import type { Middleware } from 'koa';
import type { LoginService } from '../auth/login.js';
import type { LoginLinks } from '../auth/login-links.js';
import { endSession, sessionUser, startSession } from '../auth/sessions.js';
import { AppError } from '../errors.js';
import type { AppContext, AppDeps, AppState } from '../http/context.js';
import { fromThisMachine, loopbackPeerUid } from '../http/peer-uid.js';
import { contentSecurityPolicy, html, newNonce, page } from './html.js';

const LOGIN_CSRF_COOKIE = 'svc_login_csrf';
export const DEFAULT_NEXT = '/ui';

/** Only a path on this origin: never `//host`, `/\host` or an absolute URL (no open redirect). */
export function safeNext(next: unknown, baseUrl: string): string {
  if (typeof next !== 'string' || !next.startsWith('/') || next.startsWith('//') || next.startsWith('/\\') || next.length > 2048) return DEFAULT_NEXT;
  try {
    const base = new URL(baseUrl);
    const url = new URL(next, base);
    // Dot segments can collapse into `//host`, which a browser reads as another origin.
    if (url.origin !== base.origin || url.pathname.startsWith('//') || url.pathname.includes('\\')) return DEFAULT_NEXT;
    return `${url.pathname}${url.search}`;
  } catch {
    return DEFAULT_NEXT;
  }
}

export function sendPage(ctx: AppContext, status: number, title: string, render: (nonce: string) => ReturnType<typeof html>, script?: string): void {
  const nonce = newNonce();
  ctx.status = status;
  ctx.set('Content-Security-Policy', contentSecurityPolicy(nonce));
  // With `no-referrer`, browsers send `Origin: null` on a page's own form posts, which
  // sameOriginOnly must refuse; `same-origin` keeps the real Origin there and sends nothing elsewhere.
  ctx.set('Referrer-Policy', 'same-origin');
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = page({ title, nonce, body: render(nonce), script });
}

function renderLogin(ctx: AppContext, next: string, csrf: string, error?: string, status = 200): void {
  sendPage(ctx, status, 'Log in', () => html`<div class="card">
<h1>Log in to svc</h1>
${error ? html`<p class="error" role="alert">${error}</p>` : ''}
<form method="post" action="/ui/login">
<input type="hidden" name="next" value="${next}"><input type="hidden" name="_csrf" value="${csrf}">
<label for="username">Username</label><input type="text" id="username" name="username" autocomplete="username" required autofocus>
<label for="password">Password</label><input type="password" id="password" name="password" autocomplete="current-password" required>
<div class="actions"><button class="primary" type="submit">Log in</button></div>
</form></div>`);
}

function loginCsrf(ctx: AppContext, secure: boolean): string {
  const existing = ctx.cookies.get(LOGIN_CSRF_COOKIE, { signed: true });
  if (existing) return existing;
  const token = randomBytes(24).toString('base64url');
  ctx.cookies.set(LOGIN_CSRF_COOKIE, token, { signed: true, httpOnly: true, sameSite: 'strict', secure, maxAge: 60 * 60 * 1000 });
  return token;
}

/**
 * Whether a page of another site sent the browser here: Sec-Fetch-Site says so on current
 * browsers (`none` when the person opened the URL, `same-origin` from svc's own pages); for one
 * that does not send it, a Referer from another origin says so.
 */
function sentByAnotherSite(ctx: AppContext, baseUrl: string): boolean {
  const site = ctx.get('Sec-Fetch-Site');
  if (site) return site !== 'none' && site !== 'same-origin';
  const referer = ctx.get('Referer');
  if (!referer) return false;
  try {
    const from = new URL(referer);
    const base = new URL(baseUrl);
    // svc's own pages, under the base URL or a loopback name of its port
    return !(from.origin === base.origin || (LOOPBACK.has(from.hostname) && from.port === base.port && from.protocol === base.protocol));
  } catch {
    return true;
  }
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * Why a `svc open` link may not sign this browser in, whatever its token:
 * - another site sent the browser here: someone else's link pushed into the person's browser
 *   would sign them in as that account (login CSRF);
 * - the connection comes from another local user's process: the link was handed to the person's
 *   browser on its command line, which every user of the machine can read (/proc/PID/cmdline),
 *   and a process of theirs could use it first. Told where the kernel tells it (Linux, a direct
 *   connection from this machine); behind a proxy (--trust-proxy) the connection is the proxy's,
 *   and this check is left out. The daemon's own user and root pass;
 * - the connection comes from this machine but its owner cannot be told: the peer's socket is no
 *   longer open and held (it sent the link and closed at once, and its lingering row shows uid 0
 *   whoever it was), so it is nobody's to trust.
 * The owner is read here, for this route alone, not as each connection is accepted: a read of the
 * kernel's tables costs milliseconds, which every connection of every app would pay. A browser
 * waits for its answer, so its socket is still open and held when it is read.
 */
async function linkRefusal(ctx: AppContext, deps: AppDeps): Promise<{ title: string; why: string } | null> {
  if (sentByAnotherSite(ctx, deps.baseUrl())) {
    return { title: 'This sign-in link was opened by another site', why: 'A link from svc open signs in only when you open it, not when a page sends you to it.' };
  }
  if (!deps.config.trustProxy && process.getuid && fromThisMachine(ctx.req.socket)) {
    const uid = await loopbackPeerUid(ctx.req.socket);
    if (uid === null) {
      deps.logger.warn('a login link was refused: the local process that sent it could not be told (it closed its connection)');
      return { title: 'svc could not tell which user of this computer opened this link', why: 'A link from svc open signs in only a browser of the user who runs svc, and this connection closed before its owner could be read.' };
    }
    if (uid !== process.getuid() && uid !== 0) {
      deps.logger.warn({ uid }, 'a login link was refused: it came from another local user');
      return { title: 'This sign-in link was opened by another user of this computer', why: 'A link from svc open signs in only a browser of the user who runs svc.' };
    }
  }
  return null;
}

/** Whether this request's connection can still carry an answer (the peer has not closed or reset it). */
const answerable = (ctx: AppContext) => !ctx.req.socket.destroyed && ctx.req.socket.writable;

const sameToken = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

/** The browser login form (decisions: Users and sessions); it signs in with the same LoginService as the API. */
export function mountLoginUi(router: Router<AppState>, deps: AppDeps, login: LoginService, sameOrigin: Middleware<AppState>, links: LoginLinks): void {
  const secure = () => deps.baseUrl().startsWith('https:');

  router.get('/ui/login', async function showLogin(ctx) {
    const next = safeNext(ctx.query.next, deps.baseUrl());
    if (await sessionUser(ctx, deps)) {
      ctx.redirect(next);
      return;
    }
    renderLogin(ctx, next, loginCsrf(ctx, secure()));
  });

  router.post('/ui/login', sameOrigin, async function submitLogin(ctx) {
    const form = ((ctx.request as { body?: Record<string, unknown> }).body ?? {}) as Record<string, unknown>;
    const next = safeNext(form.next, deps.baseUrl());
    const expected = ctx.cookies.get(LOGIN_CSRF_COOKIE, { signed: true });
    const csrf = loginCsrf(ctx, secure());
    if (!expected || typeof form._csrf !== 'string' || !sameToken(form._csrf, expected)) {
      renderLogin(ctx, next, csrf, 'Your login form was stale; please try again.', 403);
      return;
    }
    const username = typeof form.username === 'string' ? form.username.slice(0, 64) : '';
    const password = typeof form.password === 'string' ? form.password.slice(0, 1024) : '';
    try {
      const user = await login.authenticate(username, password, ctx.ip);
      await startSession(ctx, user);
      deps.logger.info({ user: user.id }, 'login (browser)');
      if (next.startsWith('/oauth/')) {
        // A sign-in in progress may end at the app's redirect URI on another origin; as the end of
        // this form post's redirects, CSP form-action 'self' would block it. A page breaks the chain.
        sendPage(ctx, 200, 'Signed in', () => html`<div class="card"><h1>Signed in</h1><p>Continuing the sign-in…</p><p><a href="${next}" id="continue">Continue</a></p></div>`, `location.replace(${JSON.stringify(next).replace(/</g, '\\u003c')});`);
        return;
      }
      ctx.status = 303;
      ctx.redirect(next);
      ctx.status = 303;
    } catch (err) {
      if (!(err instanceof AppError) || err.status >= 500) throw err;
      if (err.headers['Retry-After']) ctx.set('Retry-After', err.headers['Retry-After']);
      const wait = Number(err.headers['Retry-After'] ?? 0);
      const waitText = wait >= 120 ? `${Math.ceil(wait / 60)} minutes` : `${wait} second${wait === 1 ? '' : 's'}`;
      renderLogin(ctx, next, csrf, err.status === 429 ? `Too many failed attempts; try again in ${waitText}.` : 'Wrong username or password.', err.status);
    }
  });

  // `svc open`: a link the CLI made signs this browser in once, then the home page
  router.get('/ui/login-link', async function redeemLoginLink(ctx) {
    // A connection that is gone gets no answer: the link is left for the browser that waits for
    // one. Asked first, while the connection's ends can still be read for the check below.
    if (!answerable(ctx)) {
      deps.logger.info('a login link was left unspent: its connection closed before the answer');
      return;
    }
    // Refused before the link is looked at: it is left unspent, and the session as it was.
    const refusal = await linkRefusal(ctx, deps);
    if (refusal) {
      sendPage(ctx, 403, refusal.title, () => html`<div class="card">
<h1>${refusal.title}</h1>
<p class="error" id="state">Nothing changed: you are signed in as before, or not at all.</p>
<p>${refusal.why} Open the link yourself, in your own browser, or run <code>svc open</code> again.</p>
<p><a href="/ui">Go to svc</a></p>
</div>`);
      return;
    }
    const token = typeof ctx.query.token === 'string' ? ctx.query.token : '';
    const spent = await links.redeem(token);
    const user = spent ? await deps.repos.users.get(spent.userId) : undefined;
    if (!spent || !user) {
      sendPage(ctx, 400, 'Link used or expired', () => html`<div class="card">
<h1>This sign-in link no longer works</h1>
<p>A link from <code>svc open</code> works once, within a minute. Run <code>svc open</code> again, or <a href="/ui/login">log in</a>.</p>
</div>`);
      return;
    }
    // Spent by the answer that signs in: one that was never written (the connection went first)
    // leaves the link as it was.
    const unspend = () =>
      spent.unspend().then(
        () => deps.logger.info({ user: user.id }, 'a login link was left unspent: its answer was never written'),
        (err: unknown) => deps.logger.warn({ err }, 'a login link whose answer was never written could not be taken back'),
      );
    if (!answerable(ctx) || ctx.res.closed) {
      await unspend();
      return;
    }
    ctx.res.once('close', () => void (ctx.res.writableFinished || unspend()));
    await startSession(ctx, user);
    deps.logger.info({ user: user.id }, 'login (one-time link)');
    ctx.status = 303;
    // a page of svc's own the CLI asked for (svc mcp login: the instance's sign-in), else home
    ctx.redirect(safeNext(ctx.query.next, deps.baseUrl()));
    ctx.status = 303;
  });

  router.get('/ui/logout', async function logoutUi(ctx) {
    if (sentByAnotherSite(ctx, deps.baseUrl())) {
      // a page of another site cannot end the person's session (svc's own link is same-origin)
      sendPage(ctx, 403, 'Log out?', () => html`<div class="card">
<h1>Another site sent you here to log out</h1>
<p class="error" id="state">You are still signed in.</p>
<p><a href="/ui/logout" id="logout">Log out of svc</a> · <a href="/ui">Back to svc</a></p>
</div>`);
      return;
    }
    endSession(ctx);
    ctx.status = 303;
    ctx.redirect('/ui/login');
    ctx.status = 303;
  });
}
