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
  let streamable: InstanceType<typeof StreamableHTTPClientTransport> | null = new StreamableHTTPClientTransport(url, { requestInit });
  try {
    await client.connect(streamable, { timeout: timeoutMs });
  } catch (first) {
    streamable = null;
    await client.close().catch(() => undefined);
    if (first instanceof McpError && first.code === ErrorCode.RequestTimeout) throw mcpError(first);
    client = new Client({ name: 'svc', version: VERSION });
    try {
      const headers = target.headers;
      await client.connect(
        new SSEClientTransport(url, {
          requestInit,
          eventSourceInit: { fetch: (u, init) => fetch(u, { ...init, headers: { ...(init?.headers as Record<string, string>), ...headers } }) },
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
