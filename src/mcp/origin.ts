import type { AppContext } from '../http/context.js';

/** What the origin rule needs to know of a client: its redirect URIs (null: not in the registry). */
export type RedirectUrisOf = (clientId: string) => Promise<string[] | null>;

/**
 * Which browser origins may use an MCP proxy URL with an app's token: svc's own, or one of the
 * origins of the app's registered redirect URIs. Apps of an external issuer (and those known by a
 * metadata document) are not in the registry; any origin goes for them only when svc trusts an
 * external issuer.
 */
export function mcpOriginRule(ownOrigins: Set<string>, redirectUrisOf: RedirectUrisOf, externalIssuer: boolean) {
  return async function originAllowed(ctx: AppContext): Promise<boolean> {
    const origin = ctx.get('Origin');
    if (!origin || ownOrigins.has(origin.toLowerCase())) return true;
    const clientId = ctx.state.grant?.clientId;
    const uris = clientId ? await redirectUrisOf(clientId) : null;
    if (!uris) return externalIssuer;
    return uris.some((u) => {
      try {
        return new URL(u).origin === origin;
      } catch {
        return false;
      }
    });
  };
}
