import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { forbidden, notFound } from '../errors.js';
import type { Clock } from '../http/context.js';
import type { SecretBox } from '../store/crypto.js';
import type { Db, UserRecord } from '../store/schema.js';
import type { Store } from '../store/store.js';

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
const SECRET_KIND = 'oauth_client_secret';

export interface OAuthClientRecord {
  client_id: string;
  name: string;
  description: string | null;
  redirect_uris: string[];
  public: boolean;
  /** sealed; null for public clients */
  client_secret: string | null;
  created_at: string;
}

const clientsOf = (db: Db): OAuthClientRecord[] => db.oauth_clients as OAuthClientRecord[];

/**
 * A redirect URI as registered: absolute, http(s) or a private-use scheme for native apps, no
 * fragment, no credentials. Matching is exact string equality (RFC 9700 §2.1).
 */
export const redirectUri = z
  .string()
  .max(2048)
  .refine((value) => {
    try {
      const url = new URL(value);
      if (url.hash || url.username || url.password || value.includes('#')) return false;
      if (url.protocol === 'https:' || url.protocol === 'http:') return true;
      return /^[a-z][a-z0-9+.-]*\.[a-z0-9+.-]+:$/i.test(url.protocol);
    } catch {
      return false;
    }
  }, 'must be an absolute https, http or reverse-domain private-use URI without fragment or credentials');

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
    created_at: z.string(),
  })
  .meta({ id: 'OAuthClient' });

export const toPublicClient = (c: OAuthClientRecord): z.infer<typeof oauthClient> => ({
  client_id: c.client_id,
  name: c.name,
  description: c.description,
  redirect_uris: c.redirect_uris,
  public: c.public,
  token_endpoint_auth_method: c.public ? 'none' : 'client_secret_basic',
  created_at: c.created_at,
});

/** The embedded authorization server's client registry, managed by admins. */
export class OAuthClientsService {
  constructor(
    private readonly store: Store,
    private readonly box: SecretBox,
    private readonly clock: Clock,
  ) {}

  private requireAdmin(actor: UserRecord): void {
    if (actor.role !== 'admin') throw forbidden('Only an admin can manage OAuth clients.');
  }

  find(clientId: string): OAuthClientRecord | undefined {
    return this.store.read((db) => clientsOf(db).find((c) => c.client_id === clientId));
  }

  list(actor: UserRecord): OAuthClientRecord[] {
    this.requireAdmin(actor);
    return this.store.read((db) => [...clientsOf(db)]);
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
    await this.store.update((db) => {
      clientsOf(db).push(client);
    });
    return { client, secret };
  }

  /** Removing a client also revokes every grant it holds (its tokens stop on their next call). */
  async remove(actor: UserRecord, clientId: string): Promise<void> {
    this.requireAdmin(actor);
    if (!this.find(clientId)) throw notFound(`No OAuth client ${clientId}.`);
    const now = new Date(this.clock()).toISOString();
    await this.store.update((db) => {
      db.oauth_clients = clientsOf(db).filter((c) => c.client_id !== clientId);
      for (const r of db.access_requests) {
        if (r.app_client_id !== clientId) continue;
        if (r.status === 'approved') {
          r.status = 'revoked';
          r.revoked_at = now;
          r.revoked_by = actor.id;
          r.updated_at = now;
        } else if (r.status === 'draft') {
          r.status = 'failed';
          r.failure_reason = 'client_removed';
          r.updated_at = now;
        }
      }
    });
  }

  /** The metadata oidc-provider needs for a client, secret opened only here. */
  providerMetadata(clientId: string): Record<string, unknown> | undefined {
    const c = this.find(clientId);
    if (!c) return undefined;
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
