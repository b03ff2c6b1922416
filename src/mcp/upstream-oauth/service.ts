import { randomBytes } from 'node:crypto';
import { AppError } from '../../errors.js';
import type { Clock } from '../../http/context.js';
import type { Logger } from '../../log.js';
import type { SecretBox } from '../../store/crypto.js';
import type { Repositories } from '../../store/repositories.js';
import type { McpInstanceRecord, McpOAuthPending, McpOAuthRecord } from '../../store/schema.js';
import { SEAL_KINDS } from '../../store/seal-kinds.js';
import { AUTHORIZATION_TTL_MS, type Binding, hashState, keptPending, newAuthorization, splitState } from './authorize.js';
import { type CallbackQuery, type Refusal, REFUSALS, refusalFor } from './callback.js';
import { canonicalResource, discover, probe } from './discovery.js';
import { CALLBACK_PATH, clientFor, type ClientRecord } from './registration.js';
import { expiresSoon, revokeToken, signInRequired, SingleFlight, tokenRequest, type TokenSet } from './tokens.js';

export interface UpstreamOAuthDeps {
  repos: Repositories;
  box: SecretBox;
  clock: Clock;
  logger: Logger;
  baseUrl: () => string;
  /** a desktop notice for the person (when the notifier is on) */
  notify?: (title: string, body: string, url: string) => void;
}

/** What the owner gives at `svc mcp add` about signing in. */
export interface OAuthOptions {
  client_id?: string;
  client_secret?: string;
  scope?: string;
}

/** The state of an instance's sign-in, as every surface shows it: never a token. */
export interface OAuthView {
  kind: 'oauth';
  status: 'connected' | 'needs_sign_in';
  reason?: McpOAuthRecord['reason'];
  issuer?: string;
  client?: ClientRecord['kind'];
  scope?: string;
  connected_at?: string;
  sign_in_url: string;
}

const K = SEAL_KINDS;
const pendingSealId = (instanceId: string, stateHash: string) => `${instanceId}:${stateHash}`;

/**
 * svc as the OAuth client of hosted MCP servers, for their owners: discovery and registration,
 * the sign-in, and the tokens it then holds (sealed per instance) and refreshes, once for every
 * call that meets a stale token, on this replica and across a team's (`repos.exclusive`).
 */
export class UpstreamOAuth {
  private readonly refreshes = new SingleFlight<string>();

  constructor(private readonly deps: UpstreamOAuthDeps) {}

  /** The sign-in state of a new instance whose server answered with a Bearer challenge; undefined if it did not. */
  async forNewInstance(id: string, url: string, opts: OAuthOptions): Promise<McpOAuthRecord | undefined> {
    const challenge = opts.client_id ? ((await probe(url)) ?? {}) : await probe(url);
    if (!challenge) return undefined;
    return {
      status: 'needs_sign_in',
      reason: 'not_signed_in',
      generation: 0,
      ...(challenge.resource_metadata ? { resource_metadata_url: challenge.resource_metadata } : {}),
      ...(opts.scope ? { scope: opts.scope } : {}),
      ...(opts.client_id
        ? { client: { kind: 'pre_registered' as const, client_id: opts.client_id, ...(opts.client_secret ? { client_secret: this.deps.box.seal(K.mcpOAuthClientSecret, id, opts.client_secret) } : {}) } }
        : {}),
    };
  }

  view(instance: McpInstanceRecord): OAuthView | undefined {
    const o = instance.oauth;
    if (!o) return undefined;
    return {
      kind: 'oauth',
      status: o.status,
      ...(o.reason ? { reason: o.reason } : {}),
      ...(o.issuer ? { issuer: o.issuer } : {}),
      ...(o.client ? { client: o.client.kind } : {}),
      ...(o.scope ? { scope: o.scope } : {}),
      ...(o.connected_at ? { connected_at: o.connected_at } : {}),
      sign_in_url: `${this.deps.baseUrl()}/ui/mcps/${encodeURIComponent(instance.id)}/sign-in`,
    };
  }

  private secretOf(instance: McpInstanceRecord): string | undefined {
    const sealed = instance.oauth?.client?.client_secret;
    return sealed ? this.deps.box.open(K.mcpOAuthClientSecret, instance.id, sealed) : undefined;
  }

  private tokensOf(instance: McpInstanceRecord): TokenSet | undefined {
    const sealed = instance.oauth?.tokens;
    return sealed ? (JSON.parse(this.deps.box.open(K.mcpOAuthTokens, instance.id, sealed)) as TokenSet) : undefined;
  }

