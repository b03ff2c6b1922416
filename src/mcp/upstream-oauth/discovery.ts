import { AppError } from '../../errors.js';

/** How long one discovery or token request may take. */
export const OAUTH_TIMEOUT_MS = 15_000;
/** How long the probe at `svc mcp add` waits for the server's status: a server that does not answer is saved as it is. */
const PROBE_TIMEOUT_MS = 5_000;
/** The most of a metadata or token answer svc reads. */
const ANSWER_LIMIT = 256 * 1024;

/** What a server's `401` said about signing in (RFC 6750 and RFC 9728). */
export interface BearerChallenge {
  resource_metadata?: string;
  scope?: string;
  error?: string;
}

/** The authorization server's endpoints, as its metadata names them. */
export interface AuthServerMetadata {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  registration_endpoint?: string;
  revocation_endpoint?: string;
  scopes_supported?: string[];
  code_challenge_methods_supported?: string[];
  authorization_response_iss_parameter_supported?: boolean;
  client_id_metadata_document_supported?: boolean;
  token_endpoint_auth_methods_supported?: string[];
}

/** Everything discovery found: the resource, its scopes, and its authorization server. */
export interface Discovered {
  resource: string;
  scopes: string[];
  as: AuthServerMetadata;
}

export const discoveryFailed = (why: string) => new AppError('mcp_oauth_discovery_failed', `svc could not find how to sign in to this MCP server: ${why}`, { expose: true });

/** The parameters of a `WWW-Authenticate: Bearer ...` challenge; null when it is no Bearer challenge. */
export function parseBearerChallenge(header: string | null | undefined): BearerChallenge | null {
  if (!header || !/^\s*bearer\b/i.test(header)) return null;
  const out: Record<string, string> = {};
  const params = header.replace(/^\s*bearer\s*/i, '');
  for (const m of params.matchAll(/([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))/g)) {
    out[m[1].toLowerCase()] = (m[2] ?? m[3] ?? '').replace(/\\(.)/g, '$1');
  }
  return { resource_metadata: out.resource_metadata, scope: out.scope, error: out.error };
}

/** A JSON document over HTTP(S), read bounded; never follows a redirect. */
export async function fetchJson(url: string, init: RequestInit = {}): Promise<{ status: number; body: unknown; headers: Headers }> {
  const res = await fetch(url, { ...init, redirect: 'manual', signal: AbortSignal.timeout(OAUTH_TIMEOUT_MS) });
  const text = await readBounded(res);
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: res.status, body, headers: res.headers };
}

async function readBounded(res: Response): Promise<string> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > ANSWER_LIMIT) {
      await reader.cancel();
      throw discoveryFailed('an answer was too large');
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Asks the server what it answers a client without credentials: an `initialize`, as an MCP host
 * starts. A `401` with a Bearer challenge says it signs people in with OAuth.
 */
export async function probe(url: string): Promise<BearerChallenge | null> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), PROBE_TIMEOUT_MS);
  try {
    const res = await fetch(url, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'svc', version: '0' } } }),
      signal: abort.signal,
    });
    // only the status and headers are wanted: the answer (maybe a stream) is cut off at once
    abort.abort();
    const session = res.headers.get('mcp-session-id');
    // a server that took the initialize keeps a session for it: it is ended, as any client would
    if (session) await endSession(url, session);
    if (res.status !== 401) return null;
    return parseBearerChallenge(res.headers.get('www-authenticate'));
  } catch {
    // not reachable now: saved as it is, and its calls will say so
    return null;
  } finally {
    clearTimeout(timer);
  }
}

async function endSession(url: string, session: string): Promise<void> {
  try {
    const res = await fetch(url, { method: 'DELETE', redirect: 'manual', headers: { 'mcp-session-id': session }, signal: AbortSignal.timeout(OAUTH_TIMEOUT_MS) });
    await res.body?.cancel();
  } catch {
    /* the server's to forget in its own time */
  }
}

