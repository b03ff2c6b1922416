import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import { ACCESS_REQUEST_SCOPE_PREFIX } from '../auth/bearer.js';
import { appRoleAtMost, maxGrantableRole, lowerAppRole } from '../auth/roles.js';
import { AppError, conflict, forbidden, invalidBody, notFound } from '../errors.js';
import type { Clock } from '../http/context.js';
import type { Logger } from '../log.js';
import type { AccessRequestRecord, AppRole, AuthorizeOrigin, McpInstanceRecord, UserRecord } from '../store/schema.js';
import { StoreUnavailableError } from '../store/durable-file.js';
import type { Repositories, RepositorySet } from '../store/repositories.js';
import { type approveBody, type createAccessRequestBody, DRAFT_LIFETIME_MS } from './schemas.js';
import type { GrantLimitsInput, GrantUsage } from '../activity/schemas.js';
import { canonicalResource } from '../oauth/resources.js';
import { checkPolicyInstances, mergePolicies } from '../mcp/policies.js';

export const scopeFor = (id: string) => `${ACCESS_REQUEST_SCOPE_PREFIX}${id}`;

/**
 * What svc's registries know of a client (name, description, and for an OAuth client how it got
 * there: an admin added it, or it registered itself); empty for a client nobody registered.
 */
export type AppInfoLookup = (clientId: string) => Promise<{ name?: string; description?: string; redirect_uris?: string[]; kind?: 'registered' | 'dynamic' } | undefined>;

const isUuid = (id: string) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id);

/** Limits as stored: both fields, null for none. */
export const normalLimits = (l: GrantLimitsInput | undefined) => ({ requests_per_minute: l?.requests_per_minute ?? null, tokens_per_day: l?.tokens_per_day ?? null });

/**
 * What a sign-in at the authorization endpoint was for, as one comparable value: its resource
 * values, normalised (none named is the whole service); a record made before they were kept
 * compares by the instances they named.
 */
const signInResources = (record: AccessRequestRecord) => {
  const resources = record.authorize?.resources;
  if (!resources) return `instances:${[...(record.authorize?.suggested_instance_ids ?? [])].sort().join(' ')}`;
  return `resources:${[...new Set(resources.map((r) => canonicalResource(r) ?? r))].sort().join(' ')}`;
};

/** A sign-in for MCP instances, approved with none of them: its token would reach nothing. */
function signInGoesNowhere(record: AccessRequestRecord, body: z.output<typeof approveBody>): boolean {
  const wanted = record.authorize?.suggested_instance_ids ?? [];
  if (wanted.length === 0) return false;
  const granted = new Set((body.approved?.mcp_servers ?? []).flatMap((s) => s.instance_ids));
  return !wanted.some((id) => granted.has(id));
}

/** The redirect URL with the decision appended (decisions: Access requests). */
export function decisionRedirect(record: AccessRequestRecord): string | undefined {
  if (!record.redirect_url) return undefined;
  const url = new URL(record.redirect_url);
  url.searchParams.set('id', record.id);
  url.searchParams.set('status', record.status);
  return url.href;
}

/**
 * The access-request lifecycle (decisions: Access requests). Every check and its state change are
 * one conditional write, so of two concurrent decisions exactly one sees `draft`.
 */
/** Where a grant's usage comes from (the activity): one grant, or many in one read. */
export interface UsageSource {
  usageOf(grantId: string): Promise<GrantUsage>;
  usagesOf(grantIds: string[]): Promise<Map<string, GrantUsage>>;
}

const NONE: GrantUsage = { calls: 0, refused: 0, tokens_in: 0, tokens_out: 0, last_used_at: null, today: { calls: 0, tokens: 0 } };
/** No activity kept (the unit tests): every grant unused. */
const NO_USAGE: UsageSource = { usageOf: async () => NONE, usagesOf: async (ids) => new Map(ids.map((id) => [id, NONE])) };

export class AccessRequestsService {
  constructor(
    private readonly repos: Repositories,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly appInfo: AppInfoLookup = async () => undefined,
    private readonly limits: { draftsPerClient: number; drafts: number } = { draftsPerClient: 20, drafts: 1000 },
    private readonly usage: UsageSource = NO_USAGE,
  ) {}

  /** A grant's usage and limits, for the surfaces that show a decided request; nothing for one never approved. */
  async figuresOf(record: AccessRequestRecord): Promise<{ usage?: GrantUsage; limits?: ReturnType<typeof normalLimits> }> {
    if (record.status !== 'approved' && record.status !== 'revoked') return {};
    return { usage: await this.usage.usageOf(record.id), limits: this.limitsOf(record) };
  }

