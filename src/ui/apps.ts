import type Router from '@koa/router';
import type { Middleware } from 'koa';
import type { ActivityStore } from '../activity/store.js';
import type { ActivityEvent } from '../activity/schemas.js';
import type { AccessRequestsService } from '../access-requests/service.js';
import { APP_ROLE_NAMES } from '../auth/roles.js';
import { csrfToken, sessionUser } from '../auth/sessions.js';
import { AppError } from '../errors.js';
import type { AppContext, AppDeps, AppState } from '../http/context.js';
import type { AccessRequestRecord, McpInstanceRecord, UserRecord } from '../store/schema.js';
import { relativeTime, relativeWhen } from '../text.js';
import { html, timeHtml } from './html.js';
import { sendPage } from './login.js';
import { formOf, sameToken } from './review.js';

export const APPS_PATH = '/ui/apps';
const REVOKE_PATH = '/ui/apps/revoke';
/** Events shown per grant, and how often the page asks for new ones. */
const RECENT = 10;
const REFRESH_MS = 2000;

const eventText = (e: ActivityEvent, now: number) =>
  `${relativeWhen(e.time, now)}  ${e.kind}${e.tool ? ` ${e.mcp_method ?? ''} ${e.tool}` : e.model ? ` ${e.model}` : e.mcp_method ? ` ${e.mcp_method}` : ''}  ${e.status} ${e.outcome}${e.reason ? ` (${e.reason})` : ''}  ${e.duration_ms} ms${e.tokens_in !== undefined || e.tokens_out !== undefined ? `  ${e.tokens_estimated ? '~' : ''}${e.tokens_in ?? '?'}/${e.tokens_out ?? '?'} tokens` : ''}`;

/**
 * Keeps each grant's recent activity current: asks the activity API (quietly: this polling does not
 * fill the daemon's log) and writes each event as text, never as markup, since the names in it
 * are the apps' own.
 */
const REFRESH_SCRIPT = `(function(){
var relativeTime=${relativeTime.toString()};
var lists=document.querySelectorAll('ol.activity[data-grant]');
function fill(ol,data){ol.textContent='';if(!data.length){var li=document.createElement('li');li.className='muted';li.textContent='No calls yet.';ol.appendChild(li);return}
data.forEach(function(e){var li=document.createElement('li');li.textContent=e.line;li.className=e.outcome;ol.appendChild(li)})}
function line(e){var what=e.tool?' '+(e.mcp_method||'')+' '+e.tool:e.model?' '+e.model:e.mcp_method?' '+e.mcp_method:'';
var tokens=(e.tokens_in!==undefined||e.tokens_out!==undefined)?'  '+(e.tokens_estimated?'~':'')+(e.tokens_in===undefined?'?':e.tokens_in)+'/'+(e.tokens_out===undefined?'?':e.tokens_out)+' tokens':'';
var t=Date.parse(e.time);return (isNaN(t)?e.time:relativeTime(t-Date.now()))+'  '+e.kind+what+'  '+e.status+' '+e.outcome+(e.reason?' ('+e.reason+')':'')+'  '+e.duration_ms+' ms'+tokens}
function tick(){lists.forEach(function(ol){fetch('/svc/v1/activity?limit=${RECENT}&grant='+encodeURIComponent(ol.getAttribute('data-grant')),{headers:{'x-svc-quiet':'1'},credentials:'same-origin'})
.then(function(r){return r.ok?r.json():null}).then(function(b){if(b)fill(ol,b.data.map(function(e){return{line:line(e),outcome:e.outcome}}))}).catch(function(){})})}
if(lists.length)setInterval(tick,${REFRESH_MS});
})();`;

const STYLE = `.grant{border-top:1px solid var(--border);padding:1rem 0}.grant h2{font-size:1.1rem;margin:0 0 .25rem}
ol.activity{font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;padding-left:1.2rem;margin:.5rem 0}ol.activity li.refused,ol.activity li.error{color:var(--danger)}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.15rem .75rem;margin:.5rem 0}dt{color:var(--muted)}dd{margin:0}`;

interface GrantView {
  record: AccessRequestRecord;
  name: string;
  instances: string[];
  recent: ActivityEvent[];
  figures: Awaited<ReturnType<AccessRequestsService['figuresOf']>>;
}

/**
 * `/ui/apps`: the signed-in person's active grants (apps and API keys), with what each does: last
 * used, calls and tokens today, limits, its recent activity as it happens, and a Revoke button
 * (a form post, same-origin and CSRF-checked like the review page's).
 */
