import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { AppError, forbidden } from '../errors.js';
import type { Clock } from '../http/context.js';
import type { McpInstanceRecord } from '../store/schema.js';
import type { CachedTool, ToolCache, ToolHints } from '../store/records.js';
import type { Repositories } from '../store/repositories.js';
import { credentialSecrets, scrubJsonTextOfAll } from '../upstream/scrub.js';
import type { McpInstancesService } from './instances.js';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { type McpTarget, originBoundFetch, withMcpClient } from './upstream-client.js';
import { signInRequired } from './upstream-oauth/tokens.js';
import type { CommandServers } from './command/servers.js';
import { isCommandInstance } from './instances.js';
import { upstreamUnavailable } from '../upstream/client.js';

export type { CachedTool } from '../store/records.js';


/** A tool's annotations as svc keeps them: the four hints and a bounded title, nothing else the server sent. */
export function toolHints(raw: unknown): ToolHints | undefined {
  if (!raw || typeof raw !== 'object') return undefined;
  const a = raw as Record<string, unknown>;
  const out: ToolHints = {};
  for (const key of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'] as const) if (typeof a[key] === 'boolean') out[key] = a[key];
  if (typeof a.title === 'string') out.title = a.title.slice(0, 200);
  return Object.keys(out).length > 0 ? out : undefined;
}

export const toolAllowed = (instance: McpInstanceRecord, name: string) => instance.allow_tools === null || instance.allow_tools.includes(name);

export const toolNotAllowed = (name: string) =>
  forbidden(`The tool ${JSON.stringify(name.slice(0, 128))} is not allowed on this instance.`, 'tool_not_allowed');

/** Tool discovery and calls through the MCP SDK client, with the instance's allow-list applied first. */
export class McpToolsService {
  constructor(
    private readonly repos: Repositories,
    private readonly instances: McpInstancesService,
    private readonly clock: Clock,
    private readonly timeoutMs: number,
    /** the processes of command servers, when svc runs them */
    private readonly commands?: CommandServers,
  ) {}

  async target(instance: McpInstanceRecord, timeoutMs = this.timeoutMs): Promise<McpTarget> {
    return { url: instance.url, headers: await this.instances.openHeaders(instance), timeoutMs };
  }

  /**
   * `fn` on a client of the instance's server. Where svc holds a sign-in for it, a `401` (the
   * server refused the token before it ran anything) is met with a refresh and one more try; when
   * no new token can be had, the instance needs a sign-in and the call says so.
   */
  private async withInstance<T>(instance: McpInstanceRecord, timeoutMs: number | undefined, fn: (client: Client, timeout: number) => Promise<T>, grantId?: string): Promise<{ result: T; target: McpTarget }> {
    if (isCommandInstance(instance)) {
      // a command server: the grant's kept process (for svc's own look at its tools, one just for that)
      if (!this.commands) throw upstreamUnavailable('svc does not run command servers here.');
      return { result: await this.commands.withClient(instance, grantId, fn, timeoutMs), target: { url: instance.url, headers: {} } };
    }
    const oauth = this.instances.oauth;
    for (let attempt = 0; ; attempt++) {
      const target = await this.target(instance, timeoutMs);
      const statuses: number[] = [];
      if (instance.oauth) target.fetch = originBoundFetch(instance.url, statuses);
      try {
        return { result: await withMcpClient(target, fn), target };
      } catch (err) {
        if (!instance.oauth || !oauth || !statuses.includes(401)) throw err;
        if (attempt > 0) {
          await oauth.needsSignIn(instance, 'token_refused');
          throw signInRequired(instance.name);
        }
        if (!(await oauth.refused(instance, target.headers.Authorization))) throw signInRequired(instance.name);
        instance = (await this.repos.mcpInstances.get(instance.id)) ?? instance;
      }
    }
  }

  private requireEnabled(instance: McpInstanceRecord): void {
    if (!instance.enabled) throw new AppError('mcp_instance_disabled', 'This MCP instance is disabled by its owner.');
  }

  /** The cached tool list (allowed tools only), if the instance was ever refreshed. */
  async cached(instance: McpInstanceRecord): Promise<CachedTool[] | undefined> {
    const cache = await this.repos.mcpTools.get(instance.id);
    return cache?.tools.filter((t) => toolAllowed(instance, t.name));
  }

  /** Fetches and caches the instance's whole tool list (annotations included); answers the allowed tools. */
  async refresh(instance: McpInstanceRecord, timeoutMs?: number, grantId?: string): Promise<CachedTool[]> {
    this.requireEnabled(instance);
    const { result: tools } = await this.withInstance(instance, timeoutMs, async (client, timeout) => {
      const all: Tool[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : undefined, { timeout });
        all.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor && all.length < 10_000);
      return all;
    }, grantId);
    const cache: ToolCache = {
      tools: tools.map((t) => {
        const annotations = toolHints(t.annotations);
        return { name: t.name, ...(t.description ? { description: t.description } : {}), input_schema: t.inputSchema, ...(annotations ? { annotations } : {}) };
      }),
      refreshed_at: new Date(this.clock()).toISOString(),
    };
    await this.repos.mcpTools.set(instance.id, cache);
    return cache.tools.filter((t) => toolAllowed(instance, t.name));
  }

  async execute(instance: McpInstanceRecord, name: string, params: Record<string, unknown>, grantId?: string): Promise<CallToolResult> {
    this.requireEnabled(instance);
    if (!toolAllowed(instance, name)) throw toolNotAllowed(name);
    const { result, target } = await this.withInstance(instance, undefined, async (client, timeout) => (await client.callTool({ name, arguments: params }, undefined, { timeout })) as CallToolResult, grantId);
    // A tool may quote the instance's credentials back (an "echo the request" tool, a verbose error).
    const text = JSON.stringify(result);
    const clean = scrubJsonTextOfAll(text, credentialSecrets(Object.values(target.headers)));
    return clean === text ? result : (JSON.parse(clean) as CallToolResult);
  }
}
