import type { SecretBox } from '../store/crypto.js';
import { SEAL_KINDS } from '../store/seal-kinds.js';
import type { OAuthStateRecord } from '../store/records.js';
import type { Repositories } from '../store/repositories.js';
import type { OAuthClientsService } from './clients.js';
import { hashId, markGrantEnded, rowKey } from './token-family.js';

type Payload = Record<string, unknown> & { grantId?: string; userCode?: string; uid?: string; consumed?: number };

type DurableRecord = OAuthStateRecord;

const SEAL_KIND = SEAL_KINDS.oauthState;

/** What tokens are redeemed for a grant's tokens, once: a second use of one is a replay. */
const GRANT_SOURCES = new Set(['AuthorizationCode', 'RefreshToken', 'DeviceCode', 'BackchannelAuthenticationRequest']);

/** Models that must survive a restart (a refresh token and its grant); the rest are short-lived. */
const DURABLE_MODELS = new Set(['RefreshToken', 'Grant']);


/**
 * Removes dead OAuth state: expired rows, and grants no refresh token holds any more once their
 * code had time to be redeemed (`codeTtlMs`). Answers how many rows went.
 */
export async function sweepOAuthState(repos: Repositories, now: number, codeTtlMs: number): Promise<number> {
  const dead = (rows: DurableRecord[]) => {
    // a Grant row is keyed by the hash of its id; refresh tokens name the grant id itself
    const held = new Set(
      rows.filter((r) => r.model === 'RefreshToken' && r.grant_id && (r.expires_at === null || r.expires_at > now)).map((r) => hashId('Grant', r.grant_id!)),
    );
    return (r: DurableRecord) => (r.expires_at !== null && r.expires_at <= now) || (r.model === 'Grant' && !held.has(r.id) && (r.created_at ?? 0) <= now - codeTtlMs);
  };
  const rows = await repos.oauthState.list();
  const count = rows.filter(dead(rows)).length;
  if (count === 0) return 0;
  return repos.transaction(async (r) => {
    const current = await r.oauthState.list();
    const gone = current.filter(dead(current));
    for (const row of gone) await r.oauthState.delete(rowKey(row));
    return gone.length;
  });
}

/**
 * oidc-provider's storage adapter. Clients come from svc's registry; refresh tokens and grants
 * live in the durable store (so they survive restarts and revoke with a grant), keyed by a hash
 * of their id and sealed, so db.json holds no usable token; codes, sessions and interactions
 * live in memory and expire on their own. `requestAddress` is the address of the request being
 * served (oidc-provider calls the adapter with no request in hand).
 *
 * `shared`: several replicas serve one store (a team server), and any of them may get the next
 * step of an authorization another began, so every model is kept in the store, found by a hashed
 * uid or user code where oidc-provider looks one up that way.
 */