  /** figuresOf for a whole list, with one read of the usage, whatever the list's length. */
  async figuresOfMany(records: AccessRequestRecord[]): Promise<Map<string, Awaited<ReturnType<AccessRequestsService['figuresOf']>>>> {
    const decided = records.filter((r) => r.status === 'approved' || r.status === 'revoked');
    const usages = await this.usage.usagesOf(decided.map((r) => r.id));
    return new Map(records.map((r) => [r.id, usages.has(r.id) ? { usage: usages.get(r.id)!, limits: this.limitsOf(r) } : {}]));
  }

  /** The limits in force on a grant (none set: both null). */
  limitsOf(record: AccessRequestRecord): ReturnType<typeof normalLimits> {
    return normalLimits(record.limits ?? undefined);
  }

  private nowIso(): string {
    return new Date(this.clock()).toISOString();
  }

  /**
   * A draft past its lifetime reads as expired on every path, without waiting for a sweeper. It
   * is derived, not written: the record stays a draft on disk until retention removes it.
   */
  private withExpiry(record: AccessRequestRecord, now = this.clock()): AccessRequestRecord {
    if (record.status === 'draft' && Date.parse(record.expires_at) <= now) {
      return { ...record, status: 'expired', updated_at: record.expires_at };
    }
    return record;
  }

  /**
   * The conditional write on one request: `change` sees it with expiry applied and may throw to
   * refuse. Expiry only ever shows in what `change` reads: a draft past its lifetime is refused as
   * expired, and what is stored is whatever `change` made of it.
   */
  private change(repos: RepositorySet, id: string, change: (record: AccessRequestRecord) => void): Promise<AccessRequestRecord | undefined> {
    if (!isUuid(id)) return Promise.resolve(undefined);
    const now = this.clock();
    return repos.accessRequests.update(id, (record) => {
      if (record.status === 'draft' && Date.parse(record.expires_at) <= now) {
        record.status = 'expired';
        record.updated_at = record.expires_at;
      }
      change(record);
    });
  }

  /** Reads one durable record, expiry applied. */
  async get(id: string): Promise<AccessRequestRecord | undefined> {
    if (!isUuid(id)) return undefined;
    const record = await this.repos.accessRequests.get(id);
    return record && this.withExpiry(record);
  }

  /**
   * The access-request scopes an authorization server may issue to `clientId` (for `userId` when
   * known): only approved requests that this client made and this user approved.
   */
  async approvedScopesFor(clientId: string, userId?: string): Promise<string[]> {
    return (await this.repos.accessRequests.approvedFor(clientId, userId)).map((r) => scopeFor(r.id));
  }

  async create(input: z.output<typeof createAccessRequestBody>): Promise<AccessRequestRecord> {
    // API keys' own requests (src/keys) are named so; no app may pass for one.
    if (input.app_client_id.startsWith('svc-key:')) throw invalidBody('app_client_id svc-key:... is reserved for API keys.', 'app_client_id');
    const registered = (await this.appInfo(input.app_client_id))?.redirect_uris;
    if (registered && input.redirect_url && !registered.includes(input.redirect_url)) {
      throw new AppError('invalid_redirect_url', 'redirect_url is not a registered redirect URI of this client.', {
        param: 'redirect_url',
      });
    }
    return this.insert(input);
  }

  /**
   * A request made for a standard OAuth client at the authorization endpoint (decisions: Standard clients). It is
   * a redirect-flow request whose redirect is the waiting interaction, so every review surface
   * decides it like any other, and the browser that started the sign-in carries on from there.
   */
  async createForAuthorization(input: {
    clientId: string;
    role: AppRole;
    mcpUrls: string[];
    resumeUrl: string;
    origin: AuthorizeOrigin;
  }): Promise<AccessRequestRecord> {
    return this.insert(
      {
        app_client_id: input.clientId,
        flow_type: 'redirect',
        requested_role: input.role,
        requested: { version: '1', mcp_servers: [...new Set(input.mcpUrls)].map((url) => ({ url })) },
        redirect_url: input.resumeUrl,
      },
      input.origin,
    );
  }

  /**
   * A new draft, within the caps on undecided drafts (per client and in all; decisions: Access requests).
   * Anyone may create drafts, so they are capped: a flood (a new client id each time) cannot grow
   * the store or bury the person's review list.
   */
  private async insert(input: z.output<typeof createAccessRequestBody>, authorize?: AuthorizeOrigin): Promise<AccessRequestRecord> {
    const record = this.newDraft(input, authorize);
    const result = await this.repos.accessRequests.insertDraft(record, { perClient: this.limits.draftsPerClient, total: this.limits.drafts }, this.clock());
    if (!result.stored) {
      const what = result.full === 'client' ? `This app already has ${result.count} undecided access requests` : `svc already holds ${result.count} undecided access requests`;
      throw new AppError('too_many_drafts', `${what}; wait for a decision or for them to expire (10 minutes).`, { headers: { 'Retry-After': '60' } });
    }
    return record;
  }

