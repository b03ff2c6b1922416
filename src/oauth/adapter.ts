import type { Db } from '../store/schema.js';
import type { Store } from '../store/store.js';
import type { OAuthClientsService } from './clients.js';

type Payload = Record<string, unknown> & { grantId?: string; userCode?: string; uid?: string; consumed?: number };

interface DurableRecord {
  model: string;
  id: string;
  payload: Payload;
  expires_at: number | null;
}

/** Models that must survive a restart (a refresh token and its grant); the rest are short-lived. */
const DURABLE_MODELS = new Set(['RefreshToken', 'Grant']);

const durableOf = (db: Db): DurableRecord[] => ((db.oauth_state ??= []) as DurableRecord[]);

/**
 * oidc-provider's storage adapter. Clients come from svc's registry; refresh tokens and grants
 * live in the durable store (so they survive restarts and revoke with a grant); codes, sessions
 * and interactions live in memory and expire on their own.
 */
export function createAdapterClass(store: Store, clients: OAuthClientsService, clock: () => number) {
  const memory = new Map<string, { payload: Payload; expiresAt: number | null }>();

  const sweepMemory = () => {
    const now = clock();
    for (const [key, v] of memory) if (v.expiresAt !== null && v.expiresAt <= now) memory.delete(key);
  };

  return class StoreAdapter {
    readonly durable: boolean;

    constructor(readonly model: string) {
      this.durable = DURABLE_MODELS.has(model);
    }

    private key(id: string) {
      return `${this.model}:${id}`;
    }

    async upsert(id: string, payload: Payload, expiresIn?: number): Promise<void> {
      const expiresAt = expiresIn ? clock() + expiresIn * 1000 : null;
      if (!this.durable) {
        sweepMemory();
        memory.set(this.key(id), { payload, expiresAt });
        return;
      }
      const now = clock();
      await store.update((db) => {
        const rows = durableOf(db).filter((r) => !(r.model === this.model && r.id === id) && (r.expires_at === null || r.expires_at > now));
        rows.push({ model: this.model, id, payload, expires_at: expiresAt });
        db.oauth_state = rows;
      });
    }

    async find(id: string): Promise<Payload | undefined> {
      if (this.model === 'Client') return clients.providerMetadata(id) as Payload | undefined;
      if (!this.durable) {
        const hit = memory.get(this.key(id));
        if (!hit || (hit.expiresAt !== null && hit.expiresAt <= clock())) return undefined;
        return hit.payload;
      }
      const row = store.read((db) => durableOf(db).find((r) => r.model === this.model && r.id === id));
      if (!row || (row.expires_at !== null && row.expires_at <= clock())) return undefined;
      return row.payload;
    }

    async findByUserCode(userCode: string): Promise<Payload | undefined> {
      for (const [key, v] of memory) if (key.startsWith(`${this.model}:`) && v.payload.userCode === userCode) return v.payload;
      return undefined;
    }

    async findByUid(uid: string): Promise<Payload | undefined> {
      for (const [key, v] of memory) if (key.startsWith(`${this.model}:`) && v.payload.uid === uid) return v.payload;
      return undefined;
    }

    async consume(id: string): Promise<void> {
      const consumed = Math.floor(clock() / 1000);
      if (!this.durable) {
        const hit = memory.get(this.key(id));
        if (hit) hit.payload = { ...hit.payload, consumed };
        return;
      }
      await store.update((db) => {
        const row = durableOf(db).find((r) => r.model === this.model && r.id === id);
        if (row) row.payload = { ...row.payload, consumed };
      });
    }

    async destroy(id: string): Promise<void> {
      if (!this.durable) {
        memory.delete(this.key(id));
        return;
      }
      if (!store.read((db) => durableOf(db).some((r) => r.model === this.model && r.id === id))) return;
      await store.update((db) => {
        db.oauth_state = durableOf(db).filter((r) => !(r.model === this.model && r.id === id));
      });
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      for (const [key, v] of memory) if (key.startsWith(`${this.model}:`) && v.payload.grantId === grantId) memory.delete(key);
      if (!this.durable) return;
      if (!store.read((db) => durableOf(db).some((r) => r.model === this.model && r.payload.grantId === grantId))) return;
      await store.update((db) => {
        db.oauth_state = durableOf(db).filter((r) => !(r.model === this.model && r.payload.grantId === grantId));
      });
    }
  };
}
