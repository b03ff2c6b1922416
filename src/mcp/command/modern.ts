import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { TransportRequest } from '../transport/types.js';
import { isDatedVersion } from '../protocol-versions.js';

/** The stateless era svc serves a command server's 2025-era child in (docs/mcp.md, Both protocol eras). */
export const MODERN_VERSION = '2026-07-28';
const VERSION_META = 'io.modelcontextprotocol/protocolVersion';
const SERVER_INFO_META = 'io.modelcontextprotocol/serverInfo';

/** The results that carry cache hints in that era: the lists, resources/read and server/discover. */
const CACHEABLE: ReadonlySet<string> = new Set(['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list', 'resources/read', 'server/discover']);

/** What a child said of itself at svc's initialize. */
export interface ChildInit {
  capabilities?: Record<string, unknown>;
  serverInfo?: Record<string, unknown>;
  instructions?: unknown;
}

type Result = Record<string, unknown>;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Whether a request without a session is of the 2026-07-28 era or later: its `MCP-Protocol-Version`
 * header says so, or, without one, the version in its `_meta`.
 */
export function isModernRequest(req: TransportRequest, message: JSONRPCMessage): boolean {
  const header = req.headers['mcp-protocol-version'];
  const params = 'params' in message && isObject(message.params) ? message.params : undefined;
  return isModernVersion(header ?? (isObject(params?._meta) ? params._meta[VERSION_META] : undefined));
}

/** Whether a protocol version names the 2026-07-28 era or a later one. */
export const isModernVersion = (version: unknown): boolean => isDatedVersion(version) && version >= MODERN_VERSION;

/** Whether an answer is JSON-RPC's "method not found" (-32601). */
export const isMethodNotFound = (answer: JSONRPCMessage): boolean => 'error' in answer && isObject(answer.error) && answer.error.code === -32601;

/**
 * The child's capabilities as that era's client may use them through svc: `tasks` is not of the
 * era, and the list-changed and subscribe flags promise notifications that only a stream
 * (subscriptions/listen) carries, which svc does not serve for a command server's stateless
 * requests.
 */
function modernCapabilities(capabilities: Record<string, unknown> | undefined): Result {
  const out: Result = {};
  for (const [name, value] of Object.entries(capabilities ?? {})) {
    if (name === 'tasks') continue;
    if (!isObject(value)) {
      out[name] = value;
      continue;
    }
    const { listChanged: _changed, subscribe: _subscribe, ...rest } = value;
    out[name] = rest;
  }
  return out;
}

/** svc's answer to `server/discover`, from what the child said at initialize (a 2025-era child knows no such method). */
export function discoverResult(init: ChildInit): Result {
  const serverInfo = isObject(init.serverInfo) ? init.serverInfo : { name: 'command server', version: '0' };
  return {
    resultType: 'complete',
    supportedVersions: [MODERN_VERSION],
    capabilities: modernCapabilities(init.capabilities),
    // in the body as the spec's page shows it, and in _meta where the sealed schema moved it
    serverInfo,
    ...(typeof init.instructions === 'string' ? { instructions: init.instructions } : {}),
    ttlMs: 0,
    cacheScope: 'private',
    _meta: { [SERVER_INFO_META]: serverInfo },
  };
}

/**
 * A 2025-era child's answer as a result of the 2026-07-28 era: every result says `resultType`
 * (`complete`: a 2025 server has no other), and a cacheable one has its cache hints, `ttlMs: 0`
 * (unless the child gave one: svc cannot know how long its lists hold) and `cacheScope:
 * 'private'` (svc filters them per grant). An error answer is left as it is.
 */
export function modernAnswer(method: string, answer: JSONRPCMessage): JSONRPCMessage {
  if (!('result' in answer) || !isObject(answer.result)) return answer;
  const result: Result = { ...answer.result };
  if (typeof result.resultType !== 'string') result.resultType = 'complete';
  if (CACHEABLE.has(method) && result.resultType === 'complete') {
    if (!(Number.isInteger(result.ttlMs) && (result.ttlMs as number) >= 0)) result.ttlMs = 0;
    // what the app gets is filtered for its grant: never for a shared cache, whatever the child said
    result.cacheScope = 'private';
  }
  return { ...answer, result } as JSONRPCMessage;
}
