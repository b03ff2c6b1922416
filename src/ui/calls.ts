import { timingSafeEqual } from 'node:crypto';
import type Router from '@koa/router';
import type { Middleware } from 'koa';
import { csrfToken, sessionUser } from '../auth/sessions.js';
import { AppError } from '../errors.js';
import type { AppContext, AppDeps, AppState } from '../http/context.js';
import { argumentsText, visibleText } from '../mcp/display.js';
import type { HeldCalls } from '../mcp/held-calls.js';
import type { HeldCallView } from '../mcp/policy-schemas.js';
import type { UserRecord } from '../store/schema.js';
import { html, SafeHtml, timeHtml } from './html.js';
import { sendPage } from './login.js';

/**
 * `/ui/calls`: the tool calls held for the signed-in person, with their arguments in full and
 * Approve and Deny buttons. The page keeps itself current (it fetches its list every 2 s) and its
 * title carries the count, so a tab left open says when something waits. Its decisions are form
 * posts guarded as the review page's are: same origin, then the session's CSRF token.
 */
export const CALLS_PATH = '/ui/calls';
const LIST_PATH = `${CALLS_PATH}/list`;
const APPROVE_PATH = `${CALLS_PATH}/approve`;
const DENY_PATH = `${CALLS_PATH}/deny`;

const STYLE = new SafeHtml(`
main{max-width:48rem}
.call{border:1px solid var(--border);border-radius:10px;padding:1rem;margin:1rem 0;background:var(--bg)}
.call h2{font-size:1.05rem;margin:0 0 .35rem;overflow-wrap:anywhere}
.call p{margin:.2rem 0;overflow-wrap:anywhere}
.call pre{margin:.6rem 0;padding:.6rem .75rem;border-radius:8px;border:1px solid var(--border);background:var(--card);white-space:pre-wrap;overflow-wrap:anywhere;max-height:24rem;overflow:auto;font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace}
.call form{display:inline-flex;gap:.5rem;align-items:center;margin:.25rem .5rem 0 0;flex-wrap:wrap}
.call select{width:auto}
.done{font-size:.92rem;color:var(--muted)}
.notice{padding:.6rem .9rem;border-radius:8px;border:1px solid var(--border);overflow-wrap:anywhere}
.notice.error{border-color:var(--danger);color:var(--danger)}
`);

const sameToken = (given: unknown, expected: string | undefined) => {
  if (typeof given !== 'string' || !expected) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
};

const secondsLeft = (c: HeldCallView, now: number) => Math.max(0, Math.ceil((Date.parse(c.expires_at) - now) / 1000));
const appOf = (c: HeldCallView) => c.app_name ?? c.app_client_id;

function pendingHtml(calls: HeldCallView[], csrf: string, now: number): SafeHtml {
  if (calls.length === 0) return html`<p class="muted" id="none">No tool calls are waiting for you.</p>`;
  return html`${calls.map(
    (c) => html`<section class="call" data-call="${c.id}" aria-labelledby="call-${c.id}">
<h2 id="call-${c.id}"><strong>${appOf(c)}</strong> wants to run <code class="tool">${visibleText(c.tool)}</code></h2>
<p>On <strong>${c.instance_name}</strong> · client <code>${c.app_client_id}</code> · ${c.via === 'rest' ? 'REST execute' : 'MCP'} · grant <a href="/ui/grants/tools?id=${encodeURIComponent(c.access_request_id)}" title="Change this grant's tool choices"><code>${c.access_request_id.slice(0, 8)}</code></a></p>
<p class="done">Held ${timeHtml(c.created_at, now)}; answered for the app as “nobody answered” in <span class="left">${secondsLeft(c, now)}</span> s unless you decide.</p>
<pre class="args" aria-label="Arguments">${argumentsText(c.arguments)}</pre>
<form method="post" action="${APPROVE_PATH}"><input type="hidden" name="_csrf" value="${csrf}"><input type="hidden" name="id" value="${c.id}">
<select name="remember_minutes" aria-label="How long"><option value="">Just this call</option><option value="10">And this tool for 10 minutes</option><option value="60">And this tool for an hour</option></select>
<button type="submit" class="primary approve">Approve</button></form>
<form method="post" action="${DENY_PATH}"><input type="hidden" name="_csrf" value="${csrf}"><input type="hidden" name="id" value="${c.id}"><button type="submit" class="danger deny">Deny</button></form>
</section>`,
  )}`;
}

function decidedHtml(calls: HeldCallView[]): SafeHtml {
  if (calls.length === 0) return html``;
  return html`<h2>Decided in the last hour</h2><ul class="done" id="decided">${calls.map(
    (c) => html`<li data-call="${c.id}" data-status="${c.status}"><code>${visibleText(c.tool)}</code> for <strong>${appOf(c)}</strong>: ${c.status}${c.decided_by ? html` by ${c.decided_by}` : ''}${c.reason ? html` (${c.reason})` : ''}</li>`,
  )}</ul>`;
}

const titleFor = (n: number) => (n > 0 ? `(${n}) Held tool calls` : 'Held tool calls');

/** Fetches the list every 2 s and swaps it in when it changed (the server renders it, escaped). */
const REFRESH_SCRIPT = `(function(){
var list=document.getElementById('pending'),decided=document.getElementById('decided-box'),last=list.getAttribute('data-ids');
function poll(){fetch('${LIST_PATH}',{credentials:'same-origin',headers:{Accept:'application/json'}}).then(function(r){if(!r.ok)throw r;return r.json()}).then(function(d){
document.title=d.title+' · svc';if(d.ids!==last){last=d.ids;list.innerHTML=d.pending;list.setAttribute('data-ids',d.ids)}decided.innerHTML=d.decided}).catch(function(){}).then(function(){setTimeout(poll,2000)})}
setTimeout(poll,2000)})();`;

