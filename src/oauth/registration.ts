/** Schemes a native app may not claim as a private-use redirect: they run or read something here. */
const UNSAFE_SCHEMES = new Set(['javascript:', 'data:', 'file:', 'vbscript:', 'blob:', 'about:', 'ws:', 'wss:', 'ftp:', 'http:', 'https:']);
const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

/** Why a self-registered redirect URI is refused, or null: loopback http, https, or a private-use scheme. */
export function redirectUriProblem(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `${value} is not an absolute URI`;
  }
  if (url.hash || value.includes('#')) return 'redirect URIs must not have a fragment';
  if (url.username || url.password) return 'redirect URIs must not carry credentials';
  if (url.protocol === 'https:') return null;
  if (url.protocol === 'http:') return LOOPBACK_HOSTS.has(url.hostname) ? null : 'http redirect URIs must be loopback (127.0.0.1, [::1] or localhost); use https elsewhere';
  if (UNSAFE_SCHEMES.has(url.protocol)) return `${url.protocol} is not a redirect scheme`;
  return null;
}

// oidc-provider's error classes; typed loosely because the package ships no types for them.
type ErrorClass = new (description: string) => Error;

/**
 * svc's rules for clients that register themselves (RFC 7591), run by oidc-provider as the
 * validator of an extra metadata property on every client it builds; they apply at the
 * registration endpoint only. Public clients only, and redirect URIs a local user can trust.
 */
export function registrationPolicy(errors: { InvalidClientMetadata: ErrorClass; InvalidRedirectUri: ErrorClass }) {
  return function validateRegistration(ctx: { oidc?: { route?: string } } | undefined, key: string, value: unknown, metadata: Record<string, unknown>): void {
    if (ctx?.oidc?.route !== 'registration') return;
    if (value !== undefined) throw new errors.InvalidClientMetadata(`${key} is set by svc, not by the client`);
    if (metadata.token_endpoint_auth_method !== 'none') {
      throw new errors.InvalidClientMetadata('svc registers public clients only: token_endpoint_auth_method must be "none" (use PKCE)');
    }
    const uris = Array.isArray(metadata.redirect_uris) ? metadata.redirect_uris : [];
    for (const uri of uris) {
      const problem = redirectUriProblem(String(uri));
      if (problem) throw new errors.InvalidRedirectUri(problem);
    }
  };
}
