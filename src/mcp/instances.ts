import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import { notFound } from '../errors.js';
import type { Clock } from '../http/context.js';
import type { SecretBox } from '../store/crypto.js';
import { mcpHeaderSealId, SEAL_KINDS } from '../store/seal-kinds.js';
import type { McpInstanceRecord, UserRecord } from '../store/schema.js';
import type { Repositories } from '../store/repositories.js';
import { mcpProxyPath } from '../oauth/resources.js';
import type { createInstanceBody, instanceHeaders, mcpInstance, updateInstanceBody } from './schemas.js';

export const HEADER_KIND = SEAL_KINDS.mcpHeader;

/** The owner's view of an instance, with the proxy URL an MCP host connects to (`base` is svc's). */
export const toPublicInstance = (m: McpInstanceRecord, base: string): z.infer<typeof mcpInstance> => ({
  id: m.id,
  name: m.name,
  url: m.url,
  proxy_url: `${base}${mcpProxyPath(m.id)}`,
  enabled: m.enabled,
  allow_tools: m.allow_tools,
  header_names: m.headers.map((h) => h.name),
  created_at: m.created_at,
  updated_at: m.updated_at,
});

/** The owner's registry of MCP server instances; header values are sealed on the way in. */
export class McpInstancesService {
  constructor(
    private readonly repos: Repositories,
    private readonly box: SecretBox,
    private readonly clock: Clock,
  ) {}

  private seal(instanceId: string, headers: z.infer<typeof instanceHeaders>) {
    return headers.map((h) => ({ name: h.name, value: this.box.seal(HEADER_KIND, mcpHeaderSealId(instanceId, h.name), h.value) }));
  }

  /** The instance's own headers in the clear, for the moment a request goes upstream. */
  openHeaders(instance: McpInstanceRecord): Record<string, string> {
    return Object.fromEntries(instance.headers.map((h) => [h.name, this.box.open(HEADER_KIND, mcpHeaderSealId(instance.id, h.name), h.value)]));
  }

  find(id: string): Promise<McpInstanceRecord | undefined> {
    return this.repos.mcpInstances.get(id);
  }

  async listOwned(owner: UserRecord): Promise<McpInstanceRecord[]> {
    return (await this.repos.mcpInstances.list()).filter((m) => m.owner_id === owner.id);
  }

  async getOwned(owner: UserRecord, id: string): Promise<McpInstanceRecord> {
    const stored = await this.repos.mcpInstances.get(id);
    const found = stored?.owner_id === owner.id ? stored : undefined;
    if (!found) throw notFound(`No MCP instance ${id} of yours.`);
    return found;
  }

  async create(owner: UserRecord, input: z.infer<typeof createInstanceBody>): Promise<McpInstanceRecord> {
    const id = randomUUID();
    const now = new Date(this.clock()).toISOString();
    const record: McpInstanceRecord = {
      id,
      owner_id: owner.id,
      name: input.name,
      url: input.url,
      enabled: input.enabled ?? true,
      headers: this.seal(id, input.headers ?? []),
      allow_tools: input.allow_tools ?? null,
      created_at: now,
      updated_at: now,
    };
    await this.repos.mcpInstances.put(record);
    return record;
  }

  async update(owner: UserRecord, id: string, input: z.infer<typeof updateInstanceBody>): Promise<McpInstanceRecord> {
    await this.getOwned(owner, id);
    const sealed = input.headers ? this.seal(id, input.headers) : undefined;
    const updated = await this.repos.mcpInstances.update(id, (m) => {
      if (m.owner_id !== owner.id) throw notFound(`No MCP instance ${id} of yours.`);
      if (input.name !== undefined) m.name = input.name;
      if (input.enabled !== undefined) m.enabled = input.enabled;
      if (input.allow_tools !== undefined) m.allow_tools = input.allow_tools;
      if (sealed) m.headers = sealed;
      m.updated_at = new Date(this.clock()).toISOString();
    });
    if (!updated) throw notFound(`No MCP instance ${id} of yours.`);
    return updated;
  }

  async remove(owner: UserRecord, id: string): Promise<void> {
    await this.getOwned(owner, id);
    await this.repos.transaction(async (repos) => {
      if ((await repos.mcpInstances.get(id))?.owner_id !== owner.id) return;
      await repos.mcpInstances.delete(id);
      // its tool list goes with it
      await repos.mcpTools.delete(id);
    });
  }
}
