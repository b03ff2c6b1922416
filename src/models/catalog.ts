import { z } from 'zod';
import { conflict, forbidden, notFound } from '../errors.js';
import type { Clock } from '../http/context.js';
import { jsonValue } from '../http/validate.js';
import { modelName, providerName } from '../providers/schemas.js';
import type { AliasRecord, ProviderRecord } from '../store/records.js';
import type { RepositorySet, Repositories } from '../store/repositories.js';
import type { UserRecord } from '../store/schema.js';

export type { AliasRecord } from '../store/records.js';

/**
 * Who is changing aliases: the user behind the session or the app token, and whether it is an
 * admin's own session (which may manage every alias and shadow provider models on purpose).
 */
export interface AliasActor {
  userId: string;
  adminSession: boolean;
}

export const aliasId = z.string().min(1).max(200).regex(/^[A-Za-z0-9][A-Za-z0-9._:-]*$/, 'an alias is letters, digits and . _ : - (no slash: provider/model ids are reserved)');
export const putAliasBody = z.strictObject({
  provider: providerName,
  model: modelName,
  defaults: z
    .record(z.string().max(100), jsonValue)
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
function providerModelIds(providers: ProviderRecord[]): Set<string> {
  const ids = new Set<string>();
  for (const p of providers) for (const m of [...p.models, ...p.discovered_models]) ids.add(m);
  return ids;
}

function buildIndex(providers: ProviderRecord[], aliases: AliasRecord[], users: UserRecord[]): Index {
  const byId = new Map<string, ResolvedModel>();
  const listed: Index['listed'] = [];
  const described = new Map<string, PublicModel>();
  const byName = new Map(providers.map((p) => [p.name, p]));
  const served = providerModelIds(providers);
  const admins = new Set(users.filter((u) => u.role === 'admin').map((u) => u.id));
  for (const a of aliases) {
    const p = byName.get(a.provider);
    if (!p || byId.has(a.id)) continue;
    if (served.has(a.id) && !(a.owner_id && admins.has(a.owner_id))) continue;
    byId.set(a.id, { provider: p, upstreamModel: a.model, defaults: a.defaults });
    const entry = { id: a.id, owned_by: `svc:${p.name}`, created: Math.floor(Date.parse(a.created_at) / 1000) };
    listed.push(entry);
    described.set(a.id, entry);
  }
  for (const p of providers) {
    const added = Math.floor(Date.parse(p.created_at) / 1000);
    for (const m of new Set([...p.models, ...p.discovered_models])) {
      // the provider's own time for the model when it gave one, else when the provider was added
      const created = p.discovered_created?.[m] ?? added;
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

/**
 * Public model ids: aliases first, then every provider model by its own name (the first provider
 * that offers it wins) and, always, as `<provider>/<model>`. Only an admin's alias may take over
 * a model id a provider serves: any other alias with such an id (a provider found the model
 * after the alias was made) yields to the provider, so no user can reroute another's model id.
 * The index is rebuilt only after providers, aliases or users changed, so resolving a model on
 * the hot path is one Map lookup.
 */
export class ModelCatalog {
  private index: Promise<Index> | null = null;

  constructor(
    private readonly repos: Repositories,
    private readonly clock: Clock,
  ) {
    const stale = () => {
      this.index = null;
    };
    repos.providers.onChange(stale);
    repos.modelAliases.onChange(stale);
    repos.users.onChange(stale);
  }

  private async build(): Promise<Index> {
    const [providers, aliases, users] = await Promise.all([this.repos.providers.list(), this.repos.modelAliases.list(), this.repos.users.list()]);
    return buildIndex(providers, aliases, users);
  }

  private current(): Promise<Index> {
    // On every proxied call: the index already built, unless something changed since.
    if (!this.index) {
      const building = (this.index = this.build());
      building.catch(() => {
        if (this.index === building) this.index = null;
      });
    }
    return this.index;
  }

  async resolve(id: string): Promise<ResolvedModel | undefined> {
    return (await this.current()).byId.get(id);
  }

  /** The OpenAI model object of any id that resolves (GET /v1/models/{id}). */
  async describe(id: string): Promise<PublicModel | undefined> {
    return (await this.current()).described.get(id);
  }

  async listPublic(): Promise<Index['listed']> {
    return (await this.current()).listed;
  }

  listAliases(): Promise<AliasRecord[]> {
    return this.repos.modelAliases.list();
  }

  /** The aliases as the API shows them to `actor`. */
  async listFor(actor: AliasActor) {
    return (await this.listAliases()).map((a) => this.view(a, actor));
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
    return this.repos.transaction(async (repos: RepositorySet) => {
      if (!(await repos.providers.get(input.provider))) throw notFound(`No provider named ${input.provider}.`);
      const existing = await repos.modelAliases.get(id);
      if (existing && !this.mayManage(existing, actor)) throw conflict('model_id_taken', `The model id ${id} is another user's alias; pick another id.`);
      if (!actor.adminSession && providerModelIds(await repos.providers.list()).has(id)) throw conflict('model_id_taken', `A provider already serves the model id ${id}; an alias may not shadow it.`);
      const record: AliasRecord = {
        id,
        provider: input.provider,
        model: input.model,
        defaults: input.defaults ?? {},
        created_at: existing?.created_at ?? new Date(this.clock()).toISOString(),
        owner_id: existing ? (existing.owner_id ?? null) : actor.userId,
      };
      return repos.modelAliases.put(record);
    });
  }

  async removeAlias(id: string, actor: AliasActor): Promise<void> {
    await this.repos.transaction(async (repos) => {
      const existing = await repos.modelAliases.get(id);
      if (!existing) throw notFound(`No alias ${id}.`);
      if (!this.mayManage(existing, actor)) throw forbidden(`The alias ${id} belongs to another user.`, 'alias_not_owned');
      await repos.modelAliases.delete(id);
    });
  }
}
