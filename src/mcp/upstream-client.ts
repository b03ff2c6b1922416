import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { AppError } from '../errors.js';
import { upstreamTimeout, upstreamUnavailable } from '../upstream/client.js';
import { VERSION } from '../version.js';

export const MCP_TIMEOUT_MS = 30_000;

/** What the SDK client of one instance needs: where, and the instance's own (opened) headers. */
export interface McpTarget {
  url: string;
  headers: Record<string, string>;
  timeoutMs?: number;
  /** the fetch the transports use (one that follows no redirect, and counts what it was answered) */
  fetch?: typeof fetch;
}

/**
 * A fetch toward one server's origin only: the Authorization header goes to no other origin, no
 * redirect is followed (a server that redirects gets its own 3xx back, and the token goes nowhere
 * else), and each status is recorded in `statuses`, so a refused token is known as such.
 */
export function originBoundFetch(serverUrl: string, statuses: number[]): typeof fetch {
  const origin = new URL(serverUrl).origin;
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const headers = new Headers(init?.headers);
    if (url.origin !== origin) headers.delete('authorization');
    const res = await fetch(url, { ...init, headers, redirect: 'manual' });
    statuses.push(res.status);
    return res;
  };
}

/** Maps what an MCP call can throw to the contract's errors, naming no URL or credential. */
export function mcpError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (err instanceof McpError) {
    if (err.code === ErrorCode.RequestTimeout) return upstreamTimeout('The MCP server did not answer in time.');
    if (err.code === ErrorCode.InvalidParams && /tool/i.test(err.message)) {
      return new AppError('tool_not_found', 'The MCP server has no such tool.');
    }
    if (err.code === ErrorCode.ConnectionClosed) return upstreamUnavailable('The MCP server closed the connection.');
    return new AppError('upstream_rejected', `The MCP server refused the call (${err.code}).`);
  }
  return upstreamUnavailable('The MCP server could not be reached.');
}

/**
 * Connects an SDK client to the instance over Streamable HTTP, falling back to the older
 * HTTP+SSE transport when the server only speaks that, runs `fn`, and closes the client.
 */
export async function withMcpClient<T>(target: McpTarget, fn: (client: Client, timeoutMs: number) => Promise<T>): Promise<T> {
  // The SDK client is loaded on first use: a daemon whose apps never call tools does not carry it.
  const [{ Client }, { SSEClientTransport }, { StreamableHTTPClientTransport }] = await Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/client/sse.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
  ]);
  const timeoutMs = target.timeoutMs ?? MCP_TIMEOUT_MS;
  const url = new URL(target.url);
  const requestInit = { headers: target.headers };
  let client = new Client({ name: 'svc', version: VERSION });
  const own = target.fetch ? { fetch: target.fetch } : {};
  let streamable: InstanceType<typeof StreamableHTTPClientTransport> | null = new StreamableHTTPClientTransport(url, { requestInit, ...own });
  try {
    await client.connect(streamable, { timeout: timeoutMs });
  } catch (first) {
    streamable = null;
    await client.close().catch(() => undefined);
    if (first instanceof McpError && first.code === ErrorCode.RequestTimeout) throw mcpError(first);
    client = new Client({ name: 'svc', version: VERSION });
    try {
      const headers = target.headers;
      const sseFetch = target.fetch ?? fetch;
      await client.connect(
        new SSEClientTransport(url, {
          requestInit,
          ...own,
          eventSourceInit: { fetch: (u, init) => sseFetch(u, { ...init, headers: { ...(init?.headers as Record<string, string>), ...headers } }) },
        }),
        { timeout: timeoutMs },
      );
    } catch (err) {
      await client.close().catch(() => undefined);
      throw mcpError(err);
    }
  }
  try {
    return await fn(client, timeoutMs);
  } catch (err) {
    throw mcpError(err);
  } finally {
    // End the upstream session (DELETE with its Mcp-Session-Id): a call per session would
    // otherwise leave one open on the server for every refresh and execute.
    if (streamable?.sessionId) await streamable.terminateSession().catch(() => undefined);
    await client.close().catch(() => undefined);
  }
}