  /**
   * A request made on `reviewer`'s behalf and approved by them at once, in one transaction and
   * under exactly the rules of approve (decisions: API keys). `within` runs in that same
   * transaction; if anything throws, nothing is stored.
   */
  async createApproved<R>(
    reviewer: UserRecord,
    input: z.output<typeof createAccessRequestBody>,
    body: z.output<typeof approveBody>,
    within: (repos: RepositorySet, record: AccessRequestRecord) => Promise<R>,
  ): Promise<R> {
    const draft = this.newDraft(input);
    return this.repos.transaction(async (repos) => {
      const instances = await this.instancesFor(repos, body);
      this.applyApproval(draft, reviewer, body, instances);
      await repos.accessRequests.put(draft);
      return within(repos, draft);
    });
  }

  /** The MCP instances an approval names, read in the transaction that decides. */
  private async instancesFor(repos: RepositorySet, body: z.output<typeof approveBody>): Promise<Map<string, McpInstanceRecord>> {
    const ids = new Set((body.approved?.mcp_servers ?? []).flatMap((s) => s.instance_ids));
    const found = new Map<string, McpInstanceRecord>();
    for (const id of ids) {
      const instance = await repos.mcpInstances.get(id);
      if (instance) found.set(id, instance);
    }
    return found;
  }

  private newDraft(input: z.output<typeof createAccessRequestBody>, authorize?: AuthorizeOrigin): AccessRequestRecord {
    const now = this.clock();
    return {
      id: randomUUID(),
      app_client_id: input.app_client_id,
      flow_type: input.flow_type,
      requested_role: input.requested_role,
      requested: { version: '1', mcp_servers: input.requested.mcp_servers },
      redirect_url: input.redirect_url ?? null,
      status: 'draft',
      created_at: new Date(now).toISOString(),
      expires_at: new Date(now + DRAFT_LIFETIME_MS).toISOString(),
      updated_at: new Date(now).toISOString(),
      approved_role: null,
      approved: null,
      user_id: null,
      decided_at: null,
      revoked_at: null,
      revoked_by: null,
      failure_reason: null,
      ...(authorize ? { authorize } : {}),
    };
  }

  /** The app's poll: 404 for an unknown id and for another client's request alike. */
  async poll(id: string, appClientId: string): Promise<AccessRequestRecord> {
    const record = await this.get(id);
    if (!record || record.app_client_id !== appClientId) throw notFound('No such access request for this app_client_id.');
    return record;
  }

  /**
   * Undecided requests (draft, and the expired or failed ones nobody decided) are visible to every
   * logged-in user; decided ones to their approver and admins.
   */
  visibleTo(record: AccessRequestRecord, user: UserRecord): boolean {
    return record.user_id === null || record.user_id === user.id || user.role === 'admin';
  }

  async list(user: UserRecord, status?: AccessRequestRecord['status']): Promise<AccessRequestRecord[]> {
    const now = this.clock();
    const rows = (await this.repos.accessRequests.list())
      .map((r) => this.withExpiry(r, now))
      .filter((r) => (!status || r.status === status) && this.visibleTo(r, user));
    return rows.sort((a, b) => b.created_at.localeCompare(a.created_at));
  }

  async getVisible(user: UserRecord, id: string): Promise<AccessRequestRecord> {
    const record = await this.get(id);
    if (!record || !this.visibleTo(record, user)) throw notFound('No such access request.');
    return record;
  }

  maxGrantable(record: AccessRequestRecord, reviewer: UserRecord): AppRole {
    return lowerAppRole(record.requested_role, maxGrantableRole(reviewer.role));
  }

  appInfoFor(record: AccessRequestRecord) {
    return this.appInfo(record.app_client_id);
  }

