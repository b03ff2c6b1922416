import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import { AppError, forbidden, invalidBody, notFound } from '../errors.js';
import type { Clock } from '../http/context.js';
import type { SecretBox } from '../store/crypto.js';
import { mcpEnvSealId, mcpHeaderSealId, SEAL_KINDS } from '../store/seal-kinds.js';
import type { McpCommandRecord, McpInstanceRecord, UserRecord } from '../store/schema.js';
import type { Repositories } from '../store/repositories.js';
import { mcpProxyPath } from '../oauth/resources.js';
import type { commandEnv, commandProcesses, commandSpecBody, createInstanceBody, instanceHeaders, mcpInstance, updateInstanceBody } from './schemas.js';
import type { UpstreamOAuth } from './upstream-oauth/service.js';

export const HEADER_KIND = SEAL_KINDS.mcpHeader;
export const ENV_KIND = SEAL_KINDS.mcpEnv;

/** What svc runs for a command instance, its env values open: what a process is started with. */
export interface CommandSpec {
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd: string | null;
}

export type CommandProbeResult = { ok: true } | { ok: false; message: string };
export type CommandProcesses = z.infer<typeof commandProcesses>;

/**
 * What the registry asks of whatever runs command servers, when something does: `probe` starts a
 * command once and says whether it answered initialize (`secrets` are what it must scrub from
 * what it says); `status` is an instance's processes on this replica. Both absent: nothing is
 * tried and answers carry no `processes`.
 */
export interface CommandHooks {
  probe?: (spec: CommandSpec, secrets: string[]) => Promise<CommandProbeResult>;
  status?: (instanceId: string) => CommandProcesses | undefined;
}

/** Whether an instance is a command server svc runs (rather than an HTTP one). */
export const isCommandInstance = (m: McpInstanceRecord): m is McpInstanceRecord & { command: McpCommandRecord } => m.command !== undefined;

/**
 * The default URL of a command instance, from its name: lowercased, each run of anything but
 * a-z and 0-9 made one `-`, `-` trimmed from both ends, at most 63 characters; `server` when
 * nothing is left. The same name always gives the same URL.
 */
export function defaultCommandUrl(name: string): string {
  const slug = name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .slice(0, 200)
    .replace(/^-+|-+$/g, '')
    .slice(0, 63)
    .replace(/-+$/, '');
  return `stdio://${slug || 'server'}`;
}

/**
 * The owner's view of an instance, with the proxy URL an MCP host connects to (`base` is svc's),
 * its sign-in's state (never a token) and, for a command instance, its processes.
 */
export const toPublicInstance = (m: McpInstanceRecord, base: string, oauth?: UpstreamOAuth, processes?: CommandProcesses): z.infer<typeof mcpInstance> => ({
  id: m.id,
  name: m.name,
  url: m.url,
  proxy_url: `${base}${mcpProxyPath(m.id)}`,
  enabled: m.enabled,
  allow_tools: m.allow_tools,
  header_names: m.headers.map((h) => h.name),
  auth: oauth?.view(m) ?? (m.headers.length ? { kind: 'headers' } : { kind: 'none' }),
  transport: isCommandInstance(m) ? 'command' : 'http',
  ...(isCommandInstance(m)
    ? {
        command: { command: m.command.command, args: m.command.args, env_names: m.command.env.map((e) => e.name), cwd: m.command.cwd },
        ...(processes ? { processes } : {}),
      }
    : {}),
  created_at: m.created_at,
  updated_at: m.updated_at,
});

type CreateBody = z.infer<typeof createInstanceBody>;
type CommandCreateBody = Extract<CreateBody, { command: unknown }>;
type UpdateBody = z.infer<typeof updateInstanceBody>;

const ADMIN_ONLY = "Only an admin can add, change or remove a command MCP server: svc runs it as svc's own OS user.";

/** The owner's registry of MCP server instances; header and env values are sealed on the way in. */
export class McpInstancesService {
  constructor(
    private readonly repos: Repositories,
    private readonly box: SecretBox,
    private readonly clock: Clock,
    private readonly hooks: CommandHooks = {},
    /** svc's sign-in to servers that use OAuth */
    readonly oauth?: UpstreamOAuth,
  ) {}

