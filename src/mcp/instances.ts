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
import type { UpstreamOAuth } from './upstream-oauth/service.js';

export const HEADER_KIND = SEAL_KINDS.mcpHeader;

/** The owner's view of an instance, with the proxy URL an MCP host connects to (`base` is svc's), and its sign-in's state (never a token). */
export const toPublicInstance = (m: McpInstanceRecord, base: string, oauth?: UpstreamOAuth): z.infer<typeof mcpInstance> => ({
  id: m.id,
  name: m.name,
  url: m.url,
  proxy_url: `${base}${mcpProxyPath(m.id)}`,
  enabled: m.enabled,
  allow_tools: m.allow_tools,
  header_names: m.headers.map((h) => h.name),
  auth: oauth?.view(m) ?? (m.headers.length ? { kind: 'headers' } : { kind: 'none' }),
  created_at: m.created_at,
  updated_at: m.updated_at,
});

/** The owner's registry of MCP server instances; header values are sealed on the way in. */
export class McpInstancesService {
  constructor(
    private readonly repos: Repositories,
    private readonly box: SecretBox,
    private readonly clock: Clock,
    /** svc's sign-in to servers that use OAuth */
    readonly oauth?: UpstreamOAuth,
  ) {}

  private seal(instanceId: string, headers: z.infer<typeof instanceHeaders>) {
    return headers.map((h) => ({ name: h.name, value: this.box.seal(HEADER_KIND, mcpHeaderSealId(instanceId, h.name), h.value) }));
  }

  /**
   * The instance's own headers in the clear, for the moment a request goes upstream, with the
   * Authorization of its sign-in where its server uses OAuth (refreshed first when it is about to
   * end; mcp_sign_in_required when there is none).
   */
  async openHeaders(instance: McpInstanceRecord): Promise<Record<string, string>> {
    const headers = Object.fromEntries(instance.headers.map((h) => [h.name, this.box.open(HEADER_KIND, mcpHeaderSealId(instance.id, h.name), h.value)]));
    const authorization = await this.oauth?.authorization(instance);
    if (!authorization) return headers;
    // the sign-in's token replaces any Authorization header of the owner's
    for (const name of Object.keys(headers)) if (name.toLowerCase() === 'authorization') delete headers[name];
    return { ...headers, Authorization: authorization };
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
    const oauth = this.oauth && !input.headers?.some((h) => h.name.toLowerCase() === 'authorization') ? await this.oauth.forNewInstance(id, input.url, input.oauth ?? {}) : undefined;
    const now = new Date(this.clock()).toISOString();
    const record: McpInstanceRecord = {
      id,
      owner_id: owner.id,
      name: input.name,
      url: input.url,
      enabled: input.enabled ?? true,
      headers: this.seal(id, input.headers ?? []),
      allow_tools: input.allow_tools ?? null,
      ...(oauth ? { oauth } : {}),
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
    const found = await this.getOwned(owner, id);
    // a removed instance's sign-in is revoked at its server first, as a sign-out's is
    if (found.oauth && this.oauth) await this.oauth.logout(found);
    await this.repos.transaction(async (repos) => {
      if ((await repos.mcpInstances.get(id))?.owner_id !== owner.id) return;
      await repos.mcpInstances.delete(id);
      // its tool list goes with it
      await repos.mcpTools.delete(id);
    });
  }
}
