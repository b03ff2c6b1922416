import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { CommandProbeResult, CommandProcesses, CommandSpec } from '../instances.js';
import type { McpInstanceRecord } from '../../store/schema.js';
import type { Repositories } from '../../store/repositories.js';
import type { UpstreamResponse } from '../../upstream/client.js';
import { VERSION } from '../../version.js';
import type { McpTransport, TransportRequest } from '../transport/types.js';
import { mcpError } from '../upstream-client.js';
import { ChildBridge } from './bridge.js';
import { discoverResult, isMethodNotFound, isModernRequest, isModernVersion, MODERN_VERSION, modernAnswer } from './modern.js';
import type { CommandChild, CommandSupervisor } from './supervisor.js';

/** What the registry needs of the instances' service: what to run, and what to scrub. */
export interface CommandSource {
  commandSpec(instance: McpInstanceRecord): CommandSpec | undefined;
  secretsOf(instance: McpInstanceRecord): string[];
}

interface Session {
  instanceId: string;
  grantId: string;
  bridge: ChildBridge;
  transport: WebStandardStreamableHTTPServerTransport;
}

/** How long `svc mcp add`'s one try of a command may take to answer initialize. */
const PROBE_MS = 10_000;

/**
 * The command servers' processes by who uses them (docs/mcp.md, Command servers: processes):
 * an app session's own child (2025-11-25 era, the session svc gives out), a grant's child for its
 * stateless requests (2026-07-28 era), and a grant's child for the REST endpoints. Each child's
 * supervisor key starts with the grant's id, so a revoke ends them all.
 */
export class CommandServers {
  private readonly sessions = new Map<string, Session>();
  private readonly stateless = new Map<string, Promise<ChildBridge>>();
  private readonly clients = new Map<string, Promise<Client>>();
  /** each instance's command and state as last seen, so a change of them ends its processes */
  private readonly seen = new Map<string, string>();

  constructor(
    private readonly supervisor: CommandSupervisor,
    private readonly source: CommandSource,
    private readonly timeoutMs: number,
  ) {}

  /** `svc mcp add`'s one try of a command. */
  probe(spec: CommandSpec, secrets: string[]): Promise<CommandProbeResult> {
    return this.supervisor.tryOnce(spec, secrets, Math.min(PROBE_MS, this.timeoutMs));
  }

  /** An instance's processes, as `svc mcp list` and the API show them. */
  status(instanceId: string): CommandProcesses {
    return this.supervisor.status(instanceId);
  }

  totalLive(): number {
    return this.supervisor.totalLive();
  }

  /**
   * Ends a grant's children once it is no longer approved (an API key's revoke included: its
   * grant is revoked with it), and those of an instance it no longer names; an instance's once it
   * is disabled, removed or its command changed.
   */
  watch(repos: Repositories): void {
    repos.accessRequests.onChange((id, r) => {
      if (!r || r.status !== 'approved') return void this.supervisor.stopKeys(`${id}:`);
      const named = new Set(r.approved?.mcp_servers.flatMap((s) => s.instance_ids) ?? []);
      void this.supervisor.stopKeys(`${id}:`, (instanceId) => !named.has(instanceId));
    });
    repos.mcpInstances.onChange((id, m) => {
      const was = this.seen.get(id);
      if (!m || !m.enabled || (was !== undefined && was !== signature(m))) void this.supervisor.stopInstance(id);
      if (m) this.seen.set(id, signature(m));
      else this.seen.delete(id);
    });
  }

  /** The proxy's transport to a command instance for one grant. */
  transport(instance: McpInstanceRecord, grantId: string): McpTransport {
    return { call: (req) => this.call(instance, grantId, req) };
  }

