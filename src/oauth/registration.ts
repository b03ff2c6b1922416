import { hasUnsafeUrlCharacter } from '../http/urls.js';

const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

/**
 * A native app's private-use scheme as RFC 8252 asks for one: a reverse domain name the app's
 * owner controls, so it holds a period (`com.example.app:`). Schemes without one (`ms-msdt:`,
 * `view-source:`, `jar:`, `javascript:`) belong to the system or a browser and run something.
 */
export function isPrivateUseScheme(protocol: string): boolean {
  return /^[a-z][a-z0-9+-]*(\.[a-z0-9+-]+)+:$/i.test(protocol);
}

/**
 * Why a redirect URI of a client that described itself (RFC 7591 registration, or a client ID
 * metadata document) is refused, or null. An allow-list: https, loopback http, or a reverse-domain
 * private-use scheme; nothing else, whatever new scheme a browser or OS learns to handle.
 */
export function redirectUriProblem(value: string): string | null {
  if (hasUnsafeUrlCharacter(value)) return 'redirect URIs must not contain control, whitespace or invisible characters';
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `${value.slice(0, 100)} is not an absolute URI`;
  }
  if (url.hash || value.includes('#')) return 'redirect URIs must not have a fragment';
  if (url.username || url.password) return 'redirect URIs must not carry credentials';
  if (url.protocol === 'https:') return null;
  if (url.protocol === 'http:') return LOOPBACK_HOSTS.has(url.hostname) ? null : 'http redirect URIs must be loopback (127.0.0.1, [::1] or localhost); use https elsewhere';
  if (isPrivateUseScheme(url.protocol)) return null;
  return `${url.protocol.slice(0, 40)} is not a redirect scheme svc accepts: use https, loopback http or a reverse-domain private-use scheme (com.example.app:/callback)`;
}

// oidc-provider's error classes; typed loosely because the package ships no types for them.
type ErrorClass = new (description: string) => Error;
type ValidatorContext = { oidc?: { route?: string } } | undefined;

/** A client ID metadata document's client is known by the https URL of that document. */
const isMetadataDocumentClient = (metadata: Record<string, unknown>) => /^https:\/\//i.test(String(metadata.client_id ?? ''));

/**
 * svc's rules for clients that describe themselves, run by oidc-provider as the validator of an
 * extra metadata property on every client it builds: at the registration endpoint (RFC 7591),
 * and whenever it builds a client from a metadata document. Clients an admin added are left to
 * the admin. Public clients only, and redirect URIs a local user can trust.
 */
export function registrationPolicy(errors: { InvalidClientMetadata: ErrorClass; InvalidRedirectUri: ErrorClass }) {
  return function validateRegistration(ctx: ValidatorContext, key: string, value: unknown, metadata: Record<string, unknown>): void {
    if (ctx?.oidc?.route !== 'registration' && !isMetadataDocumentClient(metadata)) return;
    if (value !== undefined) throw new errors.InvalidClientMetadata(`${key} is set by svc, not by the client`);
    // A registration that names no method gets "none" (clientDefaults): RFC 7591 lets the server
    // substitute, and says so in its answer. A secret-based method is refused, not downgraded.
    if (metadata.token_endpoint_auth_method !== 'none') {
      throw new errors.InvalidClientMetadata('svc registers public clients only: token_endpoint_auth_method must be "none" (use PKCE)');
    }
    // oidc-provider made a secret before the default applied; a public client gets none, and
    // none is stored (oidc-provider lets a validator change the metadata it is given).
    delete metadata.client_secret;
    delete metadata.client_secret_expires_at;
    const uris = Array.isArray(metadata.redirect_uris) ? metadata.redirect_uris : [];
    for (const uri of uris) {
      const problem = redirectUriProblem(String(uri));
      if (problem) throw new errors.InvalidRedirectUri(problem);
    }
  };
}
