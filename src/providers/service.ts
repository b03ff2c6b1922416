import type { z } from 'zod';
import { conflict, forbidden, notFound } from '../errors.js';
import type { Clock } from '../http/context.js';
import type { Logger } from '../log.js';
import { atLeast } from '../auth/roles.js';
import { callUpstream, readBody, upstreamUrl } from '../upstream/client.js';
import type { SecretBox } from '../store/crypto.js';
import { SEAL_KINDS } from '../store/seal-kinds.js';
import type { UserRecord } from '../store/schema.js';
import type { ProviderRecord } from '../store/records.js';
import type { Repositories } from '../store/repositories.js';
import type { createProviderBody, provider } from './schemas.js';

const KEY_KIND = SEAL_KINDS.providerApiKey;
export const DEFAULT_TIMEOUT_MS = 120_000;
/** The Messages API version sent to a provider that serves it, when the app names none. */
export const ANTHROPIC_VERSION = '2023-06-01';

export type { ProviderRecord } from '../store/records.js';

export const toPublicProvider = (p: ProviderRecord): z.infer<typeof provider> => ({
  name: p.name,
  base_url: p.base_url,
  has_api_key: p.api_key !== null,
  models: p.models,
  discovered_models: p.discovered_models,
  discovered_at: p.discovered_at,
  discovery_error: p.discovery_error,
  timeout_ms: p.timeout_ms,
  created_at: p.created_at,
  api: p.api ?? 'chat',
  auth_header: p.auth_header ?? 'x-api-key',
});

/** Upstream model servers. Their keys are sealed at rest and opened only to call them. */
export class ProvidersService {
  private readonly openedKeys = new Map<string, { sealed: string; key: string }>();

  constructor(
    private readonly repos: Repositories,
    private readonly box: SecretBox,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  requirePowerUser(actor: UserRecord): void {
    if (!atLeast(actor.role, 'power_user')) throw forbidden('Providers are managed by power users and above.');
  }

  list(): Promise<ProviderRecord[]> {
    return this.repos.providers.list();
  }

  find(name: string): Promise<ProviderRecord | undefined> {
    return this.repos.providers.get(name);
  }

  async get(name: string): Promise<ProviderRecord> {
    const found = await this.find(name);
    if (!found) throw notFound(`No provider named ${name}.`);
    return found;
  }

  /** The provider's key in the clear, for one upstream call (memoised per sealed value). */
  apiKey(p: ProviderRecord): string | null {
    if (!p.api_key) return null;
    const cached = this.openedKeys.get(p.name);
    if (cached?.sealed === p.api_key) return cached.key;
    const key = this.box.open(KEY_KIND, p.name, p.api_key);
    this.openedKeys.set(p.name, { sealed: p.api_key, key });
    return key;
  }

  upstreamHeaders(p: ProviderRecord): Record<string, string> {
    const key = this.apiKey(p);
    return key ? { Authorization: `Bearer ${key}` } : {};
  }

  /** The key as a provider serving the Messages API takes it: `x-api-key`, unless it asked for Authorization. */
  messagesHeaders(p: ProviderRecord, version = ANTHROPIC_VERSION): Record<string, string> {
    const versioned = { 'anthropic-version': version };
    if ((p.auth_header ?? 'x-api-key') === 'authorization') return { ...versioned, ...this.upstreamHeaders(p) };
    const key = this.apiKey(p);
    return key ? { ...versioned, 'x-api-key': key } : versioned;
  }

  async create(actor: UserRecord, input: z.output<typeof createProviderBody>): Promise<ProviderRecord> {
    this.requirePowerUser(actor);
    const record: ProviderRecord = {
      name: input.name,
      base_url: input.base_url.replace(/\/+$/, ''),
      api_key: input.api_key ? this.box.seal(KEY_KIND, input.name, input.api_key) : null,
      models: [...new Set(input.models ?? [])],
      discovered_models: [],
      discovered_at: null,
      discovery_error: null,
      timeout_ms: input.timeout_ms ?? DEFAULT_TIMEOUT_MS,
      created_at: new Date(this.clock()).toISOString(),
      ...(input.api && input.api !== 'chat' ? { api: input.api } : {}),
      ...(input.auth_header && input.auth_header !== 'x-api-key' ? { auth_header: input.auth_header } : {}),
    };
    await this.repos.transaction(async (repos) => {
      if (await repos.providers.get(input.name)) throw conflict('provider_exists', `A provider named ${input.name} exists already.`);
      await repos.providers.put(record);
    });
    return (await this.refresh(actor, input.name).catch(() => undefined)) ?? record;
  }

  /** Asks the provider's GET /models; a failure is recorded, not thrown, so an offline server can be added. */
  async refresh(actor: UserRecord, name: string): Promise<ProviderRecord> {
    this.requirePowerUser(actor);
    const p = await this.get(name);
    let discovered: string[] | null = null;
    const created: Record<string, number> = {};
    let error: string | null = null;
    try {
      const res = await callUpstream({ url: upstreamUrl(p.base_url, '/models'), method: 'GET', headers: { Accept: 'application/json', ...(p.api === 'messages' ? this.messagesHeaders(p) : this.upstreamHeaders(p)) }, timeoutMs: Math.min(p.timeout_ms, 15_000) });
      const body = await readBody(res.body, 8 * 1024 * 1024);
      if (res.statusCode !== 200) throw new Error(`GET /models answered ${res.statusCode}`);
      const parsed = JSON.parse(body.toString('utf8')) as { data?: { id?: unknown; created?: unknown }[] };
      const models = (parsed.data ?? []).filter((m): m is { id: string; created?: unknown } => typeof m?.id === 'string' && m.id.length > 0 && m.id.length <= 200);
      discovered = models.map((m) => m.id);
      // what the provider says of when a model was made, for /v1/models (a whole number of seconds)
      for (const m of models) if (Number.isSafeInteger(m.created) && (m.created as number) >= 0) created[m.id] = m.created as number;
    } catch (err) {
      error = err instanceof Error && /answered/.test(err.message) ? err.message : 'the provider could not be reached or did not answer a model list';
      this.logger.warn({ provider: name }, 'model discovery failed');
    }
    const updated = await this.repos.providers.update(name, (rec) => {
      if (discovered) {
        rec.discovered_models = [...new Set(discovered)];
        rec.discovered_created = created;
        rec.discovered_at = new Date(this.clock()).toISOString();
      }
      rec.discovery_error = error;
    });
    if (!updated) throw notFound(`No provider named ${name}.`);
    return updated;
  }

  async remove(actor: UserRecord, name: string): Promise<void> {
    this.requirePowerUser(actor);
    await this.get(name);
    await this.repos.transaction(async (repos) => {
      await repos.providers.delete(name);
      for (const a of await repos.modelAliases.list()) if (a.provider === name) await repos.modelAliases.delete(a.id);
    });
    this.openedKeys.delete(name);
  }
}