export function mountCallsUi(router: Router<AppState>, deps: AppDeps, held: HeldCalls, sameOrigin: Middleware<AppState>): void {
  const parts = async (user: UserRecord, csrf: string) => {
    const calls = await held.list(user);
    const pending = calls.filter((c) => c.status === 'pending').reverse();
    return { pending, decided: calls.filter((c) => c.status !== 'pending'), html: pendingHtml(pending, csrf, deps.clock()) };
  };

  async function render(ctx: AppContext, user: UserRecord, notice?: { text: string; error?: boolean }, status = 200): Promise<void> {
    const csrf = csrfToken(ctx) ?? '';
    const p = await parts(user, csrf);
    sendPage(
      ctx,
      status,
      titleFor(p.pending.length),
      (nonce) => html`<style nonce="${nonce}">${STYLE}</style><div class="card">
<h1>Held tool calls</h1>
<p class="muted">Calls of tools you set to ask wait here for you. Approved, the call runs once, exactly as shown; denied, or not answered in time, it does not run and the app is told so.</p>
${notice ? html`<p class="notice${notice.error ? ' error' : ''}" role="${notice.error ? 'alert' : 'status'}" id="notice">${notice.text}</p>` : ''}
<div id="pending" data-ids="${p.pending.map((c) => c.id).join(',')}">${p.html}</div>
<div id="decided-box">${decidedHtml(p.decided)}</div>
<p class="muted">Signed in as <strong>${user.username}</strong> · <a href="/ui">Home</a> · <a href="/ui/logout">Log out</a></p>
</div>`,
      REFRESH_SCRIPT,
    );
    // the list refreshes itself from this origin
    ctx.set('Content-Security-Policy', `${ctx.response.get('Content-Security-Policy')}; connect-src 'self'`);
  }

  router.get(CALLS_PATH, async function showCalls(ctx) {
    const user = await sessionUser(ctx, deps);
    if (!user) return ctx.redirect(`/ui/login?next=${encodeURIComponent(CALLS_PATH)}`);
    // after a decision (post, redirect, get): what was decided, so a reload never posts again
    const decided = typeof ctx.query.decided === 'string' ? ctx.query.decided.slice(0, 100) : '';
    let notice: { text: string } | undefined;
    if (decided) {
      try {
        const call = await held.get(user, decided);
        if (call.status === 'approved' || (call.status === 'failed' && call.decided_by)) notice = { text: `Approved ${visibleText(call.tool)} for ${appOf(call)}: it runs once, exactly as shown.` };
        else if (call.status === 'denied') notice = { text: `Denied ${visibleText(call.tool)} for ${appOf(call)}: it did not run.` };
      } catch {
        /* gone from the history: nothing to say */
      }
    }
    await render(ctx, user, notice);
  });

  router.get(LIST_PATH, async function listCalls(ctx) {
    const user = await sessionUser(ctx, deps);
    if (!user) throw new AppError('login_required', 'Not logged in.');
    const p = await parts(user, csrfToken(ctx) ?? '');
    ctx.body = { title: titleFor(p.pending.length), count: p.pending.length, ids: p.pending.map((c) => c.id).join(','), pending: p.html.value, decided: decidedHtml(p.decided).value };
  });

  /** Same origin first (a refusal is a page here), then a session and its CSRF token, then the decision. */
  const decide = (decision: 'approved' | 'denied'): Middleware<AppState> =>
    async function decideFromPage(ctx) {
      try {
        await sameOrigin(ctx, async () => undefined);
      } catch (err) {
        if (!(err instanceof AppError) || err.status >= 500) throw err;
        const user = await sessionUser(ctx, deps);
        if (!user) throw err;
        return render(ctx, user, { text: 'Refused: this form came from another site. Nothing was decided.', error: true }, err.status);
      }
      const user = await sessionUser(ctx, deps);
      if (!user) return ctx.redirect(`/ui/login?next=${encodeURIComponent(CALLS_PATH)}`);
      const body = (ctx.request as { body?: Record<string, unknown> }).body ?? {};
      if (!sameToken(body._csrf, csrfToken(ctx))) return render(ctx, user, { text: 'This form was stale (or not sent from this page). Nothing was decided; try again.', error: true }, 403);
      const id = typeof body.id === 'string' ? body.id.slice(0, 100) : '';
      const minutes = typeof body.remember_minutes === 'string' && /^\d{1,4}$/.test(body.remember_minutes) ? Math.min(1440, Number(body.remember_minutes)) : undefined;
      try {
        const call = await held.decide(user, id, decision, decision === 'approved' && minutes ? minutes : undefined);
        deps.logger.info({ call: call.id, user: user.id }, `held tool call ${decision} (browser)`);
        ctx.status = 303;
        ctx.redirect(`${CALLS_PATH}?decided=${encodeURIComponent(call.id)}`);
        ctx.status = 303;
      } catch (err) {
        if (!(err instanceof AppError) || err.status >= 500) throw err;
        return render(ctx, user, { text: `${err.message} Nothing was decided.`, error: true }, err.status);
      }
    };
  router.post(APPROVE_PATH, decide('approved'));
  router.post(DENY_PATH, decide('denied'));
}
