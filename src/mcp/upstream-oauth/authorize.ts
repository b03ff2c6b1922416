import { createHash, randomBytes } from 'node:crypto';
import type { McpOAuthPending } from '../../store/schema.js';
import type { Discovered } from './discovery.js';
import type { ClientRecord } from './registration.js';

/** How long the person has to sign in at the upstream and come back. */
export const AUTHORIZATION_TTL_MS = 10 * 60_000;
/** The authorizations of one instance kept under way at once (the newest). */
export const MAX_PENDING = 5;

export const hashState = (secret: string) => createHash('sha256').update(secret).digest('base64url');

/** A state names its instance (so the callback finds it) and carries a secret only its starter got. */
export function splitState(state: string): { instanceId: string; secret: string } | null {
  const at = state.lastIndexOf('.');
  if (at <= 0 || at === state.length - 1 || state.length > 300) return null;
  return { instanceId: state.slice(0, at), secret: state.slice(at + 1) };
}

/** Who may finish a sign-in: the browser session that started it, or the CLI login holding the secret. */
export type Binding = { session_hash: string } | { cli_hash: string };

export interface NewAuthorization {
  url: string;
  pending: Omit<McpOAuthPending, 'verifier'>;
  verifier: string;
}

/**
 * The scopes asked for when the owner named none: the resource's, and `offline_access` where the
 * authorization server lists it, so that it issues a refresh token (many issue none without it).
 */
export function defaultScopes(found: Discovered): string[] {
  const offline = found.as.scopes_supported?.includes('offline_access') && !found.scopes.includes('offline_access');
  return offline ? [...found.scopes, 'offline_access'] : found.scopes;
}

/**
 * An authorization request with PKCE S256, a state bound to the instance and to the session or
 * CLI login that starts it, the resource indicator (RFC 8707) and the scopes: the owner's, else the metadata's.
 * With `offline_access` it asks for consent too (OpenID Connect Core 11: an authorization server
 * ignores `offline_access` without `prompt=consent`).
 */
export function newAuthorization(instanceId: string, binding: Binding, found: Discovered, client: ClientRecord, redirectUri: string, scope: string | undefined, now: number): NewAuthorization {
  const secret = randomBytes(24).toString('base64url');
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  const url = new URL(found.as.authorization_endpoint);
  const scopes = scope ?? defaultScopes(found).join(' ');
  url.searchParams.set('response_type', 'code');
  url.searchParams.set('client_id', client.client_id);
  url.searchParams.set('redirect_uri', redirectUri);
  if (scopes) url.searchParams.set('scope', scopes);
  if (scopes.split(' ').includes('offline_access')) url.searchParams.set('prompt', 'consent');
  url.searchParams.set('state', `${instanceId}.${secret}`);
  url.searchParams.set('code_challenge', challenge);
  url.searchParams.set('code_challenge_method', 'S256');
  url.searchParams.set('resource', found.resource);
  return {
    url: url.href,
    verifier,
    pending: {
      state_hash: hashState(secret),
      ...binding,
      issuer: found.as.issuer,
      authorization_response_iss: found.as.authorization_response_iss_parameter_supported === true,
      token_endpoint: found.as.token_endpoint,
      ...(found.as.revocation_endpoint ? { revocation_endpoint: found.as.revocation_endpoint } : {}),
      redirect_uri: redirectUri,
      resource: found.resource,
      expires_at: now + AUTHORIZATION_TTL_MS,
    },
  };
}

/** The authorizations kept with a new one: the unexpired ones, the newest MAX_PENDING. */
export function keptPending(current: McpOAuthPending[] | undefined, added: McpOAuthPending, now: number): McpOAuthPending[] {
  return [...(current ?? []).filter((p) => p.expires_at > now), added].slice(-MAX_PENDING);
}
