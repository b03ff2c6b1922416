import { timingSafeEqual } from 'node:crypto';
import type Router from '@koa/router';
import type { Middleware } from 'koa';
import { CLIENT_KIND_BADGES } from '../access-requests/client-kinds.js';
import { type AppInfo, clientView, reviewView, type ToolReview } from '../access-requests/views.js';
import { CHOICE_LABELS, hintWords, policyFromPicks } from '../mcp/choices.js';
import { TOOL_CHOICES } from '../mcp/policy-schemas.js';
import type { ToolChoice, ToolPolicy } from '../store/schema.js';
import { approveBody } from '../access-requests/schemas.js';
import { type AccessRequestsService, decisionRedirect } from '../access-requests/service.js';
import { APP_ROLE_NAMES, USER_ROLE_NAMES } from '../auth/roles.js';
import { csrfToken, sessionUser } from '../auth/sessions.js';
import { AppError } from '../errors.js';
import type { AppContext, AppDeps, AppState } from '../http/context.js';
import { fromStoreError } from '../http/errors-middleware.js';
import type { AccessRequestRecord, AppRole, McpInstanceRecord, UserRecord } from '../store/schema.js';
import { appRoles } from '../store/schema.js';
import { html, SafeHtml } from './html.js';
import { sendPage } from './login.js';

/**
 * The browser review surface (decisions: Review surfaces): `GET /ui/apps/access-requests/review?id=` and its
 * two form posts. It reads the same review data as `GET /svc/v1/access-requests/{id}/review` and
 * decides through the same AccessRequestsService as the JSON API, so a decision made here shows in
 * `svc requests` and `svc review` at once, and the other way round.
 */
export const REVIEW_PATH = '/ui/apps/access-requests/review';
export const APPROVE_PATH = `${REVIEW_PATH}/approve`;
export const DENY_PATH = `${REVIEW_PATH}/deny`;
/** Where a popup-flow decision lands (post, redirect, get): a reload shows the outcome again, never re-posts. */
const DONE_PATH = `${REVIEW_PATH}/done`;

type ReviewData = Awaited<ReturnType<typeof reviewView>>;
type Form = Record<string, unknown>;

const ROLES: Record<AppRole, { name: string; detail: string }> = {
  scope_user_user: { name: APP_ROLE_NAMES.scope_user_user, detail: 'Chat completions, embeddings, the model list, and the MCP tools you tick below.' },
  scope_user_power_user: { name: APP_ROLE_NAMES.scope_user_power_user, detail: 'Everything User can do, plus managing model aliases and downloading model files.' },
};

const reviewHref = (id: string) => `${REVIEW_PATH}?id=${encodeURIComponent(id)}`;
const loginHref = (id: string) => `/ui/login?next=${encodeURIComponent(reviewHref(id))}`;