  /**
   * Values opened, by what they were sealed as: every call to an instance with headers (and every
   * answer of a command instance, scrubbed of its env values) opened each one again, an AES-GCM
   * open a value a call. A value sealed anew (changed, or a new key) is a new entry; the old one
   * goes with the rest once there are many.
   */
  private readonly opened = new Map<string, string>();

  private open(kind: string, sealId: string, sealed: string): string {
    const key = `${kind}\0${sealId}\0${sealed}`;
    let value = this.opened.get(key);
    if (value === undefined) {
      value = this.box.open(kind, sealId, sealed);
      if (this.opened.size >= 10_000) this.opened.clear();
      this.opened.set(key, value);
    }
    return value;
  }

  private seal(instanceId: string, headers: z.infer<typeof instanceHeaders>) {
    return headers.map((h) => ({ name: h.name, value: this.box.seal(HEADER_KIND, mcpHeaderSealId(instanceId, h.name), h.value) }));
  }

  private sealEnv(instanceId: string, env: z.infer<typeof commandEnv>) {
    return env.map((e) => ({ name: e.name, value: this.box.seal(ENV_KIND, mcpEnvSealId(instanceId, e.name), e.value) }));
  }

  /**
   * The instance's own headers in the clear, for the moment a request goes upstream, with the
   * Authorization of its sign-in where its server uses OAuth (refreshed first when it is about to
   * end; mcp_sign_in_required when there is none).
   */
  async openHeaders(instance: McpInstanceRecord): Promise<Record<string, string>> {
    const headers = Object.fromEntries(instance.headers.map((h) => [h.name, this.open(HEADER_KIND, mcpHeaderSealId(instance.id, h.name), h.value)]));
    const authorization = await this.oauth?.authorization(instance);
    if (!authorization) return headers;
    // the sign-in's token replaces any Authorization header of the owner's
    for (const name of Object.keys(headers)) if (name.toLowerCase() === 'authorization') delete headers[name];
    return { ...headers, Authorization: authorization };
  }

  /** A command instance's env values in the clear, for the moment its process is started; none for an HTTP instance. */
  openEnv(instance: McpInstanceRecord): Record<string, string> {
    const env = instance.command?.env ?? [];
    return Object.fromEntries(env.map((e) => [e.name, this.open(ENV_KIND, mcpEnvSealId(instance.id, e.name), e.value)]));
  }

  /** What a command instance's process is started with, env open; undefined for an HTTP instance. */
  commandSpec(instance: McpInstanceRecord): CommandSpec | undefined {
    if (!isCommandInstance(instance)) return undefined;
    const { command, args, cwd } = instance.command;
    return { command, args: [...args], env: this.openEnv(instance), cwd };
  }

  /** The values a command instance's output and errors must never show: its env values. */
  secretsOf(instance: McpInstanceRecord): string[] {
    return Object.values(this.openEnv(instance)).filter((v) => v.length > 0);
  }

