import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { forbidden, notFound } from '../errors.js';
import { appDisplayName } from '../access-requests/client-kinds.js';
import type { Clock } from '../http/context.js';
import { hasUnsafeUrlCharacter } from '../http/urls.js';
import type { SecretBox } from '../store/crypto.js';
import { SEAL_KINDS } from '../store/seal-kinds.js';
import type { AccessRequestRecord, UserRecord } from '../store/schema.js';
import type { OAuthClientRecord } from '../store/records.js';
import type { Repositories, RepositorySet } from '../store/repositories.js';
import { isPrivateUseScheme } from './registration.js';

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
const SECRET_KIND = SEAL_KINDS.oauthClientSecret;

export type { OAuthClientRecord } from '../store/records.js';

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * A redirect URI as registered: absolute, http(s) or a private-use scheme for native apps, no
 * fragment, no credentials. Matching is exact string equality (RFC 9700 §2.1).
 */
export const redirectUri = z
  .string()
  .max(2048)
  .refine((value) => {
    if (hasUnsafeUrlCharacter(value)) return false;
    try {
      const url = new URL(value);
      if (url.hash || url.username || url.password || value.includes('#')) return false;
      if (url.protocol === 'https:' || url.protocol === 'http:') return true;
      return isPrivateUseScheme(url.protocol);
    } catch {
      return false;
    }
  }, 'must be an absolute https, http or reverse-domain private-use URI without fragment, credentials, or control, whitespace or invisible characters');

export const createClientBody = z.strictObject({
  name: z.string().trim().min(1).max(100).regex(/^[^\0-\x1f\x7f]+$/, 'must be printable'),
  description: z.string().trim().max(500).regex(/^[^\0-\x08\x0b-\x1f\x7f]*$/, 'must be printable').optional(),
  redirect_uris: z.array(redirectUri).min(1).max(20),
  public: z.boolean().optional(),
});

export const oauthClient = z
  .object({
    client_id: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    redirect_uris: z.array(z.string()),
    public: z.boolean(),
    token_endpoint_auth_method: z.enum(['none', 'client_secret_basic']),
    kind: z.enum(['registered', 'dynamic']).describe('registered: added by an admin; dynamic: registered itself (RFC 7591)'),
    created_at: z.string(),
    last_used_at: z.string().optional().describe('Dynamic clients: the day of their last token (registration counts as the first use)'),
  })
  .meta({ id: 'OAuthClient' });

export const toPublicClient = (c: OAuthClientRecord): z.infer<typeof oauthClient> => ({
  client_id: c.client_id,
  name: c.name,
  description: c.description,
  redirect_uris: c.redirect_uris,
  public: c.public,
  token_endpoint_auth_method: c.public ? 'none' : 'client_secret_basic',
  kind: c.kind ?? 'registered',
  created_at: c.created_at,
  ...(c.last_used_at ? { last_used_at: c.last_used_at } : {}),
});

/** A removed client's approved grants are revoked and its drafts fail. */
async function endGrantsOfRemovedClients(repos: RepositorySet, removed: Set<string>, now: string, actorId: string | null): Promise<void> {
  for (const found of await repos.accessRequests.list()) {
    if (removed.has(found.app_client_id) && (found.status === 'approved' || found.status === 'draft')) await repos.accessRequests.update(found.id, (r) => endGrant(r, now, actorId));
  }
}

function endGrant(r: AccessRequestRecord, now: string, actorId: string | null): void {
  if (r.status === 'approved') {
    r.status = 'revoked';
    r.revoked_at = now;
    r.revoked_by = actorId;
    r.updated_at = now;
  } else if (r.status === 'draft') {
    r.status = 'failed';
    r.failure_reason = 'client_removed';
    r.updated_at = now;
  }
}

/** The embedded authorization server's client registry: clients an admin added, and those that registered themselves. */
export class OAuthClientsService {
  constructor(
    private readonly repos: Repositories,
    private readonly box: SecretBox,
    private readonly clock: Clock,
  ) {}

  private requireAdmin(actor: UserRecord): void {
    if (actor.role !== 'admin') throw forbidden('Only an admin can manage OAuth clients.');
  }

  find(clientId: string): Promise<OAuthClientRecord | undefined> {
    return this.repos.oauthClients.get(clientId);
  }

  list(actor: UserRecord): Promise<OAuthClientRecord[]> {
    this.requireAdmin(actor);
    return this.repos.oauthClients.list();
  }

  /** Answers the record and, for a confidential client, its secret: shown this once, stored sealed. */
  async create(actor: UserRecord, input: z.output<typeof createClientBody>): Promise<{ client: OAuthClientRecord; secret: string | null }> {
    this.requireAdmin(actor);
    const clientId = `svc-${randomBytes(12).toString('base64url')}`;
    const secret = input.public ? null : randomBytes(32).toString('base64url');
    const client: OAuthClientRecord = {
      client_id: clientId,
      name: input.name,
      description: input.description ?? null,
      redirect_uris: [...new Set(input.redirect_uris)],
      public: input.public ?? false,
      client_secret: secret ? this.box.seal(SECRET_KIND, clientId, secret) : null,
      created_at: new Date(this.clock()).toISOString(),
    };
    await this.repos.oauthClients.put(client);
    return { client, secret };
  }