  /**
   * Approves, under the privilege rules (decisions: Privilege rules). Two cases of a sign-in at the authorization endpoint (an MCP host)
   * differ: approving it with none of the instances it signs in for is a denial, since its token
   * is bound to those instances' proxy URLs and could do nothing; and approving it replaces the
   * grants of earlier sign-ins of that client and person for the same resources, which are revoked
   * and marked replaced, so grants do not pile up as a host signs in again.
   */
  async approve(reviewer: UserRecord, id: string, body: z.output<typeof approveBody>): Promise<AccessRequestRecord> {
    try {
      const record = await this.repos.transaction(async (repos) => {
        const instances = await this.instancesFor(repos, body);
        const decided = await this.change(repos, id, (r) => {
          this.requireDraft(r);
          if (signInGoesNowhere(r, body)) this.markDenied(r, reviewer);
          else this.applyApproval(r, reviewer, body, instances);
        });
        if (decided?.status === 'approved' && decided.authorize) await this.replaceEarlierSignIns(repos, decided, reviewer);
        return decided;
      });
      if (!record) throw notFound('No such access request.');
      return record;
    } catch (err) {
      if (err instanceof AppError || err instanceof StoreUnavailableError) throw err;
      await this.fail(id, err);
      throw new AppError('processing_failed', 'The request could not be processed and is now failed; the app must ask again.', {
        expose: true,
        cause: err,
      });
    }
  }

  /** The privilege rules checked against a draft, which then becomes approved with `reviewer` as its user. */
  private applyApproval(record: AccessRequestRecord, reviewer: UserRecord, body: z.output<typeof approveBody>, instances: Map<string, McpInstanceRecord>): void {
    // the privilege rules (decisions: Privilege rules).
    if (!appRoleAtMost(body.approved_role, record.requested_role)) {
      throw forbidden(`The approved role cannot exceed the requested role (${record.requested_role}).`, 'privilege_escalation');
    }
    if (!appRoleAtMost(body.approved_role, maxGrantableRole(reviewer.role))) {
      throw forbidden(`Your role (${reviewer.role}) can grant at most ${maxGrantableRole(reviewer.role)}.`, 'privilege_escalation');
    }
    const requestedUrls = new Set(record.requested.mcp_servers.map((s) => s.url));
    const granted = new Map<string, Set<string>>();
    (body.approved?.mcp_servers ?? []).forEach((selection, index) => {
      if (!requestedUrls.has(selection.url)) {
        throw invalidBody(`${selection.url} was not requested.`, `approved.mcp_servers.${index}.url`);
      }
      for (const instanceId of selection.instance_ids) {
        // the privilege rules (decisions: Privilege rules): only the reviewer's own, enabled instances of that very URL.
        const instance = instances.get(instanceId);
        if (!instance || instance.owner_id !== reviewer.id || instance.url !== selection.url) {
          throw forbidden(`MCP instance ${instanceId} is not one of yours for ${selection.url}.`, 'mcp_instance_not_owned');
        }
        if (!instance.enabled) {
          throw new AppError('mcp_instance_disabled', `MCP instance ${instanceId} is disabled.`);
        }
        const ids = granted.get(selection.url) ?? new Set<string>();
        ids.add(instanceId);
        granted.set(selection.url, ids);
      }
    });
    const now = this.nowIso();
    record.status = 'approved';
    record.approved_role = body.approved_role;
    record.approved = {
      version: '1',
      mcp_servers: [...granted].map(([url, ids]) => ({ url, instance_ids: [...ids] })),
    };
    record.user_id = reviewer.id;
    record.decided_at = now;
    record.updated_at = now;
    record.limits = normalLimits(body.limits);
    if (body.tool_policies) {
      checkPolicyInstances(body.tool_policies, new Set([...granted.values()].flatMap((ids) => [...ids])));
      record.tool_policies = mergePolicies(undefined, body.tool_policies);
    }
  }

  /** Sets a grant's limits (its approver or an admin); the next call is held to them. */
  async setLimits(actor: UserRecord, id: string, limits: GrantLimitsInput): Promise<AccessRequestRecord> {
    await this.getVisible(actor, id);
    const record = await this.change(this.repos, id, (r) => {
      if (!this.visibleTo(r, actor)) throw notFound('No such access request.');
      if (r.status !== 'approved') throw conflict('not_approved', `Only an approved grant has limits; this one is ${r.status}.`);
      if (r.user_id !== actor.id && actor.role !== 'admin') throw forbidden("Only the grant's approver or an admin can set its limits.");
      const current = r.limits ?? { requests_per_minute: null, tokens_per_day: null };
      const next = normalLimits({ ...current, ...limits });
      // the same limits again (an empty body) change nothing, so nothing is written
      if (next.requests_per_minute === current.requests_per_minute && next.tokens_per_day === current.tokens_per_day) return;
      r.limits = next;
      r.updated_at = this.nowIso();
    });
    if (!record) throw notFound('No such access request.');
    return record;
  }