  /** A command instance's processes on this replica, when something runs them. */
  processesOf(instance: McpInstanceRecord): CommandProcesses | undefined {
    return isCommandInstance(instance) ? this.hooks.status?.(instance.id) : undefined;
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

  async create(owner: UserRecord, input: CreateBody): Promise<McpInstanceRecord> {
    const id = randomUUID();
    const now = new Date(this.clock()).toISOString();
    const base = { id, owner_id: owner.id, name: input.name, enabled: input.enabled ?? true, allow_tools: input.allow_tools ?? null, created_at: now, updated_at: now };
    if ('command' in input) {
      const command = await this.checkedCommand(owner, id, input);
      const record: McpInstanceRecord = { ...base, url: input.url ?? defaultCommandUrl(input.name), headers: [], command };
      await this.repos.mcpInstances.put(record);
      return record;
    }
    const oauth = this.oauth && !input.headers?.some((h) => h.name.toLowerCase() === 'authorization') ? await this.oauth.forNewInstance(id, input.url, input.oauth ?? {}) : undefined;
    const record: McpInstanceRecord = { ...base, url: input.url, headers: this.seal(id, input.headers ?? []), ...(oauth ? { oauth } : {}) };
    await this.repos.mcpInstances.put(record);
    return record;
  }

  /** The command form's record, sealed, after the admin check and (unless told not to) one try of the command. */
  private async checkedCommand(actor: UserRecord, id: string, input: CommandCreateBody): Promise<McpCommandRecord> {
    if (actor.role !== 'admin') throw forbidden(ADMIN_ONLY);
    const spec = input.command;
    if (input.try !== false) await this.tryOnce(commandSpecOf(spec));
    return { command: spec.command, args: spec.args ?? [], env: this.sealEnv(id, spec.env ?? []), cwd: spec.cwd ?? null };
  }

  /** Starts the command once, when something can: a command that does not answer initialize is refused. */
  private async tryOnce(spec: CommandSpec): Promise<void> {
    if (!this.hooks.probe) return;
    const secrets = Object.values(spec.env).filter((v) => v.length > 0);
    const result = await this.hooks.probe(spec, secrets);
    if (!result.ok) throw new AppError('mcp_command_failed', scrub(result.message, secrets), { param: 'command' });
  }

  async update(owner: UserRecord, id: string, input: UpdateBody): Promise<McpInstanceRecord> {
    const current = await this.getOwned(owner, id);
    const command = await this.changedCommand(owner, current, input);
    const sealed = input.headers ? this.seal(id, input.headers) : undefined;
    const updated = await this.repos.mcpInstances.update(id, (m) => {
      if (m.owner_id !== owner.id) throw notFound(`No MCP instance ${id} of yours.`);
      if (input.name !== undefined) m.name = input.name;
      if (input.enabled !== undefined) m.enabled = input.enabled;
      if (input.allow_tools !== undefined) m.allow_tools = input.allow_tools;
      if (sealed) m.headers = sealed;
      if (input.url !== undefined) m.url = input.url;
      if (command) m.command = command;
      m.updated_at = new Date(this.clock()).toISOString();
    });
    if (!updated) throw notFound(`No MCP instance ${id} of yours.`);
    return updated;
  }

  /**
   * What a change does to an instance's command: refused for anyone but an admin when the
   * instance is a command one (any change of it), and for fields of the other form; the new
   * command (tried once) when `command` is given, undefined when it stays.
   */
  private async changedCommand(actor: UserRecord, current: McpInstanceRecord, input: UpdateBody): Promise<McpCommandRecord | undefined> {
    if (!isCommandInstance(current)) {
      if (input.command !== undefined) throw invalidBody('An HTTP instance has no command; add a command instance instead.', 'command');
      if (input.url !== undefined) throw invalidBody("An HTTP instance's URL is where svc reaches it: add an instance for another URL instead.", 'url');
      return undefined;
    }
    if (actor.role !== 'admin') throw forbidden(ADMIN_ONLY);
    if (input.headers !== undefined) throw invalidBody('A command instance has no headers; its variables go in command.env.', 'headers');
    if (input.command === undefined) return undefined;
    const patch = input.command;
    const was = current.command;
    const env = patch.env ? this.sealEnv(current.id, patch.env) : was.env;
    const next: McpCommandRecord = { command: patch.command ?? was.command, args: patch.args ?? was.args, env, cwd: patch.cwd === undefined ? was.cwd : patch.cwd };
    if (input.try !== false) {
      const openEnv = patch.env ? Object.fromEntries(patch.env.map((e) => [e.name, e.value])) : this.openEnv(current);
      await this.tryOnce({ command: next.command, args: [...next.args], env: openEnv, cwd: next.cwd });
    }
    return next;
  }

  async remove(owner: UserRecord, id: string): Promise<void> {
    const current = await this.getOwned(owner, id);
    if (isCommandInstance(current) && owner.role !== 'admin') throw forbidden(ADMIN_ONLY);
    // a removed instance's sign-in is revoked at its server first, as a sign-out's is
    if (current.oauth && this.oauth) await this.oauth.logout(current);
    await this.repos.transaction(async (repos) => {
      if ((await repos.mcpInstances.get(id))?.owner_id !== owner.id) return;
      await repos.mcpInstances.delete(id);
      // its tool list goes with it
      await repos.mcpTools.delete(id);
    });
  }
}

/** The body's command as a process is started with it. */
const commandSpecOf = (spec: z.infer<typeof commandSpecBody>): CommandSpec => ({
  command: spec.command,
  args: spec.args ?? [],
  env: Object.fromEntries((spec.env ?? []).map((e) => [e.name, e.value])),
  cwd: spec.cwd ?? null,
});

/** `text` with each of `secrets` put out of sight. */
export function scrub(text: string, secrets: string[]): string {
  let out = text;
  for (const s of [...secrets].sort((a, b) => b.length - a.length)) if (s.length > 0) out = out.split(s).join('***');
  return out;
}
