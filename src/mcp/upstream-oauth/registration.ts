import { AppError } from '../../errors.js';
import type { McpOAuthRecord } from '../../store/schema.js';
import { type AuthServerMetadata, fetchJson } from './discovery.js';

export type ClientRecord = NonNullable<McpOAuthRecord['client']>;

/** The path where svc serves its Client ID Metadata Document; its full URL is the client_id. */
export const CLIENT_METADATA_PATH = '/svc/oauth/mcp-client.json';
/** Where the upstream sends the person back with the authorization code. */
export const CALLBACK_PATH = '/ui/mcp-oauth/callback';

/** svc as an OAuth client of hosted MCP servers: the same description whether it is registered or served. */
export function clientMetadata(baseUrl: string) {
  return {
    client_name: 'svc',
    client_uri: baseUrl,
    redirect_uris: [`${baseUrl}${CALLBACK_PATH}`],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  };
}

/** The Client ID Metadata Document svc serves at its base URL. */
export function clientMetadataDocument(baseUrl: string) {
  return { client_id: `${baseUrl}${CLIENT_METADATA_PATH}`, ...clientMetadata(baseUrl) };
}

const registrationFailed = (why: string) => new AppError('mcp_oauth_registration_failed', `svc could not register as a client of this MCP server's authorization server: ${why}`, { expose: true });

/** RFC 7591: svc registers itself as a public client. */
async function register(as: AuthServerMetadata, baseUrl: string): Promise<ClientRecord> {
  const { status, body } = await fetchJson(as.registration_endpoint!, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify(clientMetadata(baseUrl)),
  }).catch(() => ({ status: 0, body: undefined }));
  const answer = body as { client_id?: unknown; error?: unknown } | undefined;
  if (status !== 201 && status !== 200) throw registrationFailed(typeof answer?.error === 'string' ? answer.error.slice(0, 80) : `it answered ${status}`);
  if (typeof answer?.client_id !== 'string' || !answer.client_id) throw registrationFailed('its answer has no client_id');
  return { kind: 'dynamic', client_id: answer.client_id, issuer: as.issuer };
}

/**
 * The client svc signs in as, in this order: the one the owner registered by hand; the one svc
 * registered with this authorization server before (kept and reused); its Client ID Metadata
 * Document when the server takes one; else a new RFC 7591 registration. Answers it, and whether
 * it is new (so it is kept).
 */
export async function clientFor(current: ClientRecord | undefined, as: AuthServerMetadata, baseUrl: string): Promise<{ client: ClientRecord; fresh: boolean }> {
  if (current?.kind === 'pre_registered') return { client: current, fresh: false };
  if (current && current.issuer === as.issuer) {
    const stillOurs = current.kind !== 'metadata_document' || current.client_id === clientMetadataDocument(baseUrl).client_id;
    if (stillOurs) return { client: current, fresh: false };
  }
  if (as.client_id_metadata_document_supported === true) {
    return { client: { kind: 'metadata_document', client_id: clientMetadataDocument(baseUrl).client_id, issuer: as.issuer }, fresh: true };
  }
  if (as.registration_endpoint) return { client: await register(as, baseUrl), fresh: true };
  throw registrationFailed('it takes no dynamic registration and no Client ID Metadata Document; add the instance with --oauth-client-id');
}