  async deny(reviewer: UserRecord, id: string): Promise<AccessRequestRecord> {
    const record = await this.change(this.repos, id, (r) => {
      this.requireDraft(r);
      this.markDenied(r, reviewer);
    });
    if (!record) throw notFound('No such access request.');
    return record;
  }

  private markDenied(record: AccessRequestRecord, reviewer: UserRecord): void {
    const now = this.nowIso();
    record.status = 'denied';
    record.user_id = reviewer.id;
    record.decided_at = now;
    record.updated_at = now;
  }

  /** Revokes the approved sign-ins of the same client, person and resources as `current`, naming it as what replaced them. */
  private async replaceEarlierSignIns(repos: RepositorySet, current: AccessRequestRecord, reviewer: UserRecord): Promise<void> {
    const resources = signInResources(current);
    for (const earlier of await repos.accessRequests.approvedFor(current.app_client_id, reviewer.id)) {
      if (earlier.id === current.id || !earlier.authorize || signInResources(earlier) !== resources) continue;
      await repos.accessRequests.update(earlier.id, (r) => {
        if (r.status !== 'approved') return;
        this.markRevoked(r, reviewer);
        r.replaced_by = current.id;
      });
      this.logger.info({ accessRequest: earlier.id, replacedBy: current.id, client: current.app_client_id }, 'grant replaced by a new sign-in of the same app');
    }
  }

  /** approved -> revoked, by the approver or an admin; every token of that grant stops at once. */
  async revoke(actor: UserRecord, id: string): Promise<AccessRequestRecord> {
    await this.getVisible(actor, id);
    const record = await this.change(this.repos, id, (r) => {
      if (!this.visibleTo(r, actor)) throw notFound('No such access request.');
      if (r.status !== 'approved') throw conflict('not_approved', `Only an approved request can be revoked; this one is ${r.status}.`);
      if (r.user_id !== actor.id && actor.role !== 'admin') throw forbidden('Only the approver or an admin can revoke this grant.');
      this.markRevoked(r, actor);
    });
    if (!record) throw notFound('No such access request.');
    return record;
  }

  /** approved -> revoked, on a copy being changed in a transaction whose caller has checked who may (revoke, API keys). */
  markRevoked(record: AccessRequestRecord, actor: UserRecord): void {
    const now = this.nowIso();
    record.status = 'revoked';
    record.revoked_at = now;
    record.revoked_by = actor.id;
    record.updated_at = now;
  }

  /**
   * Retention (decisions: Access requests): expired, denied and failed requests go `finishedDays` after they
   * ended, revoked ones `revokedDays` after the revoke; 0 keeps them. API keys made on a removed
   * request go with it. Answers how many requests were removed.
   */
  async sweep(finishedDays: number, revokedDays: number): Promise<number> {
    const DAY = 24 * 60 * 60 * 1000;
    const now = this.clock();
    const endedAt = (r: AccessRequestRecord) => {
      if (r.status === 'draft') return Date.parse(r.expires_at) <= now ? Date.parse(r.expires_at) : undefined;
      if (r.status === 'revoked') return Date.parse(r.revoked_at ?? r.updated_at);
      if (r.status === 'approved') return undefined;
      return Date.parse(r.updated_at);
    };
    const due = (r: AccessRequestRecord) => {
      const days = r.status === 'revoked' ? revokedDays : finishedDays;
      const ended = endedAt(r);
      return days > 0 && ended !== undefined && ended <= now - days * DAY;
    };
    if (!(await this.repos.accessRequests.list()).some(due)) return 0;
    return this.repos.transaction(async (repos) => {
      const gone = new Set((await repos.accessRequests.list()).filter(due).map((r) => r.id));
      for (const id of gone) await repos.accessRequests.delete(id);
      for (const k of await repos.apiKeys.list()) if (gone.has(k.access_request_id)) await repos.apiKeys.delete(k.id);
      return gone.size;
    });
  }

  private requireDraft(record: AccessRequestRecord): void {
    if (record.status === 'expired') throw conflict('expired', 'This request expired; the app must create a new one.');
    if (record.status !== 'draft') throw conflict('already_processed', `This request was already ${record.status}.`);
  }

  /** draft -> failed on a processing error (decisions: Access requests): the app sees `failed` and must ask again. */
  private async fail(id: string, cause: unknown): Promise<void> {
    this.logger.error({ accessRequest: id, err: (cause as Error)?.message }, 'access request processing failed');
    if (!isUuid(id)) return;
    await this.repos.accessRequests
      .update(id, (record) => {
        if (record.status !== 'draft') return;
        const now = this.nowIso();
        record.status = 'failed';
        record.failure_reason = 'processing_error';
        record.updated_at = now;
      })
      .catch(() => undefined);
  }
}
