/**
 * What each sealed field is sealed under: its kind, and the record id that goes with it as
 * associated data. Named once here, so that the features that seal and `svc store copy` (which
 * opens every sealed value and seals it again under another key) cannot disagree.
 */
export const SEAL_KINDS = {
  /** the key check and the cookie-signing keys, ids `key_check` and `session_keys` */
  meta: 'meta',
  /** a provider's API key, id = the provider's name */
  providerApiKey: 'provider_api_key',
  /** an MCP instance's header value, id = mcpHeaderSealId */
  mcpHeader: 'mcp_header',
  /** a command MCP instance's environment value, id = mcpEnvSealId */
  mcpEnv: 'mcp_env',
  /** a registered OAuth client's secret, id = its client_id */
  oauthClientSecret: 'oauth_client_secret',
  /** the payload of a stored OAuth artifact (grant, refresh token...), id = its hashed id */
  oauthState: 'oauth_state',
  /** the authorization server's signing keys, id `jwks` */
  signingKeys: 'oauth_signing_keys',
  /** a `svc open` link's token, id `login_link`: handed out, never stored */
  loginLink: 'login_link',
} as const;

/** The id an MCP instance's header is sealed with: header names compare case-insensitively. */
export const mcpHeaderSealId = (instanceId: string, headerName: string) => `${instanceId}:${headerName.toLowerCase()}`;

/** The id a command MCP instance's environment value is sealed with: variable names are case-sensitive. */
export const mcpEnvSealId = (instanceId: string, envName: string) => `${instanceId}:${envName}`;
