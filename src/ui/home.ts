import type Router from '@koa/router';
import type { AccessRequestsService } from '../access-requests/service.js';
import { sessionUser } from '../auth/sessions.js';
import type { AppDeps, AppState } from '../http/context.js';
import { html } from './html.js';
import { sendPage } from './login.js';
import { APP_ROLE_NAMES, USER_ROLE_NAMES } from '../auth/roles.js';
import type { UserRecord } from '../store/schema.js';

/** `/ui`: who is signed in, and the requests waiting for a decision. */
export function mountHomeUi(router: Router<AppState>, deps: AppDeps, requests: AccessRequestsService, heldCount: (user: UserRecord) => Promise<number> = async () => 0): void {
  router.get('/ui', async function showHome(ctx) {
    const user = await sessionUser(ctx, deps);
    if (!user) {
      ctx.redirect('/ui/login?next=%2Fui');
      return;
    }
    const drafts = await requests.list(user, 'draft');
    const held = await heldCount(user);
    sendPage(ctx, 200, held > 0 ? `(${held}) svc` : 'svc', () => html`<div class="card">
<h1>svc</h1>
<p>Signed in as <strong>${user.username}</strong> (${USER_ROLE_NAMES[user.role]}). <a href="/ui/logout">Log out</a></p>
<h2>Waiting for you: pending (draft) requests</h2>
<p id="held-calls"><a href="/ui/calls">${held === 0 ? 'No tool calls are held for you.' : held === 1 ? '1 tool call is held for your decision.' : `${held} tool calls are held for your decision.`}</a></p>
${drafts.length === 0
  ? html`<p class="muted">No access requests are waiting.</p>`
  : html`<ul>${drafts.map((r) => html`<li><a href="/ui/apps/access-requests/review?id=${encodeURIComponent(r.id)}"><code>${r.app_client_id}</code></a> asks for ${APP_ROLE_NAMES[r.requested_role]}</li>`)}</ul>`}
<p><a href="/ui/apps" id="apps-link">Apps you let in</a>: what each does, its limits, and Revoke.</p>
<p class="muted"><a href="/swagger-ui">API reference</a></p>
</div>`);
  });
}
