import type { Middleware } from 'koa';
import type { AccessRequestsService } from '../access-requests/service.js';
import { ACCESS_REQUEST_SCOPE_PREFIX } from '../auth/bearer.js';
import { sessionUser } from '../auth/sessions.js';
import type { AppContext, AppDeps, AppState, Clock } from '../http/context.js';
import type { McpInstancesService } from '../mcp/instances.js';
import { type AppRole, appRoles, type OAuthClientKind } from '../store/schema.js';
import type { OAuthClientsService } from './clients.js';
import type { OidcCtx, OidcModel, OidcModule, OidcProvider } from './load.js';
import { INTERACTION_PATH } from './paths.js';
import type { TargetOf } from './resource-indicators.js';
import { isAccessRequestScope } from './token-claims.js';

/**
 * A sign-in's interactions: the login prompt, answered by the svc session, and the consent prompt,
 * answered by an access request the person approved on the review page (there is no second
 * consent screen).
 */

/** How long a sign-in waits for the person's decision: the draft's life, and a little more. */
export const INTERACTION_TTL_S = 15 * 60;

/** The pages a sign-in shows, from the UI: passed in, so the authorization server does not import ui/. */
export interface SignInPages {
  /** where the person reviews the access request `id` */
  reviewUrl(id: string): string;
  /** a page saying the sign-in cannot go on: `lines` are plain text (the page escapes them) */
  failure(ctx: AppContext, status: number, title: string, heading: string, lines: { text: string; kind?: 'error' | 'muted' }[]): void;
}

const asList = (value: unknown): string[] => (Array.isArray(value) ? value.map(String) : typeof value === 'string' && value ? [value] : []);

/**
 * Every authorization passes the login prompt once, where the svc session answers it: so the
 * account behind a code is always the user logged in to svc right now. And every one passes the
 * consent prompt, where svc decides from the access request behind it.
 */
export function signInPolicy(interactionPolicy: OidcModule['interactionPolicy']) {
  const policy = interactionPolicy.base();
  policy.get('login')!.checks.add(
    new interactionPolicy.Check('svc_session', 'the svc session confirms the user', (ctx: OidcCtx) => (ctx.oidc.result?.login ? false : true)),
  );
  policy.get('consent')!.checks.add(
    new interactionPolicy.Check('svc_access_request', 'an approved access request stands behind every grant', (ctx: OidcCtx) => (ctx.oidc.result?.consent ? false : true)),
  );
  return policy;
}

export type WaitingInteractions = ReturnType<typeof waitingInteractions>;

/** Interactions waiting for a person's decision, by uid: the access request each one made. */
export function waitingInteractions(clock: Clock) {
  const waiting = new Map<string, { id: string; until: number }>();
  return {
    get: (uid: string) => waiting.get(uid),
    remember(uid: string, id: string) {
      const now = clock();
      for (const [key, v] of waiting) if (v.until <= now) waiting.delete(key);
      waiting.set(uid, { id, until: now + INTERACTION_TTL_S * 1000 });
    },
    forget: (uid: string) => waiting.delete(uid),
  };
}

export interface InteractionDeps {
  deps: AppDeps;
  provider: OidcProvider;
  clients: OAuthClientsService;
  requests: AccessRequestsService;
  instances: McpInstancesService;
  pages: SignInPages;
  targetOf: TargetOf;
  waiting: WaitingInteractions;
  /** the origin of this daemon, and the resource a grant names when the request named none */
  base: string;
  audience: string;
}

type Ctx = Parameters<Middleware<AppState>>[0];

/** One consent prompt, as its request put it, and the ways it can end. */
interface Consent {
  uid: string;
  accountId: string;
  clientId: string;
  requested: string[];
  resources: string[];
  details: OidcModel;
  deny(description: string): Promise<void>;
  /** ends the prompt with a new grant of `scope` (and `extra` scopes) for every resource asked for */
  grant(scope: string, extra?: string[]): Promise<void>;
}

/** Resolves a sign-in's interaction at `<prefix>/interaction/:uid`. */
export function interactionResolver(d: InteractionDeps): Middleware<AppState> {
  const { provider, pages } = d;
  return async function resolveInteraction(ctx) {
    let details;
    try {
      details = await provider.interactionDetails(ctx.req, ctx.res);
    } catch {
      pages.failure(ctx, 400, 'Sign-in expired', 'This sign-in has expired', [{ text: 'Return to the app and start again.' }]);
      return;
    }
    const finish = async (result: Record<string, unknown>, merge = false) => {
      const to = await provider.interactionResult(ctx.req, ctx.res, result, { mergeWithLastSubmission: merge });
      ctx.status = 303;
      ctx.redirect(to);
      ctx.status = 303;
    };
    // A consent result keeps the login of the same sign-in, so the prompts are satisfied at once
    // (even with prompt=consent, which would otherwise ask again for ever).
    const deny = (description: string) => finish({ error: 'access_denied', error_description: description }, true);
    if (details.prompt.name === 'login') {
      const user = await sessionUser(ctx, d.deps);
      if (!user) {
        ctx.redirect(`/ui/login?next=${encodeURIComponent(ctx.path)}`);
        return;
      }
      await finish({ login: { accountId: user.id, remember: false } });
      return;
    }
    if (details.prompt.name !== 'consent') return deny('unsupported interaction');
    return resolveConsent(d, ctx, details, finish, deny);
  };
}