export function createAdapterClass(
  repos: Repositories,
  box: SecretBox,
  clients: OAuthClientsService,
  clock: () => number,
  requestAddress: () => string | undefined = () => undefined,
  opts: {
    shared?: boolean;
    /**
     * A code or refresh token of grant `grantId` consumed a second time (or gone, its grant
     * already ended): two requests used it at once, each having found it unused. Ends that grant's
     * token family and throws, as oidc-provider does when the second use comes after the first.
     */
    replayed?: (grantId: string | undefined) => Promise<never>;
  } = {},
) {
  const open = (row: DurableRecord): Payload => JSON.parse(box.open(SEAL_KIND, row.id, row.payload)) as Payload;
  const memory = new Map<string, { payload: Payload; expiresAt: number | null }>();
  /** a live stored row of `model` whose payload has this uid or user code */
  const findStored = async (model: string, field: 'uid' | 'userCode', value: string): Promise<Payload | undefined> => {
    const wanted = hashId(model, `${field}:${value}`);
    const now = clock();
    const row = (await repos.oauthState.list()).find((r) => r.model === model && r.lookup === wanted && (r.expires_at === null || r.expires_at > now));
    return row ? open(row) : undefined;
  };

  const sweepMemory = () => {
    const now = clock();
    for (const [key, v] of memory) if (v.expiresAt !== null && v.expiresAt <= now) memory.delete(key);
  };

  return class StoreAdapter {
    readonly durable: boolean;

    constructor(readonly model: string) {
      this.durable = opts.shared === true || DURABLE_MODELS.has(model);
    }

    private key(id: string) {
      return `${this.model}:${id}`;
    }

    async upsert(id: string, payload: Payload, expiresIn?: number): Promise<void> {
      // only a client's own registration (RFC 7591) writes a Client, with the address it came from
      if (this.model === 'Client') return clients.registerDynamic(payload, requestAddress());
      const expiresAt = expiresIn ? clock() + expiresIn * 1000 : null;
      if (!this.durable) {
        sweepMemory();
        memory.set(this.key(id), { payload, expiresAt });
        return;
      }
      const now = clock();
      const key = hashId(this.model, id);
      const row: DurableRecord = { model: this.model, id: key, payload: box.seal(SEAL_KIND, key, JSON.stringify(payload)), grant_id: payload.grantId ?? null, expires_at: expiresAt, created_at: now };
      const lookup = payload.uid ? hashId(this.model, `uid:${payload.uid}`) : payload.userCode ? hashId(this.model, `userCode:${payload.userCode}`) : undefined;
      await repos.oauthState.put(opts.shared && lookup ? { ...row, lookup } : row);
    }

    async find(id: string): Promise<Payload | undefined> {
      if (this.model === 'Client') return (await clients.providerMetadata(id)) as Payload | undefined;
      if (!this.durable) {
        const hit = memory.get(this.key(id));
        if (!hit || (hit.expiresAt !== null && hit.expiresAt <= clock())) return undefined;
        return hit.payload;
      }
      const key = hashId(this.model, id);
      const row = await repos.oauthState.get(rowKey({ model: this.model, id: key }));
      if (!row || (row.expires_at !== null && row.expires_at <= clock())) return undefined;
      return open(row);
    }

    async findByUserCode(userCode: string): Promise<Payload | undefined> {
      if (opts.shared) return findStored(this.model, 'userCode', userCode);
      for (const [key, v] of memory) if (key.startsWith(`${this.model}:`) && v.payload.userCode === userCode) return v.payload;
      return undefined;
    }

    async findByUid(uid: string): Promise<Payload | undefined> {
      if (opts.shared) return findStored(this.model, 'uid', uid);
      for (const [key, v] of memory) if (key.startsWith(`${this.model}:`) && v.payload.uid === uid) return v.payload;
      return undefined;
    }

    async consume(id: string): Promise<void> {
      const consumed = Math.floor(clock() / 1000);
      // oidc-provider checks that a code or refresh token is unused some reads before it marks it
      // used: two requests at once may both pass the check. The mark is therefore set only where
      // none is yet, in one step; the request that finds one set is the second use, a replay. One
      // that finds the token gone (`{}`) came later still: that replay has ended the grant already.
      let earlier: Payload | undefined = {};
      if (!this.durable) {
        const hit = memory.get(this.key(id));
        earlier = hit?.payload.consumed ? hit.payload : hit ? undefined : {};
        if (hit && !earlier) hit.payload = { ...hit.payload, consumed };
      } else {
        // A used refresh token (it was rotated) stays, marked consumed, until it would have expired:
        // a replay of it is then known for what it is, and its whole grant ends, the live
        // successor included (a stolen token used by two parties: one of them is an attacker).
        const key = hashId(this.model, id);
        await repos.oauthState.update(rowKey({ model: this.model, id: key }), (row) => {
          const payload = open(row);
          earlier = payload.consumed ? payload : undefined;
          if (!earlier) row.payload = box.seal(SEAL_KIND, key, JSON.stringify({ ...payload, consumed }));
        });
      }
      if (earlier && opts.replayed && GRANT_SOURCES.has(this.model)) await opts.replayed(earlier.grantId);
    }

    async destroy(id: string): Promise<void> {
      if (!this.durable) {
        memory.delete(this.key(id));
        return;
      }
      const key = hashId(this.model, id);
      await repos.oauthState.delete(rowKey({ model: this.model, id: key }));
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      for (const [key, v] of memory) if (key.startsWith(`${this.model}:`) && v.payload.grantId === grantId) memory.delete(key);
      // Access tokens are JWTs, stored nowhere: ending them means remembering that their grant
      // ended, for as long as one of them could still be valid.
      if (this.model === 'AccessToken') return markGrantEnded(repos, grantId, clock());
      if (!this.durable) return;
      const ofGrant = (rows: DurableRecord[]) => rows.filter((r) => r.model === this.model && r.grant_id === grantId);
      if (ofGrant(await repos.oauthState.list()).length === 0) return;
      await repos.transaction(async (r) => {
        for (const row of ofGrant(await r.oauthState.list())) await r.oauthState.delete(rowKey(row));
      });
    }
  };
}
