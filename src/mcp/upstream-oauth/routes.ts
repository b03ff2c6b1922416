import type Router from '@koa/router';
import { z } from 'zod';
import { sessionIdHash, sessionUser } from '../../auth/sessions.js';
import { AppError } from '../../errors.js';
import type { AppContext, AppDeps, AppState } from '../../http/context.js';
import { type AnyRouteDef, defineRoute } from '../../http/route.js';
import { html } from '../../ui/html.js';
import { sendPage } from '../../ui/login.js';
import type { McpInstanceRecord } from '../../store/schema.js';
import type { McpInstancesService } from '../instances.js';
import { instanceParams } from '../schemas.js';
import { CALLBACK_PATH, CLIENT_METADATA_PATH, clientMetadataDocument } from './registration.js';
import type { UpstreamOAuth } from './service.js';

export const INSTANCES_PAGE = '/ui/mcps';
const signInPath = (id: string) => `${INSTANCES_PAGE}/${encodeURIComponent(id)}/sign-in`;
const query = (ctx: AppContext, name: string) => (typeof ctx.query[name] === 'string' ? (ctx.query[name] as string).slice(0, 4096) : undefined);

const logoutResponse = z.object({ revoked: z.boolean().describe('Whether the server confirmed the revocation (RFC 7009); false where it takes none') });
const cliLoginResponse = z.object({
  authorization_url: z.string().describe("The upstream authorization server's URL to open in a browser"),
  login: z.string().describe("This sign-in's secret: only its holder may ask how it went. Its state needs no svc session in that browser"),
  expires_at: z.string().describe('When the sign-in must be finished by (10 minutes)'),
});
const cliLoginStatusBody = z.strictObject({ login: z.string().min(1).max(100) });
const cliLoginStatusResponse = z.object({
  status: z.enum(['pending', 'connected', 'refused', 'unknown']).describe('unknown: expired, or not a sign-in of this instance'),
  why: z.string().optional().describe('Why it was refused'),
});

/**
 * The session API of an instance's sign-in: the start of one for `svc mcp login` and how it went,
 * and signing out (a web page's sign-in starts at /ui/mcps/{id}/sign-in).
 */
export function upstreamOAuthRoutes(instances: McpInstancesService, oauth: UpstreamOAuth): AnyRouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: '/svc/v1/mcps/{id}/oauth/login',
      operationId: 'startMcpInstanceLogin',
      summary: "Start a sign-in at the instance's server for the CLI: the upstream authorization URL, bound to the secret answered beside it",
      tags: ['mcp'],
      auth: 'session',
      params: instanceParams,
      responses: { 200: { description: 'The sign-in, under way for 10 minutes', schema: cliLoginResponse } },
      errors: [400, 401, 404, 502],
      handler: async (ctx, { params }) => oauth.startForCli(await instances.getOwned(ctx.state.user!, params.id)),
    }),
    defineRoute({
      method: 'post',
      path: '/svc/v1/mcps/{id}/oauth/login/status',
      operationId: 'getMcpInstanceLoginStatus',
      summary: 'How a sign-in started for the CLI went, asked with its secret',
      tags: ['mcp'],
      auth: 'session',
      params: instanceParams,
      body: cliLoginStatusBody,
      responses: { 200: { description: 'Its state', schema: cliLoginStatusResponse } },
      errors: [400, 401, 404],
      handler: async (ctx, { params, body }) => oauth.cliLoginStatus(await instances.getOwned(ctx.state.user!, params.id), body.login),
    }),
    defineRoute({
      method: 'post',
      path: '/svc/v1/mcps/{id}/oauth/logout',
      operationId: 'logoutMcpInstance',
      summary: "Forget the instance's upstream sign-in, revoking its tokens where the server takes revocations (RFC 7009)",
      tags: ['mcp'],
      auth: 'session',
      params: instanceParams,
      responses: { 200: { description: 'Signed out: the instance needs a sign-in', schema: logoutResponse } },
      errors: [400, 401, 404],
      handler: async (ctx, { params }) => oauth.logout(await instances.getOwned(ctx.state.user!, params.id)),
    }),
  ];
}