  private async call(instance: McpInstanceRecord, grantId: string, req: TransportRequest): Promise<UpstreamResponse> {
    const sid = req.headers['mcp-session-id'];
    if (sid) {
      const session = this.sessions.get(sid);
      if (!session || session.instanceId !== instance.id || session.grantId !== grantId) return jsonAnswer(404, { jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } });
      const answer = await session.transport.handleRequest(requestOf(req));
      forgetAnswered(session.transport);
      return answerOf(answer, req);
    }
    if (req.method === 'POST' && isInitialize(req.text)) return this.newSession(instance, grantId, req);
    // The 2026-07-28 era has no GET stream and no sessions to DELETE: such a request of that era
    // is a 405, as the era's servers answer it; without a session, one of the 2025 era is told to begin one.
    if (req.method !== 'POST' && isModernVersion(req.headers['mcp-protocol-version'])) {
      return jsonAnswer(405, { jsonrpc: '2.0', id: null, error: { code: -32000, message: `Method not allowed: the ${MODERN_VERSION} era takes POST only.` } }, { allow: 'POST' });
    }
    if (req.method !== 'POST') return jsonAnswer(400, { jsonrpc: '2.0', id: null, error: { code: -32000, message: 'Bad Request: no MCP session; start one with initialize.' } });
    return this.statelessCall(instance, grantId, req);
  }

  private async start(instance: McpInstanceRecord, key: string): Promise<CommandChild> {
    const spec = this.source.commandSpec(instance);
    if (!spec) throw new Error('not a command instance');
    this.seen.set(instance.id, signature(instance));
    return this.supervisor.start(instance.id, key, spec, this.source.secretsOf(instance));
  }

  private async newSession(instance: McpInstanceRecord, grantId: string, req: TransportRequest): Promise<UpstreamResponse> {
    const child = await this.start(instance, `${grantId}:session:${randomUUID()}`);
    const sid = randomUUID();
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: () => sid, enableJsonResponse: true, onsessionclosed: () => void child.close() });
    // The transport closes with its child once the session is kept; a child that ends before the
    // first answer (one that exits at start) has that answer say how it ended, and then it closes.
    const bridge = new ChildBridge(child, req.timeoutMs, () => {
      if (this.sessions.delete(sid)) void transport.close().catch(() => undefined);
    });
    bridge.onServerMessage = (m) => void transport.send(m).catch(() => undefined);
    transport.onmessage = (m) => bridge.toChild(m, transport);
    await transport.start();
    const answer = await transport.handleRequest(requestOf(req));
    forgetAnswered(transport);
    if (transport.sessionId === sid && !child.ended) this.sessions.set(sid, { instanceId: instance.id, grantId, bridge, transport });
    else {
      void child.close();
      void transport.close().catch(() => undefined);
    }
    return answerOf(answer, req);
  }

  /**
   * A stateless request: one fresh server transport for it, on the grant's child. One of the
   * 2026-07-28 era is answered in that era: svc answers `server/discover` from the child's
   * initialize, and gives the child's results that era's fields (modern.ts).
   */
  private async statelessCall(instance: McpInstanceRecord, grantId: string, req: TransportRequest): Promise<UpstreamResponse> {
    const bridge = await this.grantBridge(instance, grantId, req.timeoutMs);
    const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: true });
    // that era answers a method the server does not implement with 404 (and the -32601 in the
    // body tells it from a server that has no such endpoint): a 2025-era child answers it with the
    // error alone, and its request's HTTP status is set here
    let methodNotFound = false;
    transport.onmessage = (m) => {
      if (!('method' in m) || !('id' in m) || !isModernRequest(req, m)) return bridge.toChild(m, transport);
      if (m.method === 'server/discover') return void transport.send({ jsonrpc: '2.0', id: m.id, result: discoverResult(bridge.initialized) } as JSONRPCMessage).catch(() => undefined);
      bridge.toChild(m, {
        send: (answer) => {
          if (isMethodNotFound(answer)) methodNotFound = true;
          return transport.send(modernAnswer(m.method, answer));
        },
      });
    };
    await transport.start();
    const answer = await answerOf(await transport.handleRequest(requestOf(req)), req);
    return methodNotFound && answer.statusCode === 200 ? { ...answer, statusCode: 404 } : answer;
  }

  private grantBridge(instance: McpInstanceRecord, grantId: string, timeoutMs: number): Promise<ChildBridge> {
    const key = `${instance.id}\n${grantId}`;
    let found = this.stateless.get(key);
    if (!found) {
      found = (async () => {
        const child = await this.start(instance, `${grantId}:stateless`);
        const bridge = new ChildBridge(child, timeoutMs, () => this.stateless.delete(key));
        await bridge.initialize();
        return bridge;
      })();
      this.stateless.set(key, found);
      found.catch(() => this.stateless.delete(key));
    }
    return found;
  }

  /**
   * `fn` on an SDK client of the grant's kept REST child (one process per grant, not per call);
   * with no grant (svc's own look at the tools, for a review or a call's hints), of a child just
   * for it, ended after.
   */
  async withClient<T>(instance: McpInstanceRecord, grantId: string | undefined, fn: (client: Client, timeoutMs: number) => Promise<T>, timeoutMs = this.timeoutMs): Promise<T> {
    const client = grantId ? await this.restClient(instance, grantId) : await this.connectClient(instance, `svc:${randomUUID()}`, () => undefined);
    try {
      return await fn(client, timeoutMs);
    } catch (err) {
      throw mcpError(err);
    } finally {
      if (!grantId) await client.close().catch(() => undefined);
    }
  }

  private restClient(instance: McpInstanceRecord, grantId: string): Promise<Client> {
    const key = `${instance.id}\n${grantId}`;
    let found = this.clients.get(key);
    if (!found) {
      found = this.connectClient(instance, `${grantId}:rest`, () => this.clients.delete(key));
      this.clients.set(key, found);
      found.catch(() => this.clients.delete(key));
    }
    return found;
  }

  private async connectClient(instance: McpInstanceRecord, key: string, gone: () => void): Promise<Client> {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const child = await this.start(instance, key);
    const transport = childTransport(child, gone);
    const client = new Client({ name: 'svc', version: VERSION });
    try {
      await client.connect(transport, { timeout: this.timeoutMs });
    } catch (err) {
      await child.close();
      throw mcpError(err);
    }
    return client;
  }
}