  /** The Authorization header toward the instance's server, refreshed first when it is about to end; none for a server without OAuth. */
  async authorization(instance: McpInstanceRecord): Promise<string | undefined> {
    const o = instance.oauth;
    if (!o) return undefined;
    if (o.status !== 'connected' || !o.tokens) throw signInRequired(instance.name);
    if (expiresSoon(o, this.deps.clock())) return `Bearer ${await this.refresh(instance, o.generation)}`;
    return `Bearer ${this.tokensOf(instance)!.access_token}`;
  }

  /**
   * The server refused the token svc sent (a `401`): a refresh, unless another call refreshed since.
   * Answers whether there is a new token to try; when there is none the instance needs a sign-in.
   */
  async refused(instance: McpInstanceRecord, sentAuthorization: string | undefined): Promise<boolean> {
    const o = instance.oauth;
    if (!o) return false;
    const fresh = await this.deps.repos.mcpInstances.get(instance.id);
    if (!fresh?.oauth || fresh.oauth.status !== 'connected') return false;
    const current = this.tokensOf(fresh);
    if (current && `Bearer ${current.access_token}` !== sentAuthorization) return true;
    if (!current?.refresh_token) {
      await this.needsSignIn(fresh, 'token_refused');
      return false;
    }
    try {
      await this.refresh(fresh, fresh.oauth.generation);
      return true;
    } catch (err) {
      if (err instanceof AppError && err.code === 'mcp_sign_in_required') return false;
      throw err;
    }
  }

  /** A new access token: one refresh for every call that saw generation `seen`, whatever replica runs it. */
  private refresh(instance: McpInstanceRecord, seen: number): Promise<string> {
    return this.refreshes.run(instance.id, () => {
      const exclusive = this.deps.repos.exclusive;
      const once = () => this.refreshOnce(instance.id, seen);
      return exclusive ? exclusive(`mcp-oauth-refresh:${instance.id}`, once) : once();
    });
  }

  private async refreshOnce(id: string, seen: number): Promise<string> {
    // read again under the lock: another replica may have refreshed while this one waited
    const fresh = await this.deps.repos.mcpInstances.get(id);
    const o = fresh?.oauth;
    if (!fresh || !o || o.status !== 'connected' || !o.tokens) throw signInRequired(fresh?.name ?? 'gone');
    const held = this.tokensOf(fresh)!;
    if (o.generation !== seen && !expiresSoon(o, this.deps.clock())) return held.access_token;
    if (!held.refresh_token || !o.token_endpoint || !o.client) {
      await this.needsSignIn(fresh, 'token_refused');
      throw signInRequired(fresh.name);
    }
    const answer = await tokenRequest(o.token_endpoint, o.client, this.secretOf(fresh), {
      grant_type: 'refresh_token',
      refresh_token: held.refresh_token,
      resource: canonicalResource(fresh.url),
    });
    if (!answer.ok) {
      if (!answer.refused) throw new AppError('upstream_unavailable', `The authorization server of instance ${fresh.name.slice(0, 60)} could not be reached to refresh its sign-in.`, { expose: true });
      this.deps.logger.warn({ instance: id, error: answer.error }, 'mcp instance refresh refused: it needs a sign-in');
      await this.needsSignIn(fresh, 'refresh_refused');
      throw signInRequired(fresh.name);
    }
    // a server that does not rotate keeps the refresh token it had
    const tokens: TokenSet = { ...answer.tokens, ...(answer.tokens.refresh_token ? {} : held.refresh_token ? { refresh_token: held.refresh_token } : {}) };
    await this.keepTokens(id, tokens, answer.expires_in, o.generation);
    this.deps.logger.info({ instance: id }, 'mcp instance sign-in refreshed');
    return tokens.access_token;
  }

  private async keepTokens(id: string, tokens: TokenSet, expiresIn: number | undefined, generation: number, extra: Partial<McpOAuthRecord> = {}): Promise<void> {
    const sealed = this.deps.box.seal(K.mcpOAuthTokens, id, JSON.stringify(tokens));
    const now = this.deps.clock();
    await this.deps.repos.mcpInstances.update(id, (m) => {
      if (!m.oauth) return;
      const { reason: _r, expires_at: _e, ...rest } = m.oauth;
      m.oauth = {
        ...rest,
        ...extra,
        status: 'connected',
        tokens: sealed,
        generation: Math.max(generation, m.oauth.generation) + 1,
        ...(expiresIn ? { expires_at: now + expiresIn * 1000 } : {}),
      };
    });
  }