function refusedPage(ctx: AppContext, status: number, title: string, why: string): void {
  sendPage(ctx, status, title, () => html`<div class="card">
<h1>${title}</h1>
<p class="error" id="state">Nothing was stored.</p>
<p>${why}</p>
<p><a href="${INSTANCES_PAGE}">Your MCP instances</a></p>
</div>`);
}

function instancesPage(ctx: AppContext, list: McpInstanceRecord[], oauth: UpstreamOAuth, username: string): void {
  sendPage(ctx, 200, 'MCP instances', () => html`<div class="card">
<h1>Your MCP instances</h1>
${list.length === 0 ? html`<p>You have none. Add one with <code>svc mcp add --name NAME --url URL</code>.</p>` : ''}
<ul class="instances">${list.map((m) => {
    const auth = oauth.view(m);
    return html`<li data-instance="${m.id}"><strong>${m.name}</strong> <code>${m.url}</code> ${
      auth
        ? auth.status === 'connected'
          ? html`<span class="state">signed in</span> <a class="button" href="${signInPath(m.id)}">Sign in again</a>`
          : html`<span class="state error">needs sign-in</span> <a class="button sign-in" href="${signInPath(m.id)}">Sign in</a>`
        : ''
    }</li>`;
  })}</ul>
<p class="muted">Signed in as <strong>${username}</strong> · <a href="/ui">Home</a></p>
</div>`);
}

/**
 * The browser's side: the instances page with its Sign in buttons, the start of a sign-in (bound
 * to this browser's session), the callback the upstream sends the person back to, and svc's
 * Client ID Metadata Document.
 */
export function mountUpstreamOAuthUi(router: Router<AppState>, deps: AppDeps, instances: McpInstancesService, oauth: UpstreamOAuth): void {
  router.get(CLIENT_METADATA_PATH, function clientDocument(ctx) {
    ctx.set('Cache-Control', 'public, max-age=300');
    ctx.body = clientMetadataDocument(deps.baseUrl());
  });

  router.get(INSTANCES_PAGE, async function showInstances(ctx) {
    const user = await sessionUser(ctx, deps);
    if (!user) return ctx.redirect(`/ui/login?next=${encodeURIComponent(INSTANCES_PAGE)}`);
    instancesPage(ctx, await instances.listOwned(user), oauth, user.username);
  });

  router.get(`${INSTANCES_PAGE}/:id/sign-in`, async function startSignIn(ctx) {
    const user = await sessionUser(ctx, deps);
    const session = sessionIdHash(ctx);
    const id = String(ctx.params.id).slice(0, 100);
    if (!user || !session) return ctx.redirect(`/ui/login?next=${encodeURIComponent(signInPath(id))}`);
    let instance: McpInstanceRecord;
    try {
      instance = await instances.getOwned(user, id);
      const url = await oauth.start(instance, { session_hash: session });
      ctx.status = 303;
      ctx.redirect(url);
      ctx.status = 303;
    } catch (err) {
      if (!(err instanceof AppError) || err.status >= 500 && err.code !== 'mcp_oauth_discovery_failed' && err.code !== 'mcp_oauth_registration_failed') throw err;
      refusedPage(ctx, err.status === 404 ? 404 : err.status >= 500 ? 502 : 400, 'The sign-in could not start', err.message);
    }
  });

  router.get(CALLBACK_PATH, async function finishSignIn(ctx) {
    const result = await oauth.finish({ code: query(ctx, 'code'), state: query(ctx, 'state'), iss: query(ctx, 'iss'), error: query(ctx, 'error') }, sessionIdHash(ctx));
    if ('refusal' in result) {
      deps.logger.info({ why: result.refusal.title }, 'mcp instance sign-in refused at the callback');
      return refusedPage(ctx, result.refusal.status, result.refusal.title, result.refusal.why);
    }
    sendPage(ctx, 200, 'Signed in', () => html`<div class="card">
<h1>Signed in to ${result.instance.name}</h1>
<p id="state">svc holds the sign-in: apps you grant this instance use it without ever seeing it. You may close this tab (svc mcp login, if it started this, says so too).</p>
<p><a href="${INSTANCES_PAGE}">Your MCP instances</a></p>
</div>`);
  });
}