async function resolveConsent(
  d: InteractionDeps,
  ctx: Ctx,
  details: OidcModel,
  finish: (result: Record<string, unknown>, merge?: boolean) => Promise<void>,
  deny: (description: string) => Promise<void>,
) {
  const accountId = details.session?.accountId;
  const clientId = String(details.params.client_id);
  const requested = String(details.params.scope ?? '').split(' ').filter(Boolean);
  const resources = asList(details.params.resource);
  // Known scopes the grant must cover, or the consent prompt comes back for ever.
  const oidcScopes = requested.filter((s) => s === 'openid' || s === 'offline_access' || (appRoles as readonly string[]).includes(s));
  const grant = async (scope: string, extra: string[] = []) => {
    const g = new d.provider.Grant({ accountId, clientId });
    for (const resource of resources.length ? resources : [d.audience]) g.addResourceScope(resource, [...extra, scope].join(' '));
    if (oidcScopes.length) g.addOIDCScope(oidcScopes.join(' '));
    return finish({ consent: { grantId: await g.save() } }, true);
  };
  if (!accountId) return deny('no signed-in user');

  // svc's own flow: the app names the access request the person already approved.
  const named = requested.filter(isAccessRequestScope);
  if (named.length > 1) return finish({ error: 'invalid_scope', error_description: 'request at most one scope_access_request:<id>' }, true);
  if (named.length === 1) {
    if (!(await d.requests.approvedScopesFor(clientId, accountId)).includes(named[0])) return deny('that access request is not approved for this app by this user');
    return grant(named[0]);
  }

  // A standard client (an MCP host, any OAuth app): its request becomes an access request that
  // the person decides on the review page, and the sign-in resumes here afterwards.
  const consent: Consent = { uid: String(ctx.params.uid), accountId, clientId, requested, resources, details, deny, grant };
  const pending = d.waiting.get(consent.uid);
  if (!pending) return openAccessRequest(d, ctx, consent);
  return resumeAfterDecision(d, ctx, consent, pending.id);
}

/** Makes the access request a standard client's sign-in stands on, and sends the person to review it. */
async function openAccessRequest(d: InteractionDeps, ctx: Ctx, consent: Consent) {
  const { uid, clientId, requested, resources, details } = consent;
  const role: AppRole = requested.includes('scope_user_power_user') ? 'scope_user_power_user' : 'scope_user_user';
  const { mcpUrls, suggested } = await mcpInstancesOf(d, resources);
  const client = await (d.provider as OidcModel).Client.find(clientId);
  const record = await d.requests.createForAuthorization({
    clientId,
    role,
    mcpUrls,
    resumeUrl: `${d.base}${INTERACTION_PATH}${uid}`,
    origin: {
      interaction: uid,
      redirect_uri: String(details.params.redirect_uri ?? ''),
      client_kind: await clientKind(d.clients, clientId),
      client_name: typeof client?.clientName === 'string' ? client.clientName.slice(0, 100) : null,
      suggested_instance_ids: suggested,
      resources,
    },
  });
  d.waiting.remember(uid, record.id);
  d.deps.logger.info({ accessRequest: record.id, client: clientId }, 'access request made at the authorization endpoint');
  ctx.status = 303;
  ctx.redirect(d.pages.reviewUrl(record.id));
  ctx.status = 303;
}

/** Ends a standard client's sign-in once the person has decided on its access request `id`. */
async function resumeAfterDecision(d: InteractionDeps, ctx: Ctx, consent: Consent, id: string) {
  const { uid, accountId, requested, deny } = consent;
  const record = await d.requests.get(id);
  if (!record) return deny('the access request is gone');
  if (record.status === 'draft') {
    ctx.status = 303;
    ctx.redirect(d.pages.reviewUrl(record.id));
    ctx.status = 303;
    return;
  }
  d.waiting.forget(uid);
  if (record.status !== 'approved') return deny(`the access request was ${record.status}`);
  if (record.user_id !== accountId) return deny('the access request was approved by another user than the one signing in');
  const roles = appRoles.filter((r) => requested.includes(r));
  return consent.grant(`${ACCESS_REQUEST_SCOPE_PREFIX}${record.id}`, roles);
}

/** The MCP proxy URLs among the resources asked for, and the instances behind them. */
async function mcpInstancesOf(d: InteractionDeps, resources: string[]) {
  const mcpUrls: string[] = [];
  const suggested: string[] = [];
  for (const resource of resources) {
    const { target } = await d.targetOf(resource);
    if (target.kind !== 'mcp') continue;
    const instance = await d.instances.find(target.instanceId);
    if (!instance) continue;
    mcpUrls.push(instance.url);
    suggested.push(instance.id);
  }
  return { mcpUrls, suggested };
}

/** What the client is, for the person deciding: registered by an admin, by itself, or by a metadata document. */
async function clientKind(clients: OAuthClientsService, clientId: string): Promise<OAuthClientKind> {
  const known = await clients.find(clientId);
  if (known) return known.kind ?? 'registered';
  return /^https:/.test(clientId) ? 'metadata_document' : 'registered';
}
