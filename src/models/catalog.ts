import { z } from 'zod';
import { conflict, forbidden, notFound } from '../errors.js';
import type { Clock } from '../http/context.js';
import { modelName, providerName } from '../providers/schemas.js';
import { type ProviderRecord, providersOf } from '../providers/service.js';
import type { Store, StoreReader } from '../store/store.js';

export interface AliasRecord {
  id: string;
  provider: string;
  model: string;
  /** request fields applied unless the app sets them */
  defaults: Record<string, unknown>;
  created_at: string;
  /** the user who created it (through a session or an app token); absent on aliases made before owners were kept */
  owner_id?: string | null;
}

/**
 * Who is changing aliases: the user behind the session or the app token, and whether it is an
 * admin's own session (which may manage every alias and shadow provider models on purpose).
 */
export interface AliasActor {
  userId: string;
  adminSession: boolean;
}

export const aliasesOf = (db: StoreReader): AliasRecord[] => db.all<'model_aliases', AliasRecord>('model_aliases');

export const aliasId = z.string().min(1).max(200).regex(/^[A-Za-z0-9][A-Za-z0-9._:-]*$/, 'an alias is letters, digits and . _ : - (no slash: provider/model ids are reserved)');
export const putAliasBody = z.strictObject({
  provider: providerName,
  model: modelName,
  defaults: z
    .record(z.string().max(100), z.unknown())
    .refine((d) => !('model' in d) && !('messages' in d) && !('input' in d) && !('stream' in d), 'defaults may not set model, messages, input or stream')
    .optional(),
});
export const alias = z
  .object({
    id: z.string(),
    provider: z.string(),
    model: z.string(),
    defaults: z.record(z.string(), z.unknown()),
    created_at: z.string(),
    mine: z.boolean().describe("Whether the caller's user created it (only then may the caller change or remove it)"),
  })
  .meta({ id: 'ModelAlias' });

export interface ResolvedModel {
  provider: ProviderRecord;
  upstreamModel: string;
  defaults: Record<string, unknown> | null;
}

interface PublicModel {
  id: string;
  owned_by: string;
  created: number;
}

interface Index {
  byId: Map<string, ResolvedModel>;
  listed: PublicModel[];
  /** every id that resolves, listed or `<provider>/<model>` */
  described: Map<string, PublicModel>;
}

/** Bare model ids that providers serve (their listed and discovered models). */
function providerModelIds(db: StoreReader): Set<string> {
  const ids = new Set<string>();
  for (const p of providersOf(db)) for (const m of [...p.models, ...p.discovered_models]) ids.add(m);
  return ids;
}

/**
 * Public model ids: aliases first, then every provider model by its own name (the first provider
 * that offers it wins) and, always, as `<provider>/<model>`. Only an admin's alias may take over
 * a model id a provider serves: any other alias with such an id (a provider found the model
 * after the alias was made) yields to the provider, so no user can reroute another's model id.
 * The index is rebuilt only when providers, aliases or users change (their versions), so
 * resolving a model on the hot path is one Map lookup.
 */
export class ModelCatalog {
  private index: { versions: [number, number, number]; value: Index } | null = null;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  private build(): Index {
    const db = this.store;
    const byId = new Map<string, ResolvedModel>();
    const listed: Index['listed'] = [];
    const described = new Map<string, PublicModel>();
    const providers = providersOf(db);
    const byName = new Map(providers.map((p) => [p.name, p]));
    const served = providerModelIds(db);
    const admins = new Set(db.all('users').filter((u) => u.role === 'admin').map((u) => u.id));
    for (const a of aliasesOf(db)) {
      const p = byName.get(a.provider);
      if (!p || byId.has(a.id)) continue;
      if (served.has(a.id) && !(a.owner_id && admins.has(a.owner_id))) continue;
      byId.set(a.id, { provider: p, upstreamModel: a.model, defaults: a.defaults });
      const entry = { id: a.id, owned_by: `svc:${p.name}`, created: Math.floor(Date.parse(a.created_at) / 1000) };
      listed.push(entry);
      described.set(a.id, entry);
    }
    for (const p of providers) {
      const created = Math.floor(Date.parse(p.created_at) / 1000);
      for (const m of new Set([...p.models, ...p.discovered_models])) {
        if (!byId.has(m)) {
          byId.set(m, { provider: p, upstreamModel: m, defaults: null });
          const entry = { id: m, owned_by: p.name, created };
          listed.push(entry);
          described.set(m, entry);
        }
        const qualified = `${p.name}/${m}`;
        if (!byId.has(qualified)) {
          byId.set(qualified, { provider: p, upstreamModel: m, defaults: null });
          described.set(qualified, { id: qualified, owned_by: p.name, created });
        }
      }
    }
    return { byId, listed, described };
  }

