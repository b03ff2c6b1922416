import { z } from 'zod';
import { notFound } from '../errors.js';
import type { Clock } from '../http/context.js';
import { modelName, providerName } from '../providers/schemas.js';
import { type ProviderRecord, providersOf } from '../providers/service.js';
import type { Db } from '../store/schema.js';
import type { Store } from '../store/store.js';

export interface AliasRecord {
  id: string;
  provider: string;
  model: string;
  /** request fields applied unless the app sets them */
  defaults: Record<string, unknown>;
  created_at: string;
}

export const aliasesOf = (db: Db): AliasRecord[] => db.model_aliases as AliasRecord[];

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
  .object({ id: z.string(), provider: z.string(), model: z.string(), defaults: z.record(z.string(), z.unknown()), created_at: z.string() })
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

/**
 * Public model ids: aliases first, then every provider model by its own name (the first provider
 * that offers it wins) and, always, as `<provider>/<model>`. The index is rebuilt only when the
 * store changes, so resolving a model on the hot path is one Map lookup.
 */
export class ModelCatalog {
  private index: { source: unknown; value: Index } | null = null;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  private build(): Index {
    const db = this.store.data as Db;
    const byId = new Map<string, ResolvedModel>();
    const listed: Index['listed'] = [];
    const described = new Map<string, PublicModel>();
    const providers = providersOf(db);
    const byName = new Map(providers.map((p) => [p.name, p]));
    for (const a of aliasesOf(db)) {
      const p = byName.get(a.provider);
      if (!p || byId.has(a.id)) continue;
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
    const source = this.store.data;
    if (this.index?.source !== source) this.index = { source, value: this.build() };
    return this.index.value;
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
    return this.store.read((db) => aliasesOf(db));
  }

  async putAlias(id: string, input: z.output<typeof putAliasBody>): Promise<AliasRecord> {
    return this.store.update((db) => {
      if (!providersOf(db).some((p) => p.name === input.provider)) throw notFound(`No provider named ${input.provider}.`);
      const rows = aliasesOf(db);
      const existing = rows.find((a) => a.id === id);
      const record: AliasRecord = {
        id,
        provider: input.provider,
        model: input.model,
        defaults: input.defaults ?? {},
        created_at: existing?.created_at ?? new Date(this.clock()).toISOString(),
      };
      db.model_aliases = [...rows.filter((a) => a.id !== id), record];
      return record;
    });
  }

  async removeAlias(id: string): Promise<void> {
    if (!this.listAliases().some((a) => a.id === id)) throw notFound(`No alias ${id}.`);
    await this.store.update((db) => {
      db.model_aliases = aliasesOf(db).filter((a) => a.id !== id);
    });
  }
}