/** An SDK transport straight onto a child's JSON-RPC lines. */
function childTransport(child: CommandChild, gone: () => void): Transport {
  const transport: Transport = {
    start: async () => undefined,
    send: async (m: JSONRPCMessage) => child.send(m),
    close: () => child.close(),
  };
  child.onmessage = (m) => transport.onmessage?.(m);
  child.onexit = () => {
    gone();
    transport.onclose?.();
  };
  return transport;
}

const signature = (m: McpInstanceRecord) => JSON.stringify([m.enabled, m.command ?? null]);

function isInitialize(text: string | undefined): boolean {
  try {
    const parsed = JSON.parse(text ?? '') as { method?: unknown };
    return !Array.isArray(parsed) && parsed?.method === 'initialize';
  } catch {
    return false;
  }
}

/**
 * Drops what the SDK's server transport keeps of the POSTs it has answered with JSON. It keeps
 * each one's entry (the answer's resolver, and through it the answer and its streams) in its map
 * of streams for as long as the transport lives: its cleanup runs only for answers sent as event
 * streams. A session's transport lives as long as the session, so svc's memory grew by about 6
 * KiB a call for good (60 MiB over 10,000 calls of one session). An entry whose requests all have
 * their answers is done with: the transport then maps none of its request ids to it.
 */
function forgetAnswered(transport: WebStandardStreamableHTTPServerTransport): void {
  const internals = transport as unknown as { _streamMapping?: unknown; _requestToStreamMapping?: unknown };
  const streams = internals._streamMapping;
  const requests = internals._requestToStreamMapping;
  if (!(streams instanceof Map) || !(requests instanceof Map)) return;
  const waiting = new Set(requests.values());
  for (const [id, stream] of streams) {
    if (stream && typeof stream === 'object' && 'resolveJson' in stream && !waiting.has(id)) streams.delete(id);
  }
}

/**
 * The proxy's request as a web Request for the SDK's server transport. Its answers are JSON
 * whatever the Accept (the transport insists on both types being accepted); the protocol version
 * header is the child's and the app's business, not the transport's, so it is not passed.
 */
function requestOf(req: TransportRequest): Request {
  const headers: Record<string, string> = { accept: req.method === 'GET' ? 'text/event-stream' : 'application/json, text/event-stream' };
  if (req.text !== undefined) headers['content-type'] = 'application/json';
  if (req.headers['mcp-session-id']) headers['mcp-session-id'] = req.headers['mcp-session-id'];
  return new Request('http://command.invalid/mcp', { method: req.method, headers, body: req.text });
}

/**
 * A web Response as the proxy reads an upstream's answer; a stream ends when the app goes away. A
 * POST whose Accept takes an event stream and not JSON gets its answer as one, as a server that
 * answers with a stream gives it: each message an event (the proxy then filters it event by event).
 */
async function answerOf(res: Response, req: TransportRequest): Promise<UpstreamResponse> {
  const headers: Record<string, string> = Object.fromEntries(res.headers);
  delete headers['content-length'];
  if (req.method === 'POST' && res.status === 200 && wantsStreamOnly(req.headers.accept) && /^application\/json/i.test(headers['content-type'] ?? '')) {
    const parsed = JSON.parse(await res.text()) as unknown;
    const events = (Array.isArray(parsed) ? parsed : [parsed]).map((m) => `event: message\ndata: ${JSON.stringify(m)}\n\n`).join('');
    return { statusCode: 200, headers: { ...headers, 'content-type': 'text/event-stream', 'cache-control': 'no-cache' }, body: Readable.from([Buffer.from(events)]) };
  }
  const body = res.body ? Readable.fromWeb(res.body as unknown as NodeReadableStream) : Readable.from([]);
  req.abort.once('abort', () => body.destroy());
  return { statusCode: res.status, headers, body };
}

/** Whether an Accept names text/event-stream and no type JSON is of (application/json, or a wildcard that covers it); types with q=0 do not count. */
function wantsStreamOnly(accept: string | undefined): boolean {
  const types = (accept ?? '')
    .split(',')
    .map((part) => part.split(';').map((p) => p.trim().toLowerCase()))
    .filter(([type, ...params]) => type && !params.some((p) => /^q=0(\.0*)?$/.test(p)))
    .map(([type]) => type);
  return types.includes('text/event-stream') && !types.some((t) => t === 'application/json' || t === 'application/*' || t === '*/*');
}

function jsonAnswer(status: number, value: unknown, headers: Record<string, string> = {}): UpstreamResponse {
  return { statusCode: status, headers: { 'content-type': 'application/json', ...headers }, body: Readable.from([Buffer.from(JSON.stringify(value))]) };
}
