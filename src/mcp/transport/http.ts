import { callUpstream } from '../../upstream/client.js';
import type { McpInstanceRecord } from '../../store/schema.js';
import type { McpTransport } from './types.js';

/** How long an established GET stream may go without a byte (servers may have nothing to say for hours). */
const GET_STREAM_QUIET_MS = 24 * 60 * 60 * 1000;

/**
 * Instances' URLs, parsed once each: callUpstream only reads a URL, and a proxied call would
 * otherwise parse its instance's again. Bounded, for a registry of many instances.
 */
const parsedUrls = new Map<string, URL>();
function parsedUrl(url: string): URL {
  let parsed = parsedUrls.get(url);
  if (!parsed) {
    parsed = new URL(url);
    if (parsedUrls.size >= 1000) parsedUrls.clear();
    parsedUrls.set(url, parsed);
  }
  return parsed;
}

/** An HTTP instance's server, reached at its URL. */
export function httpTransport(instance: McpInstanceRecord): McpTransport {
  return {
    call: ({ method, headers, text, timeoutMs, abort }) =>
      callUpstream({
        url: parsedUrl(instance.url),
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