  /** Forgets the tokens and marks the instance as needing a sign-in, on every surface, and tells the person. */
  async needsSignIn(instance: McpInstanceRecord, reason: NonNullable<McpOAuthRecord['reason']>): Promise<void> {
    await this.deps.repos.mcpInstances.update(instance.id, (m) => {
      if (!m.oauth) return;
      const { tokens: _t, expires_at: _e, ...rest } = m.oauth;
      m.oauth = { ...rest, status: 'needs_sign_in', reason, generation: m.oauth.generation + 1 };
    });
    if (reason !== 'signed_out') {
      this.deps.notify?.(`svc: ${instance.name} needs you to sign in again`, 'Apps cannot use it until you do. Sign in at', `${this.deps.baseUrl()}/ui/mcps/${encodeURIComponent(instance.id)}/sign-in`);
    }
  }

  /**
   * Starts a sign-in for `svc mcp login`: the upstream authorization URL, and the login's secret
   * the CLI asks with how it went. Its state is bound to that secret, not to a browser session.
   */
  async startForCli(instance: McpInstanceRecord): Promise<{ authorization_url: string; login: string; expires_at: string }> {
    const login = randomBytes(24).toString('base64url');
    const url = await this.start(instance, { cli_hash: hashState(login) });
    return { authorization_url: url, login, expires_at: new Date(this.deps.clock() + AUTHORIZATION_TTL_MS).toISOString() };
  }

  /** How the CLI login holding `login` went: under way, connected, refused (and why), or unknown (expired, or never started). */
  async cliLoginStatus(instance: McpInstanceRecord, login: string): Promise<{ status: 'pending' | 'connected' | 'refused' | 'unknown'; why?: string }> {
    const hash = hashState(login);
    const pending = instance.oauth?.pending?.find((p) => p.cli_hash === hash && p.expires_at > this.deps.clock());
    if (!pending) return { status: 'unknown' };
    if (pending.result === 'connected') return { status: 'connected' };
    if (pending.result === 'refused') return { status: 'refused', ...(pending.why ? { why: pending.why } : {}) };
    return { status: 'pending' };
  }

  /** Starts a sign-in bound to `binding`: answers the upstream authorization URL to send the browser to. */
  async start(instance: McpInstanceRecord, binding: Binding): Promise<string> {
    const o = instance.oauth;
    if (!o) throw new AppError('mcp_oauth_not_used', `The MCP server of instance ${instance.name.slice(0, 60)} does not sign in with OAuth.`);
    const found = await discover(instance.url, o.resource_metadata_url);
    const base = this.deps.baseUrl();
    const { client, fresh } = await clientFor(o.client, found.as, base);
    const now = this.deps.clock();
    const auth = newAuthorization(instance.id, binding, found, client, `${base}${CALLBACK_PATH}`, o.scope, now);
    const pending = { ...auth.pending, verifier: this.deps.box.seal(K.mcpOAuthVerifier, pendingSealId(instance.id, auth.pending.state_hash), auth.verifier) };
    await this.deps.repos.mcpInstances.update(instance.id, (m) => {
      if (!m.oauth) return;
      m.oauth = { ...m.oauth, ...(fresh ? { client } : {}), pending: keptPending(m.oauth.pending, pending, now) };
    });
    this.deps.logger.info({ instance: instance.id, client: client.kind, registered: fresh }, 'mcp instance sign-in started');
    return auth.url;
  }

  /** The callback: the instance it connected, or why it refused (nothing stored then). */
  async finish(query: CallbackQuery, sessionHash: string | undefined): Promise<{ instance: McpInstanceRecord } | { refusal: Refusal }> {
    const parts = query.state ? splitState(query.state) : null;
    const instance = parts ? await this.deps.repos.mcpInstances.get(parts.instanceId) : undefined;
    const stateHash = parts ? hashState(parts.secret) : '';
    const pending = instance?.oauth?.pending?.find((p) => p.state_hash === stateHash && !p.result);
    if (!instance || !pending) return { refusal: REFUSALS.unknown };
    const refusal = refusalFor(pending, query, sessionHash, this.deps.clock());
    if (refusal && refusal !== REFUSALS.declined) return { refusal };
    if (!(await this.take(instance.id, stateHash))) return { refusal: REFUSALS.unknown };
    const outcome = refusal ? { refusal } : await this.exchange(instance, pending, query.code!);
    if (pending.cli_hash) await this.settle(instance.id, stateHash, 'refusal' in outcome ? outcome.refusal.title : undefined);
    return outcome;
  }