  /** Removing a client also revokes every grant it holds (its tokens stop on their next call). */
  async remove(actor: UserRecord, clientId: string): Promise<void> {
    this.requireAdmin(actor);
    if (!(await this.find(clientId))) throw notFound(`No OAuth client ${clientId}.`);
    const now = new Date(this.clock()).toISOString();
    await this.repos.transaction(async (repos) => {
      await repos.oauthClients.delete(clientId);
      await endGrantsOfRemovedClients(repos, new Set([clientId]), now, actor.id);
    });
  }

  /**
   * Why a new self-registration is refused now, or null. Anyone may register, so svc holds a
   * bounded number of them, and one address may hold only its share: a flood from one place
   * cannot take every place from the hosts of everyone else.
   */
  async registrationRefusal(address: string, caps: { total: number; perAddress: number }): Promise<{ error: string; description: string } | null> {
    const dynamic = (await this.repos.oauthClients.list()).filter((c) => c.kind === 'dynamic');
    if (dynamic.length >= caps.total) {
      return { error: 'too_many_clients', description: 'svc holds as many self-registered clients as it may; ask the person to remove unused ones (svc clients list).' };
    }
    if (caps.perAddress > 0 && dynamic.filter((c) => c.registered_from === address).length >= caps.perAddress) {
      return { error: 'too_many_clients', description: 'This address holds as many self-registered clients as it may; reuse a registration, or ask the person to remove unused ones (svc clients list).' };
    }
    return null;
  }

  /** Stores a client that registered itself (RFC 7591), as the authorization server accepted it, with the address it came from. */
  async registerDynamic(metadata: Record<string, unknown>, from?: string): Promise<void> {
    const clientId = String(metadata.client_id);
    const now = new Date(this.clock()).toISOString();
    const name = typeof metadata.client_name === 'string' ? appDisplayName(metadata.client_name) : '';
    const record: OAuthClientRecord = {
      client_id: clientId,
      name: name || 'Unnamed app',
      description: null,
      redirect_uris: Array.isArray(metadata.redirect_uris) ? metadata.redirect_uris.map(String) : [],
      public: true,
      client_secret: null,
      created_at: now,
      kind: 'dynamic',
      metadata,
      last_used_at: now,
      ...(from ? { registered_from: from } : {}),
    };
    await this.repos.transaction(async (repos) => {
      // a new registration under an old id goes last, as a new client
      await repos.oauthClients.delete(clientId);
      await repos.oauthClients.put(record);
    });
  }

  /** Marks a dynamic client as used today, on a token it got (one write a day at most), so it is not swept. */
  async touch(clientId: string): Promise<void> {
    const c = await this.find(clientId);
    if (c?.kind !== 'dynamic' || (c.last_used_at && this.clock() - Date.parse(c.last_used_at) < DAY_MS)) return;
    const now = new Date(this.clock()).toISOString();
    await this.repos.oauthClients.update(clientId, (row) => {
      row.last_used_at = now;
    });
  }

  /**
   * Removes dynamic clients unused for `days` (0 keeps them forever). Like an admin's remove, it
   * revokes what they still hold. Answers how many went.
   */
  async sweepDynamic(days: number): Promise<number> {
    if (days <= 0) return 0;
    const cutoff = this.clock() - days * DAY_MS;
    const stale = (await this.repos.oauthClients.list())
      .filter((c) => c.kind === 'dynamic' && Date.parse(c.last_used_at ?? c.created_at) < cutoff)
      .map((c) => c.client_id);
    if (stale.length === 0) return 0;
    const gone = new Set(stale);
    const now = new Date(this.clock()).toISOString();
    await this.repos.transaction(async (repos) => {
      for (const id of gone) await repos.oauthClients.delete(id);
      await endGrantsOfRemovedClients(repos, gone, now, null);
    });
    return stale.length;
  }

  /** The metadata oidc-provider needs for a client, secret opened only here. */
  async providerMetadata(clientId: string): Promise<Record<string, unknown> | undefined> {
    const c = await this.find(clientId);
    if (!c) return undefined;
    if (c.kind === 'dynamic' && c.metadata) return { ...c.metadata };
    return {
      client_id: c.client_id,
      client_name: c.name,
      redirect_uris: c.redirect_uris,
      response_types: ['code'],
      grant_types: ['authorization_code', 'refresh_token', TOKEN_EXCHANGE_GRANT],
      token_endpoint_auth_method: c.public ? 'none' : 'client_secret_basic',
      ...(c.client_secret ? { client_secret: this.box.open(SECRET_KIND, c.client_id, c.client_secret) } : {}),
      // Private-use schemes are only valid for native clients; everything else is a web client.
      application_type: c.redirect_uris.some((u) => !/^https?:/.test(u)) ? 'native' : 'web',
    };
  }
}