/** The URL as a resource indicator: no fragment, as RFC 8707 asks. */
export function canonicalResource(url: string): string {
  const u = new URL(url);
  u.hash = '';
  return u.href;
}

/** RFC 9728's well-known locations for a resource: with its path, then at the origin's root. */
function protectedResourceLocations(resource: string): string[] {
  const u = new URL(resource);
  const path = u.pathname === '/' ? '' : u.pathname.replace(/\/$/, '');
  const at = (suffix: string) => `${u.origin}/.well-known/oauth-protected-resource${suffix}`;
  return path ? [at(path), at('')] : [at('')];
}

/** RFC 8414 first, then OpenID discovery, each in the forms issuers with a path use. */
function authServerLocations(issuer: string): string[] {
  const u = new URL(issuer);
  const path = u.pathname === '/' ? '' : u.pathname.replace(/\/$/, '');
  return [
    `${u.origin}/.well-known/oauth-authorization-server${path}`,
    `${u.origin}/.well-known/openid-configuration${path}`,
    ...(path ? [`${u.origin}${path}/.well-known/openid-configuration`] : []),
  ];
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isHttpUrl = (v: unknown): v is string => {
  if (typeof v !== 'string') return false;
  try {
    const u = new URL(v);
    return u.protocol === 'https:' || u.protocol === 'http:';
  } catch {
    return false;
  }
};

async function protectedResource(resource: string, fromChallenge?: string): Promise<{ authorization_servers: string[]; scopes: string[] }> {
  const locations = fromChallenge && isHttpUrl(fromChallenge) ? [fromChallenge] : protectedResourceLocations(resource);
  for (const location of locations) {
    const { status, body } = await fetchJson(location, { headers: { accept: 'application/json' } }).catch(() => ({ status: 0, body: undefined }));
    if (status !== 200 || !isRecord(body)) continue;
    // RFC 9728 §3.3: the metadata must be about this very resource
    if (typeof body.resource !== 'string' || canonicalResource(body.resource) !== resource) throw discoveryFailed('its protected-resource metadata is about another resource');
    const servers = Array.isArray(body.authorization_servers) ? body.authorization_servers.filter(isHttpUrl) : [];
    if (!servers.length) throw discoveryFailed('its protected-resource metadata names no authorization server');
    const scopes = Array.isArray(body.scopes_supported) ? body.scopes_supported.filter((s): s is string => typeof s === 'string') : [];
    return { authorization_servers: servers, scopes };
  }
  throw discoveryFailed('it serves no protected-resource metadata (RFC 9728)');
}

async function authServer(issuer: string): Promise<AuthServerMetadata> {
  for (const location of authServerLocations(issuer)) {
    const { status, body } = await fetchJson(location, { headers: { accept: 'application/json' } }).catch(() => ({ status: 0, body: undefined }));
    if (status !== 200 || !isRecord(body)) continue;
    // RFC 8414 §3.3: the issuer in the metadata is the one asked for
    if (body.issuer !== issuer) throw discoveryFailed('its authorization server\'s metadata names another issuer');
    if (!isHttpUrl(body.authorization_endpoint) || !isHttpUrl(body.token_endpoint)) throw discoveryFailed('its authorization server\'s metadata lacks its endpoints');
    return body as unknown as AuthServerMetadata;
  }
  throw discoveryFailed('its authorization server serves no metadata (RFC 8414 or OpenID discovery)');
}

/** Discovery from the resource's URL (and the metadata URL its `401` named) to its authorization server. */
export async function discover(url: string, resourceMetadataUrl?: string): Promise<Discovered> {
  const resource = canonicalResource(url);
  const prm = await protectedResource(resource, resourceMetadataUrl);
  const as = await authServer(prm.authorization_servers[0]);
  if (as.code_challenge_methods_supported && !as.code_challenge_methods_supported.includes('S256')) throw discoveryFailed('its authorization server does not take PKCE S256');
  return { resource, scopes: prm.scopes, as };
}
