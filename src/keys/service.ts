import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { z } from 'zod';
import type { AccessRequestsService } from '../access-requests/service.js';
import { API_KEY_PREFIX, type ApiKeyBearer, type BearerGrant, invalidToken } from '../auth/bearer.js';
import { lowerAppRole, maxGrantableRole } from '../auth/roles.js';
import { AppError, conflict, forbidden, notFound } from '../errors.js';
import type { Clock } from '../http/context.js';
import type { AccessRequestRecord, ApiKeyRecord, UserRecord } from '../store/schema.js';
import type { Repositories } from '../store/repositories.js';
import type { createKeyBody } from './schemas.js';

/** Keys a person may hold that are not revoked (expired ones count until revoked). */
export const MAX_LIVE_KEYS_PER_USER = 100;
const KEY_CLIENT_PREFIX = 'svc-key:';

/** The access request of key `id` names this client: `svc requests` shows which key it is. */
export const keyClientId = (id: string) => `${KEY_CLIENT_PREFIX}${id}`;
export const hashKey = (key: string) => createHash('sha256').update(key).digest('hex');
/** `svc_` and 32 random bytes, base64url: 47 characters, RFC 6750 b64token-safe. */
const newKey = () => `${API_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;

export type ApiKeyStatus = 'active' | 'expired' | 'revoked';

/** What a key is now: revoked (itself or its access request), expired, or active. */
export function keyStatus(key: ApiKeyRecord, record: AccessRequestRecord | undefined, now: number): ApiKeyStatus {
  if (key.revoked_at || !record || record.status !== 'approved') return 'revoked';
  if (key.expires_at && Date.parse(key.expires_at) <= now) return 'expired';
  return 'active';
}

/**
 * API keys (decisions: API keys): each stands on an access request that its owner made and approved as
 * themselves, under the privilege rules of any approval; the key is shown once and only its hash
 * is kept.
 */
export class ApiKeysService {
  constructor(
    private readonly repos: Repositories,
    private readonly requests: AccessRequestsService,
    private readonly clock: Clock,
  ) {}

  /** Creates the access request, approves it as `user` and stores the key's hash: one transaction. */
  async create(user: UserRecord, body: z.output<typeof createKeyBody>): Promise<{ key: string; record: ApiKeyRecord; request: AccessRequestRecord }> {
    const id = randomUUID();
    const key = newKey();
    const now = this.clock();
    const urls = [...new Set(body.mcp_servers.map((s) => s.url))];
    return this.requests.createApproved(
      user,
      { app_client_id: keyClientId(id), flow_type: 'popup', requested_role: body.role, requested: { version: '1', mcp_servers: urls.map((url) => ({ url })) } },
      { approved_role: body.role, approved: { version: '1', mcp_servers: body.mcp_servers } },
      async (repos, request) => {
        let live = 0;
        for (const k of await repos.apiKeys.list()) {
          if (k.user_id === user.id && keyStatus(k, await repos.accessRequests.get(k.access_request_id), now) !== 'revoked') live++;
        }
        if (live >= MAX_LIVE_KEYS_PER_USER) {
          throw conflict('too_many_keys', `You have ${live} API keys; revoke one you no longer use first (svc keys revoke ID).`);
        }
        const record: ApiKeyRecord = {
          id,
          name: body.name,
          user_id: user.id,
          access_request_id: request.id,
          key_hash: hashKey(key),
          created_at: new Date(now).toISOString(),
          expires_at: body.expires_in === null ? null : new Date(now + body.expires_in * 1000).toISOString(),
          revoked_at: null,
        };
        await repos.apiKeys.put(record);
        return { key, record, request };
      },
    );
  }

  /** Your own keys; an admin sees everyone's. Newest first. */
  async list(user: UserRecord): Promise<ApiKeyRecord[]> {
    return (await this.repos.apiKeys.list())
      .filter((k) => this.visibleTo(k, user))
      .sort((a, b) => b.created_at.localeCompare(a.created_at));
  }

  private visibleTo(key: ApiKeyRecord, user: UserRecord): boolean {
    return key.user_id === user.id || user.role === 'admin';
  }

  /** A key by its id or a unique prefix of at least 6 characters, among those `user` may see. */
  private resolve(keys: ApiKeyRecord[], user: UserRecord, ref: string): ApiKeyRecord {
    const visible = keys.filter((k) => this.visibleTo(k, user));
    const exact = visible.find((k) => k.id === ref);
    if (exact) return exact;
    const prefix = ref.toLowerCase();
    const matches = prefix.length >= 6 ? visible.filter((k) => k.id.startsWith(prefix)) : [];
    if (matches.length > 1) {
      throw new AppError('ambiguous_id', `${matches.length} API keys start with ${ref}; give more of the id.`, { param: 'id' });
    }
    if (matches.length === 0) throw notFound('No such API key.');
    return matches[0];
  }

  /** Ends the key and revokes its access request (its owner or an admin), in one transaction. */
  async revoke(actor: UserRecord, ref: string): Promise<ApiKeyRecord> {
    return this.repos.transaction(async (repos) => {
      const found = this.resolve(await repos.apiKeys.list(), actor, ref);
      if (found.user_id !== actor.id && actor.role !== 'admin') throw forbidden('Only the owner of the key or an admin can revoke it.');
      if (found.revoked_at) throw conflict('already_revoked', 'This API key was already revoked.');
      await repos.accessRequests.update(found.access_request_id, (request) => {
        if (request.status === 'approved') this.requests.markRevoked(request, actor);
      });
      return (await repos.apiKeys.update(found.id, (key) => {
        key.revoked_at = new Date(this.clock()).toISOString();
      }))!;
    });
  }

  requestOf(key: ApiKeyRecord): Promise<AccessRequestRecord | undefined> {
    return this.repos.accessRequests.get(key.access_request_id);
  }

  /** The key's name as the app's name, for `svc requests` and the review page. */
  async appInfo(clientId: string): Promise<{ name: string } | undefined> {
    if (!clientId.startsWith(KEY_CLIENT_PREFIX)) return undefined;
    const id = clientId.slice(KEY_CLIENT_PREFIX.length);
    const key = await this.repos.apiKeys.get(id);
    return key ? { name: `API key "${key.name}"` } : undefined;
  }
}

/**
 * The Bearer check of an API key, on every call: the key by its hash, then its grant record
 * (approved, for that key's client and owner) and its user, exactly as a token's. Lookups are
 * O(1): the records by id, and the repository's index of keys by hash, which follows every
 * durable change, so a revoke ends the key on its next call.
 */
export class ApiKeyVerifier implements ApiKeyBearer {
  constructor(
    private readonly repos: Repositories,
    private readonly clock: Clock,
    private readonly metadataUrl: () => string,
  ) {}

  async verify(credential: string): Promise<BearerGrant> {
    const fail = (message: string) => invalidToken(message, this.metadataUrl());
    const { key, record, user } = await this.records(hashKey(credential));
    if (!key) throw fail('The API key is not known.');
    if (key.revoked_at) throw fail('The API key was revoked.');
    if (key.expires_at && Date.parse(key.expires_at) <= this.clock()) throw fail('The API key has expired.');
    if (!record || record.status !== 'approved' || !record.approved_role) throw fail('The grant behind this API key is not approved (revoked or gone).');
    const clientId = keyClientId(key.id);
    if (record.app_client_id !== clientId || record.user_id !== key.user_id) throw fail('The grant behind this API key belongs to another client or user.');
    if (!user) throw fail('The owner of this API key no longer exists.');
    // Never above what the owner may grant now (decisions: Access requests).
    return { record, user, role: lowerAppRole(record.approved_role, maxGrantableRole(user.role)), clientId, audience: null };
  }

  /** The key, its grant and its owner: in one statement where the store offers it, else the key and then the other two at once. */
  private async records(keyHash: string): Promise<{ key?: ApiKeyRecord; record?: AccessRequestRecord; user?: UserRecord }> {
    if (this.repos.bearerRecords) return this.repos.bearerRecords.forKey(keyHash);
    const key = await this.repos.apiKeys.findByHash(keyHash);
    if (!key) return {};
    const [record, user] = await Promise.all([this.repos.accessRequests.get(key.access_request_id), this.repos.users.get(key.user_id)]);
    return { key, record, user };
  }

  async attempted(credential: string) {
    const key = await this.repos.apiKeys.findByHash(hashKey(credential));
    return key ? { accessRequestId: key.access_request_id, clientId: keyClientId(key.id) } : undefined;
  }
}
