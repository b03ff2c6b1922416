import { callUpstream } from '../../upstream/client.js';
import type { McpInstanceRecord } from '../../store/schema.js';
import type { McpTransport } from './types.js';

/** How long an established GET stream may go without a byte (servers may have nothing to say for hours). */
const GET_STREAM_QUIET_MS = 24 * 60 * 60 * 1000;

/** An HTTP instance's server, reached at its URL. */
export function httpTransport(instance: McpInstanceRecord): McpTransport {
  return {
    call: ({ method, headers, text, timeoutMs, abort }) =>
      callUpstream({
        url: new URL(instance.url),
        method: method as 'GET' | 'POST',
        headers,
        body: text,
        name: `MCP server of instance ${instance.name.slice(0, 60)}`,
        // every answer must start in time; only an established GET stream may then stay quiet for long
        timeoutMs,
        ...(method === 'GET' ? { bodyTimeoutMs: GET_STREAM_QUIET_MS, stream: true } : {}),
        signal: abort,
      }),
  };
}
