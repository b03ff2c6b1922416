import { timingSafeEqual } from 'node:crypto';
import type Router from '@koa/router';
import type { Middleware } from 'koa';
import type { AccessRequestsService } from '../access-requests/service.js';
import { csrfToken, sessionUser } from '../auth/sessions.js';
import { AppError } from '../errors.js';
import type { AppContext, AppDeps, AppState } from '../http/context.js';
import { CHOICE_LABELS, hintWords } from '../mcp/choices.js';
import type { ToolPolicies } from '../mcp/policies.js';
import { TOOL_CHOICES, type ToolPoliciesInput } from '../mcp/policy-schemas.js';
import type { AccessRequestRecord, ToolChoice, UserRecord } from '../store/schema.js';
import { html, SafeHtml } from './html.js';
import { sendPage } from './login.js';

/**
 * `/ui/grants/tools?id=`: an approved grant's tool choices, to change after the approval (its
 * approver or an admin; to anyone else the grant does not exist). The post is guarded as the
 * review page's are: same origin, then the session's CSRF token.
 */
export const GRANT_TOOLS_PATH = '/ui/grants/tools';

const STYLE = new SafeHtml(`
main{max-width:48rem}
.tools{margin:1rem 0;padding:.75rem 1rem;border:1px solid var(--border);border-radius:10px}
.tools h2{font-size:1.05rem;margin:0 0 .4rem;overflow-wrap:anywhere}
.tools table{width:100%;border-collapse:collapse;font-size:.92rem}
.tools td{padding:.3rem .25rem;border-top:1px solid var(--border);vertical-align:top;overflow-wrap:anywhere}
.tools td.pick{width:12rem;text-align:right}
.tools select{width:auto;padding:.3rem .4rem}
.badge{display:inline-block;font-size:.72rem;font-weight:600;line-height:1.6;padding:0 .55rem;border-radius:999px;border:1px solid var(--border);color:var(--muted)}
.badge.warn{border-color:var(--danger);color:var(--danger)}
.notice{padding:.6rem .9rem;border-radius:8px;border:1px solid var(--border);overflow-wrap:anywhere}
.notice.error{border-color:var(--danger);color:var(--danger)}
`);

const sameToken = (given: unknown, expected: string | undefined) => {
  if (typeof given !== 'string' || !expected) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
};

type Form = Record<string, unknown>;