  /**
   * Used once: of two answers with this state, exactly one takes it. A CLI-started one stays,
   * marked, until it expires: its CLI reads there how it ended.
   */
  private async take(id: string, stateHash: string): Promise<boolean> {
    let taken = false;
    await this.deps.repos.mcpInstances.update(id, (m) => {
      taken = false;
      const list = m.oauth?.pending ?? [];
      const found = list.find((p) => p.state_hash === stateHash && !p.result);
      if (!m.oauth || !found) return;
      taken = true;
      const kept = found.cli_hash ? list.map((p) => (p === found ? { ...p, result: 'exchanging' as const } : p)) : list.filter((p) => p !== found);
      m.oauth = { ...m.oauth, pending: kept };
    });
    return taken;
  }

  private async settle(id: string, stateHash: string, refusedWhy: string | undefined): Promise<void> {
    await this.deps.repos.mcpInstances.update(id, (m) => {
      if (!m.oauth?.pending) return;
      const result = refusedWhy === undefined ? ('connected' as const) : ('refused' as const);
      m.oauth = { ...m.oauth, pending: m.oauth.pending.map((p) => (p.state_hash === stateHash ? { ...p, result, ...(refusedWhy ? { why: refusedWhy } : {}) } : p)) };
    });
  }

  private async exchange(instance: McpInstanceRecord, pending: McpOAuthPending, code: string): Promise<{ instance: McpInstanceRecord } | { refusal: Refusal }> {
    const client = instance.oauth!.client!;
    const verifier = this.deps.box.open(K.mcpOAuthVerifier, pendingSealId(instance.id, pending.state_hash), pending.verifier);
    const answer = await tokenRequest(pending.token_endpoint, client, this.secretOf(instance), {
      grant_type: 'authorization_code',
      code,
      redirect_uri: pending.redirect_uri,
      code_verifier: verifier,
      resource: pending.resource,
    });
    if (!answer.ok) {
      this.deps.logger.warn({ instance: instance.id, error: answer.error }, 'mcp instance sign-in: the code was not exchanged');
      return { refusal: answer.refused ? REFUSALS.codeRefused : REFUSALS.unreachable };
    }
    await this.keepTokens(instance.id, answer.tokens, answer.expires_in, instance.oauth!.generation, {
      issuer: pending.issuer,
      token_endpoint: pending.token_endpoint,
      ...(pending.revocation_endpoint ? { revocation_endpoint: pending.revocation_endpoint } : {}),
      connected_at: new Date(this.deps.clock()).toISOString(),
    });
    this.deps.logger.info({ instance: instance.id, started_by: pending.cli_hash ? 'cli' : 'web' }, 'mcp instance signed in');
    return { instance: (await this.deps.repos.mcpInstances.get(instance.id)) ?? instance };
  }

  /** Forgets the instance's tokens, revoking them at the server where it takes revocations (RFC 7009). */
  async logout(instance: McpInstanceRecord): Promise<{ revoked: boolean }> {
    const o = instance.oauth;
    if (!o) throw new AppError('mcp_oauth_not_used', `The MCP server of instance ${instance.name.slice(0, 60)} does not sign in with OAuth.`);
    const tokens = this.tokensOf(instance);
    let revoked = false;
    if (tokens && o.revocation_endpoint && o.client) {
      const secret = this.secretOf(instance);
      // the refresh token is what outlives the sign-in; a self-contained access token may not be revocable at all
      const [refresh, access] = await Promise.all([
        tokens.refresh_token ? revokeToken(o.revocation_endpoint, o.client, secret, tokens.refresh_token, 'refresh_token') : Promise.resolve(undefined),
        revokeToken(o.revocation_endpoint, o.client, secret, tokens.access_token, 'access_token'),
      ]);
      revoked = refresh ?? access;
      if (!revoked) this.deps.logger.warn({ instance: instance.id }, 'mcp instance sign-out: the server did not confirm the revocation');
    }
    await this.needsSignIn(instance, 'signed_out');
    this.deps.logger.info({ instance: instance.id, revoked }, 'mcp instance signed out');
    return { revoked };
  }
}
