/** Where the embedded authorization server answers on the daemon. */
export const OAUTH_PREFIX = '/oauth';
/** RFC 8414 §3: the metadata of the issuer `<base>/oauth`, at the well-known path inserted before its path. */
export const AS_METADATA_PATH = `/.well-known/oauth-authorization-server${'/oauth'}`;
export const DISCOVERY_PATH = '/.well-known/openid-configuration';
/** Where a sign-in's interaction is resolved: by svc's own router, not by oidc-provider. */
export const INTERACTION_PATH = `${OAUTH_PREFIX}/interaction/`;

export const isAuthorizationServerPath = (path: string) =>
  path === OAUTH_PREFIX || path.startsWith(`${OAUTH_PREFIX}/`) || path === AS_METADATA_PATH || path === `${AS_METADATA_PATH}/`;