export function mountGrantToolsUi(router: Router<AppState>, deps: AppDeps, requests: AccessRequestsService, policies: ToolPolicies, sameOrigin: Middleware<AppState>): void {
  const mayChange = (r: AccessRequestRecord | undefined, user: UserRecord): r is AccessRequestRecord =>
    r !== undefined && r.status === 'approved' && r.user_id !== null && (r.user_id === user.id || user.role === 'admin');

  async function render(ctx: AppContext, user: UserRecord, record: AccessRequestRecord, notice?: { text: string; error?: boolean }, status = 200) {
    const csrf = csrfToken(ctx) ?? '';
    const info = await requests.appInfoFor(record);
    const choices = await policies.grantChoices(record);
    sendPage(
      ctx,
      status,
      'Tool choices',
      (nonce) => html`<style nonce="${nonce}">${STYLE}</style><div class="card">
<h1>Tool choices of ${info?.name ?? record.app_client_id}</h1>
<p class="muted">Grant <code>${record.id.slice(0, 8)}</code> for <code>${record.app_client_id}</code>. Allow: the tool runs. Ask: each call waits for you on <a href="/ui/calls">Held tool calls</a>. Deny: refused, and the app no longer sees the tool.</p>
${notice ? html`<p class="notice${notice.error ? ' error' : ''}" role="${notice.error ? 'alert' : 'status'}" id="notice">${notice.text}</p>` : ''}
${choices.length === 0
  ? html`<p class="muted">This grant has no MCP instance.</p>`
  : html`<form method="post" action="${GRANT_TOOLS_PATH}" id="tools-form"><input type="hidden" name="_csrf" value="${csrf}"><input type="hidden" name="id" value="${record.id}">
${choices.map(
  (c) => html`<section class="tools" id="tools-${c.instance_id}"><h2>${c.instance_name ?? 'A removed instance'}</h2>
${c.tools_known ? '' : html`<p class="muted">Its tools are not known yet: each gets the default below when called.</p>`}
${c.tools.length
  ? html`<table><tbody>${c.tools.map((t) => {
      const words = hintWords(t.annotations);
      return html`<tr data-tool="${t.name}"><td><code>${t.name}</code>${words.map((w) => html` <span class="badge${w === 'destructive' ? ' warn' : ''}">${w}</span>`)}</td><td class="pick">${t.owner_denied
        ? html`<span class="badge">Denied by its owner</span>`
        : html`<select name="tool_${c.instance_id}" aria-label="${t.name}">${TOOL_CHOICES.map((x) => html`<option value="${x}:${t.name}"${x === t.choice ? html` selected` : ''}>${CHOICE_LABELS[x]}${x === t.default_choice ? ' (default)' : ''}</option>`)}</select>`}</td></tr>`;
    })}</tbody></table>`
  : ''}
${c.remembered.length
  ? html`<p class="muted">Remembered approvals: these run without asking until then. A change of their choice, or of the default, ends them.</p><ul class="remembered">${c.remembered.map(
      (m) => html`<li data-remembered="${m.tool}"><code>${m.tool}</code> for <time datetime="${m.until}">${Math.max(1, Math.ceil((Date.parse(m.until) - deps.clock()) / 60_000))} more min</time>, approved by ${m.approved_by} <button type="submit" form="forget-form" name="forget" value="${c.instance_id}:${m.tool}" class="forget">Stop remembering</button></li>`,
    )}</ul>`
  : ''}
<p><label for="tooldefault-${c.instance_id}">Tools without a choice of their own</label> <select name="tooldefault_${c.instance_id}" id="tooldefault-${c.instance_id}"><option value=""${c.default ? '' : html` selected`}>By their annotations</option>${TOOL_CHOICES.map((x) => html`<option value="${x}"${x === c.default ? html` selected` : ''}>${CHOICE_LABELS[x]}</option>`)}</select></p>
</section>`,
)}
<div class="actions"><button type="submit" class="primary" id="save">Save tool choices</button></div></form>
<form method="post" action="${GRANT_TOOLS_PATH}/forget" id="forget-form"><input type="hidden" name="_csrf" value="${csrf}"><input type="hidden" name="id" value="${record.id}"></form>`}
<p class="muted">Signed in as <strong>${user.username}</strong> · <a href="/ui">Home</a></p>
</div>`,
    );
  }

  router.get(GRANT_TOOLS_PATH, async function showGrantTools(ctx) {
    const user = await sessionUser(ctx, deps);
    const id = typeof ctx.query.id === 'string' ? ctx.query.id.slice(0, 100) : '';
    if (!user) return ctx.redirect(`/ui/login?next=${encodeURIComponent(`${GRANT_TOOLS_PATH}?id=${id}`)}`);
    const record = await requests.get(id);
    if (!mayChange(record, user)) {
      sendPage(ctx, 404, 'No such grant', () => html`<div class="card"><h1>No such grant</h1><p class="muted" id="state">No approved grant of yours has this id.</p><p><a href="/ui">Back to svc</a></p></div>`);
      return;
    }
    const saved =
      ctx.query.saved === '1'
        ? { text: 'Saved. The next call of each tool follows these choices.' }
        : ctx.query.forgot === '1'
          ? { text: 'No longer remembered: the next call of that tool waits for you.' }
          : undefined;
    await render(ctx, user, record, saved);
  });

  /**
   * From the form to the change: each tool's pick becomes its own choice, or is taken back (null)
   * when it is what the tool would get anyway; the default select sets the instance's default.
   */
  function changesFrom(form: Form, choices: Awaited<ReturnType<ToolPolicies['grantChoices']>>): ToolPoliciesInput {
    const out: ToolPoliciesInput = {};
    for (const c of choices) {
      const rawDefault = form[`tooldefault_${c.instance_id}`];
      const fallback = TOOL_CHOICES.find((x) => x === rawDefault) ?? null;
      const tools: Record<string, ToolChoice | null> = {};
      const raw = form[`tool_${c.instance_id}`];
      const known = new Map(c.tools.map((t) => [t.name, t]));
      for (const value of (Array.isArray(raw) ? raw : raw === undefined ? [] : [raw]).slice(0, 1000)) {
        if (typeof value !== 'string' || value.length > 300) continue;
        const at = value.indexOf(':');
        const choice = TOOL_CHOICES.find((x) => x === value.slice(0, at));
        const name = value.slice(at + 1);
        const tool = known.get(name);
        if (!choice || at <= 0 || !tool || tool.owner_denied) continue;
        Object.defineProperty(tools, name, { value: choice === (fallback ?? tool.default_choice) ? null : choice, enumerable: true });
      }
      Object.defineProperty(out, c.instance_id, { value: { default: fallback, tools }, enumerable: true });
    }
    return out;
  }

  /** The guards of a post here: same origin, a session, a grant of the user's, the CSRF token; the grant, or null when refused (answered). */
  async function postedGrant(ctx: AppContext): Promise<{ user: UserRecord; record: AccessRequestRecord; form: Form } | null> {
    const user = await sessionUser(ctx, deps);
    try {
      await sameOrigin(ctx, async () => undefined);
    } catch (err) {
      if (!(err instanceof AppError) || err.status >= 500) throw err;
      sendPage(ctx, err.status, 'Refused', () => html`<div class="card"><h1>Refused: this form came from another site</h1><p class="error" id="state">Nothing was changed.</p></div>`);
      return null;
    }
    if (!user) {
      ctx.redirect('/ui/login?next=%2Fui');
      return null;
    }
    const form = ((ctx.request as { body?: unknown }).body ?? {}) as Form;
    const id = typeof form.id === 'string' ? form.id.slice(0, 100) : '';
    const record = await requests.get(id);
    if (!mayChange(record, user)) {
      sendPage(ctx, 404, 'No such grant', () => html`<div class="card"><h1>No such grant</h1><p class="muted" id="state">No approved grant of yours has this id.</p></div>`);
      return null;
    }
    if (!sameToken(form._csrf, csrfToken(ctx))) {
      await render(ctx, user, record, { text: 'This form was stale (or not sent from this page). Nothing was changed; try again.', error: true }, 403);
      return null;
    }
    return { user, record, form };
  }

  // "Stop remembering": ends one remembered approval; the next call of that tool waits again
  router.post(`${GRANT_TOOLS_PATH}/forget`, async function forgetRemembered(ctx) {
    const posted = await postedGrant(ctx);
    if (!posted) return;
    const { user, record, form } = posted;
    const value = typeof form.forget === 'string' && form.forget.length <= 400 ? form.forget : '';
    const at = value.indexOf(':');
    if (at <= 0) return render(ctx, user, record, { text: 'Name the remembered approval to end. Nothing was changed.', error: true }, 400);
    await policies.forget(user, record.id, { instance_id: value.slice(0, at), tool: value.slice(at + 1) });
    deps.logger.info({ accessRequest: record.id, user: user.id }, 'a remembered approval ended (browser)');
    ctx.status = 303;
    ctx.redirect(`${GRANT_TOOLS_PATH}?id=${encodeURIComponent(record.id)}&forgot=1`);
    ctx.status = 303;
  });

  router.post(GRANT_TOOLS_PATH, async function saveGrantTools(ctx) {
    const posted = await postedGrant(ctx);
    if (!posted) return;
    const { user, record, form } = posted;
    try {
      await policies.set(user, record.id, changesFrom(form, await policies.grantChoices(record)));
    } catch (err) {
      if (!(err instanceof AppError) || err.status >= 500) throw err;
      return render(ctx, user, (await requests.get(record.id)) ?? record, { text: `${err.message} Nothing was changed.`, error: true }, err.status);
    }
    deps.logger.info({ accessRequest: record.id, user: user.id }, 'grant tool choices set (browser)');
    ctx.status = 303;
    ctx.redirect(`${GRANT_TOOLS_PATH}?id=${encodeURIComponent(record.id)}&saved=1`);
    ctx.status = 303;
  });
}