/** Constant-time comparison of the form's token with the session's. */
export function sameToken(given: unknown, expected: string | undefined): boolean {
  if (typeof given !== 'string' || !expected) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** A form field as a list of strings (a repeated field arrives as an array; anything nested is ignored). */
function strings(value: unknown): string[] {
  const list = Array.isArray(value) ? value : value === undefined ? [] : [value];
  return list.filter((v): v is string => typeof v === 'string' && v.length > 0 && v.length <= 100).slice(0, 100);
}

/** The limit fields of the approve form: empty is no limit; anything else must pass the API's own check. */
function limitsOfForm(form: Form): { limits?: Record<string, unknown> } {
  const field = (name: string) => {
    const v = form[name];
    if (typeof v !== 'string' || v.trim() === '') return undefined;
    return /^\d+$/.test(v.trim()) ? Number(v.trim()) : v;
  };
  const rpm = field('limit_rpm');
  const tokens = field('limit_tokens');
  if (rpm === undefined && tokens === undefined) return {};
  return { limits: { ...(rpm !== undefined ? { requests_per_minute: rpm } : {}), ...(tokens !== undefined ? { tokens_per_day: tokens } : {}) } };
}

export const formOf = (ctx: AppContext): Form => {
  const body = (ctx.request as { body?: unknown }).body;
  return body && typeof body === 'object' && !Array.isArray(body) ? (body as Form) : {};
};

function countdownText(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** The first letter of the app's name, for the monogram (escaped like every other app string). */
const monogram = (text: string) => (Array.from(text.trim())[0] ?? '?').toUpperCase();

const STYLE = new SafeHtml(`
main{max-width:44rem;margin:1.5rem auto}
.card.review{padding:0;overflow:hidden}
.app{display:flex;gap:1rem;align-items:flex-start;padding:1.5rem 1.5rem 1rem}
.monogram{flex:none;width:3.25rem;height:3.25rem;border-radius:14px;display:grid;place-items:center;font-weight:700;font-size:1.5rem;background:var(--accent);color:#fff;overflow:hidden}
.monogram.unknown{background:var(--muted)}
.who{min-width:0;flex:1}
.review code{word-break:normal;overflow-wrap:anywhere}
.eyebrow{margin:0;font-size:.78rem;letter-spacing:.06em;text-transform:uppercase;color:var(--muted);font-weight:600}
.review h1{margin:.15rem 0 .4rem;font-size:1.4rem;line-height:1.3;overflow-wrap:anywhere}
.desc{margin:.25rem 0 .5rem;overflow-wrap:anywhere;white-space:pre-line}
.client{margin:.35rem 0 0;font-size:.9rem;color:var(--muted);overflow-wrap:anywhere}
.badge{display:inline-block;font-size:.72rem;font-weight:600;line-height:1.6;padding:0 .55rem;border-radius:999px;border:1px solid var(--border);color:var(--muted);vertical-align:.1em;white-space:nowrap}
.badge.warn{border-color:var(--danger);color:var(--danger)}
.timer{display:flex;flex-wrap:wrap;align-items:baseline;gap:.25rem .5rem;margin:0 1.5rem;padding:.6rem .9rem;border-radius:10px;background:var(--bg);border:1px solid var(--border);font-size:.95rem}
.timer time{font-variant-numeric:tabular-nums;font-weight:700;font-size:1.05rem}
.timer.soon{border-color:var(--danger);color:var(--danger)}
.alert{margin:1rem 1.5rem 0;padding:.75rem 1rem;border-radius:10px;border:1px solid var(--danger);color:var(--danger);font-weight:600;overflow-wrap:anywhere}
.alert small{display:block;font-weight:400}
.notice{margin:1rem 1.5rem 1.25rem;padding:.75rem 1rem;border-radius:10px;border:1px solid var(--border);background:var(--bg);overflow-wrap:anywhere}
.review form{padding:0 1.5rem 1.5rem;margin:0}
fieldset{border:0;padding:0;margin:1.4rem 0 0;min-width:0}
legend{font-weight:700;font-size:1.05rem;padding:0;margin:0 0 .35rem}
.hint{margin:0 0 .5rem;font-size:.92rem;color:var(--muted);overflow-wrap:anywhere}
.choices{display:grid;gap:.5rem;margin:.5rem 0}
@media (min-width:40rem){.choices{grid-template-columns:repeat(auto-fill,minmax(17rem,1fr))}}
label.option{display:flex;gap:.75rem;align-items:flex-start;margin:0;padding:.7rem .9rem;border:1px solid var(--border);border-radius:10px;font-weight:400;cursor:pointer;background:var(--card)}
label.option:has(input:checked){border-color:var(--accent);box-shadow:inset 0 0 0 1px var(--accent)}
label.option:has(input:focus-visible){outline:3px solid var(--accent);outline-offset:2px}
label.option.off{cursor:not-allowed;opacity:.65;border-style:dashed}
label.option input{flex:none;width:1.2rem;height:1.2rem;margin:.2rem 0 0;accent-color:var(--accent)}
label.option span{min-width:0}
label.option strong{display:block;overflow-wrap:anywhere}
label.option small{display:block;color:var(--muted);font-size:.88rem}
.server{margin:.9rem 0 0;padding:.1rem 0 0}
.server+.server{border-top:1px solid var(--border);padding-top:.8rem}
.url{display:block;margin:0 0 .2rem;font-size:.95rem;font-weight:600}
.none{margin:.35rem 0;font-size:.92rem;color:var(--muted)}
.then{margin:1.4rem 0 0;font-size:.92rem;color:var(--muted);overflow-wrap:anywhere}
.review .actions{margin-top:1rem}
.review .actions button{flex:1 1 9rem;min-height:2.9rem;font-weight:600}
button.danger{border-color:var(--danger)}
button:disabled{opacity:.5;cursor:not-allowed}
.foot{border-top:1px solid var(--border);padding:.9rem 1.5rem;font-size:.88rem;color:var(--muted);overflow-wrap:anywhere}
.tools{margin:.6rem 0 0;padding:.5rem .75rem;border:1px solid var(--border);border-radius:10px}
.tools summary{cursor:pointer;font-weight:600;font-size:.95rem;overflow-wrap:anywhere}
.tools table{width:100%;border-collapse:collapse;margin:.4rem 0 0;font-size:.92rem}
.tools td{padding:.3rem .25rem;border-top:1px solid var(--border);vertical-align:top;overflow-wrap:anywhere}
.tools td.pick{width:11rem;text-align:right}
.tools select{width:auto;padding:.3rem .4rem}
.tools .desc{display:block;color:var(--muted);font-size:.85rem;white-space:normal}
.outcome{text-align:center;padding:2rem 1.5rem}
.outcome .icon{width:3.5rem;height:3.5rem;margin:0 auto 1rem;border-radius:50%;display:grid;place-items:center;font-size:1.8rem;font-weight:700;color:#fff;background:var(--muted)}
.outcome .icon.ok{background:#1a7f37}.outcome .icon.no{background:var(--danger)}
.outcome p{overflow-wrap:anywhere}
@media (max-width:30rem){main{margin:0 auto;padding:0}.card.review,.card.outcome{border-radius:0;border-left:0;border-right:0}.app{padding:1.1rem 1rem .8rem}.timer,.alert{margin-left:1rem;margin-right:1rem}.review form{padding:0 1rem 1.1rem}.foot{padding:.8rem 1rem}.review h1{font-size:1.2rem}.monogram{width:2.75rem;height:2.75rem;font-size:1.25rem}}
`);

const styleTag = (nonce: string) => html`<style nonce="${nonce}">${STYLE}</style>`;

/** Counts down from the server's expires_in_seconds on the monotonic clock; at zero the buttons stop. */
const COUNTDOWN_SCRIPT = `(function(){
var t=document.getElementById('time-left'),box=document.getElementById('timer'),form=document.getElementById('review-form');
if(!form)return;
var sent=false;form.addEventListener('submit',function(e){if(sent){e.preventDefault();return}sent=true;form.setAttribute('aria-busy','true')});
if(!t)return;
var end=performance.now()+Number(t.getAttribute('data-seconds'))*1000;
function fmt(s){var m=Math.floor(s/60),r=s%60;return m+':'+(r<10?'0':'')+r}
function over(){box.classList.add('soon');document.getElementById('timer-label').textContent='This request has expired.';t.hidden=true;
var b=form.querySelectorAll('button');for(var i=0;i<b.length;i++)b[i].disabled=true;document.getElementById('expired-note').hidden=false}
function tick(){var left=end-performance.now(),s=Math.max(0,Math.ceil(left/1000));t.textContent=fmt(s);t.setAttribute('datetime','PT'+s+'S');
if(s<=60)box.classList.add('soon');if(s<=0){over();return}setTimeout(tick,(left%1000)||1000)}
tick()})();`;

/** The popup's last page: it says what was decided, then closes itself (it was opened by the app's script). */
const CLOSE_SCRIPT = `setTimeout(function(){window.close();setTimeout(function(){if(!window.closed){document.getElementById('close-note').textContent='This window could not close itself. You can close it now and go back to the app.'}},400)},1200);`;

function appHeader(
  view: Pick<ReviewData, 'app_client_id' | 'app_registered'> & { app_name?: string; app_description?: string; client_kind?: ReviewData['client_kind']; redirect_origin?: string },
  eyebrow: string,
  title: SafeHtml,
) {
  // Only a name svc vouches for looks like a known app; a self-made name is the app's own claim.
  const known = Boolean(view.app_name) && view.app_registered;
  return html`<header class="app">
<div class="monogram${known ? '' : ' unknown'}" aria-hidden="true">${monogram(view.app_name ?? view.app_client_id)}</div>
<div class="who"><p class="eyebrow">${eyebrow}</p>
<h1>${title}</h1>
${view.app_description ? html`<p class="desc">${view.app_description}</p>` : ''}
<p class="client">Client ID <code>${view.app_client_id}</code> ${
  view.client_kind
    ? html`<span class="badge${view.client_kind === 'registered' ? '' : ' warn'}" id="client-kind">${CLIENT_KIND_BADGES[view.client_kind]}</span>`
    : known ? '' : html`<span class="badge warn">Not a registered app</span>`
}</p>
${view.redirect_origin ? html`<p class="client" id="redirect-origin">Signs in from <code>${view.redirect_origin}</code></p>` : ''}
</div></header>`;
}

/** For a sign-in made for MCP instances: said before the click, approving without them denies it. */
/** The command that adds an instance of a requested server: a command server (stdio://) is an admin's to add. */
const addHint = (url: string) => (/^stdio:/i.test(url) ? `svc mcp add --name NAME --url ${url} -- COMMAND [ARG]...` : `svc mcp add --name NAME --url ${url}`);

function signInNote(view: ReviewData) {
  const ids = view.sign_in_instance_ids ?? [];
  if (ids.length === 0) return '';
  const names = view.mcp_servers.flatMap((s) => s.instances).filter((i) => ids.includes(i.id)).map((i) => i.name);
  return html`<p class="hint" id="sign-in-note">This app signs in for ${
    names.length ? html`<strong>${names.join(', ')}</strong>` : 'an MCP instance that is not yours'
  }. Approving without ${names.length === 1 ? 'it' : 'any of them'} denies the sign-in: the app could reach nothing with it.</p>`;
}

type ReviewInstance = ReviewData['mcp_servers'][number]['instances'][number];

/**
 * An instance's tools, each with its annotations and a choice to change (the default selected).
 * A select's value names its choice and its tool (`ask:delete_file`), so what is posted says
 * which tool it is about without trusting an index.
 */
function toolsBlock(m: ReviewInstance, picks?: Map<string, ToolChoice>) {
  if (!m.enabled || m.tools_known === undefined) return '';
  const tools = m.tools ?? [];
  return html`<details class="tools" id="tools-${m.id}" open><summary>Tools of ${m.name}</summary>
${m.tools_known
  ? tools.length === 0
    ? html`<p class="hint">This server lists no tools.</p>`
    : html`<table><tbody>${tools.map((t) => {
        const chosen = picks?.get(t.name) ?? t.choice;
        const words = hintWords(t.annotations);
        return html`<tr data-tool="${t.name}"><td><code>${t.name}</code>${words.map((w) => html` <span class="badge${w === 'destructive' ? ' warn' : ''}">${w}</span>`)}${t.description ? html`<span class="desc">${t.description}</span>` : ''}</td>
<td class="pick">${t.owner_denied
  ? html`<span class="badge">Denied by its owner</span>`
  : html`<select name="tool_${m.id}" aria-label="${t.name}">${TOOL_CHOICES.map((c) => html`<option value="${c}:${t.name}"${c === chosen ? html` selected` : ''}>${CHOICE_LABELS[c]}${c === t.default_choice ? ' (default)' : ''}</option>`)}</select>`}</td></tr>`;
      })}</tbody></table>`
  : html`<p class="hint">Its tools are not known yet (the server did not answer). Each gets its default when called: ask for a tool that says it is destructive, allow for the rest.</p>`}
<p class="hint"><label for="tooldefault-${m.id}">Tools without a choice above</label> <select name="tooldefault_${m.id}" id="tooldefault-${m.id}"><option value="">By their annotations</option>${TOOL_CHOICES.map((c) => html`<option value="${c}">${CHOICE_LABELS[c]}</option>`)}</select></p>
</details>`;
}

/** The tool choices a form posted for one instance: its selects (`choice:name`) and its default. */
function picksOf(form: Form, instanceId: string): { picks: Map<string, ToolChoice>; fallback: ToolChoice | undefined } {
  const picks = new Map<string, ToolChoice>();
  const raw = form[`tool_${instanceId}`];
  for (const value of (Array.isArray(raw) ? raw : raw === undefined ? [] : [raw]).slice(0, 1000)) {
    if (typeof value !== 'string' || value.length > 300) continue;
    const at = value.indexOf(':');
    const choice = value.slice(0, at) as ToolChoice;
    if (at > 0 && TOOL_CHOICES.includes(choice) && value.length > at + 1) picks.set(value.slice(at + 1), choice);
  }
  const fallback = TOOL_CHOICES.find((c) => c === form[`tooldefault_${instanceId}`]);
  return { picks, fallback };
}

interface Selection {
  role?: AppRole;
  instanceIds?: Set<string>;
}

interface ReviewOpts {
  /** the redirect flow's destination, shown as text (never a link) */
  redirectUrl?: string | null;
  error?: AppError;
  selection?: Selection;
  status?: number;
  /** after an error: the form as sent, so the tool choices stay as the person set them */
  form?: Form;
}

function renderReview(ctx: AppContext, view: ReviewData, user: UserRecord, csrf: string, opts: ReviewOpts = {}): void {
  const cap = view.max_grantable_role;
  const offered = appRoles.slice(0, appRoles.indexOf(cap) + 1);
  const role = opts.selection?.role && offered.includes(opts.selection.role) ? opts.selection.role : view.suggested_role;
  // Each URL starts with the daemon's default selection ticked; after an error, with what was sent.
  const picked = (instance: { id: string; enabled: boolean; selected: boolean }) =>
    instance.enabled && (opts.selection?.instanceIds ? opts.selection.instanceIds.has(instance.id) : instance.selected);
  const title = view.app_name
    ? html`${view.app_name} wants to use your local AI`
    : html`An unregistered app wants to use your local AI`;
  const seconds = view.expires_in_seconds;

  sendPage(
    ctx,
    opts.status ?? 200,
    'Review access request',
    (nonce) => html`${styleTag(nonce)}<div class="card review">
${appHeader(view, 'Access request', title)}
<p class="timer${seconds <= 60 ? ' soon' : ''}" id="timer"><span id="timer-label">Time left to decide:</span> <time id="time-left" role="timer" data-seconds="${seconds}" datetime="PT${seconds}S">${countdownText(seconds)}</time></p>
${opts.error ? html`<p class="alert" role="alert" id="error">${opts.error.message}<small>Nothing was granted. Error: ${opts.error.code}</small></p>` : ''}
<p class="alert" role="alert" id="expired-note" hidden>This request expired. Nothing was granted; go back to the app and try again.</p>
<form method="post" action="${APPROVE_PATH}" id="review-form">
<input type="hidden" name="id" value="${view.id}"><input type="hidden" name="_csrf" value="${csrf}">
<fieldset><legend>Role</legend>
<p class="hint">The app asked for <strong>${ROLES[view.requested_role].name}</strong>.${
      cap !== view.requested_role ? html` You can grant at most <strong>${ROLES[cap].name}</strong> (your role is ${USER_ROLE_NAMES[user.role]}).` : ''
    }</p>
<div class="choices">${offered.map(
  (r) => html`<label class="option" for="role-${r}"><input type="radio" name="approved_role" id="role-${r}" value="${r}"${r === role ? html` checked` : ''}><span><strong>${ROLES[r].name}</strong><small>${ROLES[r].detail}</small></span></label>`,
)}</div>
</fieldset>
<fieldset><legend>MCP servers</legend>
${signInNote(view)}
${view.mcp_servers.length === 0
  ? html`<p class="none">This app did not ask for any MCP server.</p>`
  : html`<p class="hint">Tick the instances of each server the app may use. A server with nothing ticked is not shared.</p>
${view.mcp_servers.map((server, i) => {
  return html`<div class="server" role="group" aria-labelledby="server-${i}"><code class="url" id="server-${i}">${server.url}</code>
${server.instances.length === 0
  ? html`<p class="none">You have no instance of this server, so it cannot be shared. Add one with <code>${addHint(server.url)}</code> and reload.</p>`
  : html`<div class="choices">${server.instances.map(
      (m, j) => html`<label class="option${m.enabled ? '' : ' off'}" for="mcp-${i}-${j}"><input type="checkbox" name="mcp_${i}" id="mcp-${i}-${j}" value="${m.id}"${picked(m) ? html` checked` : ''}${m.enabled ? '' : html` disabled`}><span><strong>${m.name}</strong><small>${m.enabled ? '' : html`<span class="badge">Disabled</span> `}ID ${m.id.slice(0, 8)}</small></span></label>`,
    )}</div>${server.instances.map((m) => toolsBlock(m, opts.form ? picksOf(opts.form, m.id).picks : undefined))}`}
</div>`;
})}`}
</fieldset>
<fieldset><legend>Limits</legend>
<p class="hint">Optional. Beyond a limit the app's calls are refused until it passes; you can change them later on <a href="/ui/apps">your apps</a>.</p>
<label for="limit-rpm">Calls a minute</label><input type="text" inputmode="numeric" id="limit-rpm" name="limit_rpm" placeholder="no limit">
<label for="limit-tokens">Tokens a day</label><input type="text" inputmode="numeric" id="limit-tokens" name="limit_tokens" placeholder="no limit">
</fieldset>
<p class="then">${view.redirect_origin
      ? html`When you decide, you go back to <code>${view.redirect_origin}</code>, which is told the answer.`
      : view.flow_type === 'redirect' && opts.redirectUrl
      ? html`When you decide, you go back to <code>${opts.redirectUrl}</code>.`
      : html`When you decide, this window closes and the app carries on.`}</p>
<div class="actions"><button type="submit" class="danger" formaction="${DENY_PATH}" id="deny">Deny</button><button type="submit" class="primary" id="approve">Approve</button></div>
</form>
<p class="foot">Signed in as <strong>${user.username}</strong> · <a href="/ui/logout">Log out</a> · Request <code title="${view.id}">${view.id.slice(0, 8)}</code></p>
</div>`,
    COUNTDOWN_SCRIPT,
  );
  // a sign-in (it has a redirect origin) goes on through the done page, on this origin
  if (view.flow_type === 'redirect' && opts.redirectUrl && !view.redirect_origin) allowFormRedirectTo(ctx, opts.redirectUrl);
}

/**
 * Browsers apply CSP form-action to the redirect that answers a form post, so in the redirect flow
 * the page also allows the app's redirect origin (an http(s) origin: nothing that can break out of
 * the directive); everything else stays 'self'.
 */
function allowFormRedirectTo(ctx: AppContext, redirectUrl: string): void {
  let origin: string;
  try {
    origin = new URL(redirectUrl).origin;
  } catch {
    return;
  }
  if (!/^https?:\/\/[a-z0-9.\-[\]:]+$/i.test(origin)) return;
  const policy = ctx.response.get('Content-Security-Policy');
  ctx.set('Content-Security-Policy', policy.replace("form-action 'self'", `form-action 'self' ${origin}`));
}

type Gone = 'unknown' | AccessRequestRecord['status'];

const GONE: Record<Exclude<Gone, 'draft'>, { eyebrow: string; title: string; text: string; status: number }> = {
  unknown: {
    eyebrow: 'Access request',
    title: 'No such access request',
    text: 'This link does not match any request here. It may be mistyped, or it belongs to another svc. Ask the app to start again.',
    status: 404,
  },
  expired: {
    eyebrow: 'Access request expired',
    title: 'This request has expired',
    text: 'Requests wait 10 minutes for a decision. Nothing was granted; go back to the app and try again.',
    status: 410,
  },
  approved: { eyebrow: 'Already decided', title: 'This request was already approved', text: 'There is nothing left to decide here.', status: 409 },
  denied: { eyebrow: 'Already decided', title: 'This request was already denied', text: 'There is nothing left to decide here.', status: 409 },
  revoked: { eyebrow: 'Already decided', title: 'This access was approved and later revoked', text: 'The app must ask again to get access.', status: 409 },
  failed: { eyebrow: 'Access request failed', title: 'This request could not be processed', text: 'Nothing was granted; go back to the app and try again.', status: 409 },
};

/** A clear page for a request that cannot be reviewed: unknown, expired or already decided. */
function renderGone(ctx: AppContext, kind: Exclude<Gone, 'draft'>, record?: AccessRequestRecord, info?: AppInfo, status?: number): void {
  const g = GONE[kind];
  sendPage(ctx, status ?? g.status, g.title, (nonce) => html`${styleTag(nonce)}<div class="card review">
${record
  ? appHeader({ app_client_id: record.app_client_id, app_description: info?.description, ...clientView(record, info) }, g.eyebrow, html`${g.title}`)
  : html`<header class="app"><div class="monogram unknown" aria-hidden="true">?</div><div class="who"><p class="eyebrow">${g.eyebrow}</p><h1>${g.title}</h1></div></header>`}
<p class="notice" role="status" id="state" data-state="${kind}">${g.text}</p>
<p class="foot">${kind === 'approved' && record ? html`<a href="/ui/grants/tools?id=${encodeURIComponent(record.id)}" id="grant-tools">Its tool choices</a> · ` : ''}<a href="/ui">Back to svc</a></p>
</div>`);
}

function renderSignedOut(ctx: AppContext, id: string): void {
  sendPage(ctx, 401, 'Log in to decide', (nonce) => html`${styleTag(nonce)}<div class="card review">
<header class="app"><div class="monogram unknown" aria-hidden="true">?</div><div class="who"><p class="eyebrow">Access request</p><h1>Log in to decide</h1></div></header>
<p class="alert" role="alert">You are not logged in (any more), so nothing was decided.</p>
<p class="foot"><a href="${loginHref(id)}">Log in and review the request again</a></p>
</div>`);
}

function renderOutcome(ctx: AppContext, record: AccessRequestRecord, info: { name?: string } | undefined): void {
  const approved = record.status === 'approved';
  const app = info?.name ?? record.app_client_id;
  const instances = (record.approved?.mcp_servers ?? []).reduce((n, s) => n + s.instance_ids.length, 0);
  const title = approved ? 'Access approved' : 'Access denied';
  sendPage(
    ctx,
    200,
    title,
    (nonce) => html`${styleTag(nonce)}<div class="card outcome" id="outcome" data-status="${record.status}">
<div class="icon ${approved ? 'ok' : 'no'}" aria-hidden="true">${approved ? '✓' : '✕'}</div>
<h1>${title}</h1>
<p>${approved
      ? html`<strong>${app}</strong> may now use your local AI as <strong>${ROLES[record.approved_role!].name}</strong>${
          instances ? html`, with ${plural(instances, 'MCP instance')}` : html`, with no MCP server`
        }.`
      : html`<strong>${app}</strong> was not given access.`}</p>
<p class="muted" id="close-note" role="status">This window closes by itself. If it stays open, close it and go back to the app.</p>
</div>`,
    CLOSE_SCRIPT,
  );
}

/** After a sign-in's decision: the browser goes back to the waiting sign-in, which ends at the app. */
function renderResume(ctx: AppContext, record: AccessRequestRecord): void {
  const to = new URL(record.redirect_url!).pathname;
  const approved = record.status === 'approved';
  sendPage(
    ctx,
    200,
    approved ? 'Access approved' : 'Access denied',
    (nonce) => html`${styleTag(nonce)}<div class="card outcome" id="outcome" data-status="${record.status}">
<div class="icon ${approved ? 'ok' : 'no'}" aria-hidden="true">${approved ? '✓' : '✕'}</div>
<h1>${approved ? 'Access approved' : 'Access denied'}</h1>
<p>Taking you back to the app${record.authorize ? html` at <code>${record.authorize.redirect_uri.slice(0, 200)}</code>` : ''}…</p>
<p><a href="${to}" id="continue">Continue</a></p>
</div>`,
    `location.replace(${JSON.stringify(to)});`,
  );
}

/** What the review pages reach: the requests, the person's own instances, and their tools' reviews. */
interface ReviewPages {
  deps: AppDeps;
  requests: AccessRequestsService;
  ownedInstances: (user: UserRecord) => Promise<McpInstanceRecord[]>;
  tools?: ToolReview;
}

/**
 * Mounts the review page and its Approve and Deny form posts. The posts are guarded by
 * sameOriginOnly (answered with a page here rather than JSON), then by the session's CSRF token.
 */
export function mountReviewUi(
  router: Router<AppState>,
  deps: AppDeps,
  requests: AccessRequestsService,
  ownedInstances: (user: UserRecord) => Promise<McpInstanceRecord[]>,
  sameOrigin: Middleware<AppState>,
  tools?: ToolReview,
): void {
  const pages: ReviewPages = { deps, requests, ownedInstances, tools };
  const fromThisSite = sameOriginPage(sameOrigin);
  router.get(REVIEW_PATH, showReview(pages));
  router.get(DONE_PATH, showOutcome(pages));
  router.post(APPROVE_PATH, fromThisSite, approveFromPage(pages));
  router.post(DENY_PATH, fromThisSite, denyFromPage(pages));
}

/** sameOriginOnly for a form post: a refusal is a page that says nothing was decided, not JSON. */
function sameOriginPage(sameOrigin: Middleware<AppState>): Middleware<AppState> {
  return async function sameOriginPage(ctx, next) {
    let passed = false;
    try {
      await sameOrigin(ctx, () => {
        passed = true;
        return Promise.resolve();
      });
    } catch (err) {
      if (!(err instanceof AppError) || err.status >= 500) throw err;
      sendPage(ctx, err.status, 'Refused', (nonce) => html`${styleTag(nonce)}<div class="card review">
<header class="app"><div class="monogram unknown" aria-hidden="true">!</div><div class="who"><p class="eyebrow">Access request</p><h1>Refused: this form came from another site</h1></div></header>
<p class="alert" role="alert" id="state" data-state="cross_origin">Decisions can only be made on svc's own review page. Nothing was decided.</p>
<p class="foot"><a href="/ui">Back to svc</a></p></div>`);
      return;
    }
    if (passed) await next();
  };
}

/** The review data of a request as this person sees it. */
async function reviewOf({ deps, requests, ownedInstances, tools }: ReviewPages, record: AccessRequestRecord, user: UserRecord): Promise<ReviewData> {
  return reviewView(requests, record, user, deps.clock(), await ownedInstances(user), deps.baseUrl(), tools);
}

/** Loads what the page needs, or answers with the right page itself (and returns undefined). */
async function load(pages: ReviewPages, ctx: AppContext, id: string, user: UserRecord): Promise<{ record: AccessRequestRecord; view: ReviewData } | undefined> {
  const { requests } = pages;
  const record = await requests.get(id);
  // decided by another account: unknown here, as the API answers it
  if (!record || !requests.visibleTo(record, user)) {
    renderGone(ctx, 'unknown');
    return undefined;
  }
  const info = await requests.appInfoFor(record);
  if (record.status !== 'draft') {
    renderGone(ctx, record.status, record, info);
    return undefined;
  }
  return { record, view: await reviewOf(pages, record, user) };
}

/** A 303 to a page of this origin. */
function seeOther(ctx: AppContext, to: string): void {
  ctx.status = 303;
  ctx.redirect(to);
  ctx.status = 303;
}

/** The GET pages' request id and user; with no session, a 303 to the login form and back. */
async function viewer(deps: AppDeps, ctx: AppContext): Promise<{ id: string; user?: UserRecord }> {
  const id = typeof ctx.query.id === 'string' ? ctx.query.id.slice(0, 100) : '';
  const user = await sessionUser(ctx, deps);
  if (!user) seeOther(ctx, loginHref(id));
  return { id, user };
}

/** GET the review page of a draft; one decided elsewhere for a waiting sign-in sends that sign-in on. */
function showReview(pages: ReviewPages): Middleware<AppState> {
  const { deps, requests } = pages;
  return async function showReview(ctx) {
    const { id, user } = await viewer(deps, ctx);
    if (!user) return;
    const decided = await requests.get(id);
    if (decided?.authorize && decided.redirect_url && decided.user_id === user.id && (decided.status === 'approved' || decided.status === 'denied')) {
      // decided on another surface: the sign-in that is waiting for it goes on
      seeOther(ctx, new URL(decided.redirect_url).pathname);
      return;
    }
    const loaded = await load(pages, ctx, id, user);
    if (loaded) renderReview(ctx, loaded.view, user, csrfToken(ctx) ?? '', { redirectUrl: loaded.record.redirect_url });
  };
}

/** GET where a decision lands: its outcome, a waiting sign-in going on, or the review page while undecided. */
function showOutcome({ deps, requests }: ReviewPages): Middleware<AppState> {
  return async function showOutcome(ctx) {
    const { id, user } = await viewer(deps, ctx);
    if (!user) return;
    const record = await requests.get(id);
    if (!record || !requests.visibleTo(record, user)) return renderGone(ctx, 'unknown');
    if (record.authorize && record.redirect_url && (record.status === 'approved' || record.status === 'denied')) return renderResume(ctx, record);
    if (record.status === 'approved' || record.status === 'denied') return renderOutcome(ctx, record, await requests.appInfoFor(record));
    seeOther(ctx, `${REVIEW_PATH}?id=${encodeURIComponent(id)}`);
  };
}

type Decision = (user: UserRecord, record: AccessRequestRecord, form: Form) => Promise<AccessRequestRecord>;

/** What both posts share: same origin, a session, the session's CSRF token, a reviewable request. */
async function decide(pages: ReviewPages, ctx: AppContext, decision: Decision) {
  const { deps, requests } = pages;
  const form = formOf(ctx);
  const id = typeof form.id === 'string' ? form.id.slice(0, 100) : '';
  const user = await sessionUser(ctx, deps);
  if (!user) return renderSignedOut(ctx, id);
  const record = await requests.get(id);
  if (!record) return renderGone(ctx, 'unknown');
  const csrf = csrfToken(ctx) ?? '';
  if (!sameToken(form._csrf, csrf)) {
    const loaded = await load(pages, ctx, id, user);
    if (loaded) {
      const stale = new AppError('invalid_csrf_token', 'This form was stale (or not sent from this page). Check your choices and submit again.');
      renderReview(ctx, loaded.view, user, csrf, { redirectUrl: record.redirect_url, error: stale, status: 403, selection: selectionOf(form, record), form });
    }
    return;
  }
  let decided: AccessRequestRecord;
  try {
    decided = await decision(user, record, form);
  } catch (caught) {
    return answerRefusedDecision(pages, ctx, caught, { id, user, record, form, csrf });
  }
  // A sign-in (authorization endpoint) goes on through the done page: a form post's redirects
  // may only reach this origin (CSP form-action), and the sign-in ends at the app's.
  const redirect = decided.flow_type === 'redirect' && !decided.authorize ? decisionRedirect(decided) : undefined;
  seeOther(ctx, redirect ?? `${DONE_PATH}?id=${encodeURIComponent(decided.id)}`);
}

/** A decision the service refused: the request's new state when it moved on, else the form again with the reason. */
async function answerRefusedDecision(
  pages: ReviewPages,
  ctx: AppContext,
  caught: unknown,
  { id, user, record, form, csrf }: { id: string; user: UserRecord; record: AccessRequestRecord; form: Form; csrf: string },
): Promise<void> {
  const { requests } = pages;
  const err = fromStoreError(caught);
  if (!(err instanceof AppError) || !err.expose) throw err;
  const fresh = await requests.get(id);
  if (err.code === 'expired' || err.code === 'already_processed' || !fresh || fresh.status !== 'draft') {
    const kind = fresh ? (fresh.status === 'draft' ? 'failed' : fresh.status) : 'unknown';
    return renderGone(ctx, kind as Exclude<Gone, 'draft'>, fresh, fresh ? await requests.appInfoFor(fresh) : undefined, err.status);
  }
  const view = await reviewOf(pages, fresh, user);
  return renderReview(ctx, view, user, csrf, { redirectUrl: fresh.redirect_url, error: err, status: err.status, selection: selectionOf(form, record), form });
}

/** The tool choices of the ticked instances, as the approval stores them: what differs from each tool's default. */
async function policiesFromForm({ ownedInstances, tools }: ReviewPages, record: AccessRequestRecord, user: UserRecord, form: Form, granted: string[]): Promise<Record<string, ToolPolicy> | undefined> {
  if (!tools) return undefined;
  const mine = (await ownedInstances(user)).filter((m) => granted.includes(m.id));
  const listed = await tools.forReview(record, mine);
  const out: Record<string, ToolPolicy> = {};
  for (const m of mine) {
    const { picks, fallback } = picksOf(form, m.id);
    const policy = policyFromPicks(listed.get(m.id)?.tools ?? [], picks, fallback);
    if (policy) Object.defineProperty(out, m.id, { value: policy, enumerable: true });
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/** What the form had chosen, to show it again when it comes back with an error. */
const selectionOf = (form: Form, record: AccessRequestRecord): Selection => ({
  role: appRoles.find((r) => r === form.approved_role),
  instanceIds: new Set(record.requested.mcp_servers.flatMap((_s, i) => strings(form[`mcp_${i}`]))),
});

/** POST the Approve form: the role, the ticked instances, their tool choices and the limits, checked as the API checks them. */
function approveFromPage(pages: ReviewPages): Middleware<AppState> {
  const { deps, requests } = pages;
  return async function approveFromPage(ctx) {
    await decide(pages, ctx, async (user, record, form) => {
      const mcp_servers = record.requested.mcp_servers
        .map((s, i) => ({ url: s.url, instance_ids: [...new Set(strings(form[`mcp_${i}`]))] }))
        .filter((s) => s.instance_ids.length > 0);
      const tool_policies = await policiesFromForm(pages, record, user, form, mcp_servers.flatMap((s) => s.instance_ids));
      const parsed = approveBody.safeParse({
        approved_role: form.approved_role,
        ...limitsOfForm(form),
        approved: { version: '1', mcp_servers },
        ...(tool_policies ? { tool_policies } : {}),
      });
      if (!parsed.success) {
        const limitsWrong = parsed.error.issues.some((i) => i.path[0] === 'limits');
        throw new AppError(
          'invalid_body',
          limitsWrong
            ? 'A limit must be a whole number above 0, or left empty for none.'
            : typeof form.approved_role === 'string'
              ? 'That choice could not be read; check it and try again.'
              : 'Choose a role to approve.',
        );
      }
      const approved = await requests.approve(user, record.id, parsed.data);
      deps.logger.info({ accessRequest: approved.id, user: user.id, role: approved.approved_role }, 'access request approved (browser)');
      return approved;
    });
  };
}

/** POST the Deny form. */
function denyFromPage(pages: ReviewPages): Middleware<AppState> {
  const { deps, requests } = pages;
  return async function denyFromPage(ctx) {
    await decide(pages, ctx, async (user, record) => {
      const denied = await requests.deny(user, record.id);
      deps.logger.info({ accessRequest: denied.id, user: user.id }, 'access request denied (browser)');
      return denied;
    });
  };
}