  private current(): Index {
    // On every proxied call: three numbers compared, nothing built.
    const p = this.store.version('providers');
    const a = this.store.version('model_aliases');
    const u = this.store.version('users');
    let index = this.index;
    if (!index || index.versions[0] !== p || index.versions[1] !== a || index.versions[2] !== u) index = this.index = { versions: [p, a, u], value: this.build() };
    return index.value;
  }

  resolve(id: string): ResolvedModel | undefined {
    return this.current().byId.get(id);
  }

  /** The OpenAI model object of any id that resolves (GET /v1/models/{id}). */
  describe(id: string): PublicModel | undefined {
    return this.current().described.get(id);
  }

  listPublic(): Index['listed'] {
    return this.current().listed;
  }

  listAliases(): AliasRecord[] {
    return aliasesOf(this.store);
  }

  /** The aliases as the API shows them to `actor`. */
  listFor(actor: AliasActor) {
    return this.listAliases().map((a) => this.view(a, actor));
  }

  view(a: AliasRecord, actor: AliasActor) {
    return { id: a.id, provider: a.provider, model: a.model, defaults: a.defaults, created_at: a.created_at, mine: Boolean(a.owner_id) && a.owner_id === actor.userId };
  }

  private mayManage(a: AliasRecord, actor: AliasActor): boolean {
    return actor.adminSession || (Boolean(a.owner_id) && a.owner_id === actor.userId);
  }

  /**
   * Creates or replaces an alias. An alias belongs to the user who made it: another user (or
   * their apps) cannot replace it, and no one but an admin's session may take a model id that a
   * provider already serves (409 model_id_taken either way).
   */
  async putAlias(id: string, input: z.output<typeof putAliasBody>, actor: AliasActor): Promise<AliasRecord> {
    return this.store.update((db) => {
      if (!db.get('providers', input.provider)) throw notFound(`No provider named ${input.provider}.`);
      const existing = db.get<'model_aliases', AliasRecord>('model_aliases', id);
      if (existing && !this.mayManage(existing, actor)) throw conflict('model_id_taken', `The model id ${id} is another user's alias; pick another id.`);
      if (!actor.adminSession && providerModelIds(db).has(id)) throw conflict('model_id_taken', `A provider already serves the model id ${id}; an alias may not shadow it.`);
      const record: AliasRecord = {
        id,
        provider: input.provider,
        model: input.model,
        defaults: input.defaults ?? {},
        created_at: existing?.created_at ?? new Date(this.clock()).toISOString(),
        owner_id: existing ? (existing.owner_id ?? null) : actor.userId,
      };
      return db.put('model_aliases', record);
    });
  }

  async removeAlias(id: string, actor: AliasActor): Promise<void> {
    await this.store.update((db) => {
      const existing = db.get<'model_aliases', AliasRecord>('model_aliases', id);
      if (!existing) throw notFound(`No alias ${id}.`);
      if (!this.mayManage(existing, actor)) throw forbidden(`The alias ${id} belongs to another user.`, 'alias_not_owned');
      db.delete('model_aliases', id);
    });
  }
}
