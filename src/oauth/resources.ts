/**
 * RFC 8707 resource indicators as svc understands them. A token is bound to one resource and used
 * only there (decisions: Standard clients):
 * - `<base>`: every app endpoint (what svc's own flow has always issued);
 * - `<base>/v1`: the OpenAI-compatible endpoints;
 * - `<base>/svc/v1/apps/mcps/{id}/mcp`: that one MCP proxy URL, as MCP hosts ask for it.
 * Values are compared after RFC 3986 normalisation (case of scheme and host, default port, dot
 * segments, a trailing slash), so `http://host:port/` is the same resource as `http://host:port`.
 */
export type ResourceTarget = { kind: 'all' } | { kind: 'models' } | { kind: 'mcp'; instanceId: string };

const MCP_PROXY = /^\/svc\/v1\/apps\/mcps\/([A-Za-z0-9-]{1,100})\/mcp$/;

export const mcpProxyPath = (instanceId: string) => `/svc/v1/apps/mcps/${instanceId}/mcp`;

/** The instance id of an MCP proxy path, or undefined. */
export function mcpProxyInstance(path: string): string | undefined {
  return MCP_PROXY.exec(path)?.[1];
}

/** The normalised form of an absolute http(s) URL with no query, fragment or credentials; else null. */
export function canonicalResource(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return null;
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.username || url.password || url.search || url.hash || value.includes('#')) return null;
  // WHATWG URL has lowercased the scheme and host, dropped a default port and resolved dot segments.
  const path = url.pathname.replace(/\/+$/, '');
  return `${url.origin}${path}`;
}

/** What a resource value means on this daemon, or null when it names nothing here. */
export function resourceTarget(base: string, value: string): { canonical: string; target: ResourceTarget } | null {
  const canonical = canonicalResource(value);
  const root = canonicalResource(base);
  if (!canonical || !root) return null;
  if (canonical === root) return { canonical, target: { kind: 'all' } };
  if (!canonical.startsWith(`${root}/`)) return null;
  const path = canonical.slice(root.length);
  if (path === '/v1') return { canonical, target: { kind: 'models' } };
  const instanceId = mcpProxyInstance(path);
  return instanceId ? { canonical, target: { kind: 'mcp', instanceId } } : null;
}

/** Whether a token bound to `audience` may be used on `path` (a request path of this daemon). */
export function audienceCovers(base: string, audience: string, path: string): boolean {
  return targetCovers(resourceTarget(base, audience)?.target ?? null, path);
}

/** Whether a resource of this daemon (null: none) holds the request path `path`. */
export function targetCovers(target: ResourceTarget | null, path: string): boolean {
  if (!target) return false;
  if (target.kind === 'all') return true;
  if (target.kind === 'models') return path.startsWith('/v1/');
  return path === mcpProxyPath(target.instanceId);
}

/**
 * Whether a token bound to `outer` may be exchanged for one bound to `inner`: only for the same
 * resource, or anything of this daemon when `outer` is the whole of it. An exchange never widens.
 */
export function audienceIncludes(base: string, outer: string, inner: string): boolean {
  const from = resourceTarget(base, outer);
  const to = resourceTarget(base, inner);
  if (!from || !to) return false;
  return from.target.kind === 'all' || from.canonical === to.canonical;
}

/**
 * Whether a token for this resource of this daemon could reach the endpoints a Power User adds
 * (model aliases, downloads): only one for the whole service can. A token bound to an MCP proxy
 * URL or to the model endpoints never can, so User serves it.
 */
export function resourceNeedsPowerUser(base: string, resource: string): boolean {
  return resourceTarget(base, resource)?.target.kind === 'all';
}