export function mountAppsUi(
  router: Router<AppState>,
  deps: AppDeps,
  requests: AccessRequestsService,
  activity: ActivityStore,
  ownedInstances: (user: UserRecord) => Promise<McpInstanceRecord[]>,
  sameOrigin: Middleware<AppState>,
): void {
  async function grantsOf(user: UserRecord): Promise<GrantView[]> {
    const mine = (await requests.list(user, 'approved')).filter((r) => r.user_id === user.id);
    const instances = new Map((await ownedInstances(user)).map((i) => [i.id, i.name]));
    return Promise.all(
      mine.map(async (record) => ({
        record,
        name: (await requests.appInfoFor(record))?.name ?? record.authorize?.client_name ?? record.app_client_id,
        instances: (record.approved?.mcp_servers ?? []).flatMap((s) => s.instance_ids.map((id) => instances.get(id) ?? id.slice(0, 8))),
        recent: await activity.list({ grants: new Set([record.id]), limit: RECENT }),
        figures: await requests.figuresOf(record),
      })),
    );
  }

  router.get(APPS_PATH, async function showApps(ctx) {
    const user = await sessionUser(ctx, deps);
    if (!user) {
      ctx.redirect(`/ui/login?next=${encodeURIComponent(APPS_PATH)}`);
      return;
    }
    renderApps(ctx, user, await grantsOf(user), csrfToken(ctx) ?? '', deps.clock());
  });

  router.post(REVOKE_PATH, sameOrigin, async function revokeFromApps(ctx) {
    const user = await sessionUser(ctx, deps);
    if (!user) {
      ctx.redirect(`/ui/login?next=${encodeURIComponent(APPS_PATH)}`);
      return;
    }
    const form = formOf(ctx);
    if (!sameToken(form._csrf, csrfToken(ctx))) throw new AppError('invalid_csrf_token', 'This form was stale (or not sent from this page); reload the page and try again.');
    const id = typeof form.id === 'string' ? form.id.slice(0, 100) : '';
    const revoked = await requests.revoke(user, id);
    deps.logger.info({ accessRequest: revoked.id, user: user.id }, 'access request revoked');
    ctx.status = 303;
    ctx.redirect(`${APPS_PATH}?revoked=${encodeURIComponent(revoked.id.slice(0, 8))}`);
    ctx.status = 303;
  });
}

function renderApps(ctx: AppContext, user: UserRecord, grants: GrantView[], csrf: string, now: number): void {
  const revoked = typeof ctx.query.revoked === 'string' ? ctx.query.revoked.slice(0, 8) : '';
  sendPage(
    ctx,
    200,
    'Your apps',
    (nonce) => html`<style nonce="${nonce}">${STYLE}</style><div class="card">
<h1>Apps you let in</h1>
<p class="muted">Signed in as <strong>${user.username}</strong>. <a href="/ui">Home</a></p>
${revoked ? html`<p role="status" id="revoked">Revoked grant <code>${revoked}</code>: its tokens stop on their next call.</p>` : ''}
${grants.length === 0
  ? html`<p class="muted" id="no-grants">No app has access right now.</p>`
  : grants.map((g) => {
      const { usage, limits } = g.figures;
      return html`<section class="grant" id="grant-${g.record.id}">
<h2>${g.name}</h2>
<dl>
<dt>Client</dt><dd><code>${g.record.app_client_id}</code></dd>
<dt>Role</dt><dd>${APP_ROLE_NAMES[g.record.approved_role ?? 'scope_user_user']}</dd>
<dt>MCP instances</dt><dd>${g.instances.length ? html`${g.instances.join(', ')} · <a href="/ui/grants/tools?id=${encodeURIComponent(g.record.id)}">tool choices</a>` : 'none'}</dd>
<dt>Last used</dt><dd>${usage?.last_used_at ? timeHtml(usage.last_used_at, now) : 'never'}</dd>
<dt>Today</dt><dd class="today">${usage?.today.calls ?? 0} calls, ${usage?.today.tokens ?? 0} tokens</dd>
<dt>Limits</dt><dd class="limits">${limits?.requests_per_minute ? `${limits.requests_per_minute} calls a minute` : 'no limit on calls'}; ${limits?.tokens_per_day ? `${limits.tokens_per_day} tokens a day` : 'no limit on tokens'}</dd>
</dl>
<ol class="activity" data-grant="${g.record.id}">${g.recent.length ? g.recent.map((e) => html`<li class="${e.outcome}">${eventText(e, now)}</li>`) : html`<li class="muted">No calls yet.</li>`}</ol>
<form method="post" action="${REVOKE_PATH}"><input type="hidden" name="id" value="${g.record.id}"><input type="hidden" name="_csrf" value="${csrf}">
<button type="submit" class="danger" id="revoke-${g.record.id.slice(0, 8)}">Revoke</button></form>
</section>`;
    })}
</div>`,
    REFRESH_SCRIPT,
  );
}
