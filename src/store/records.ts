import type { PullStatus } from './vocabulary.js';

/**
 * The records of the collections that db.json's check takes as any object (it looks only into the
 * core ones, in schema.ts, whose header says where each kind of record type lives): their shapes
 * live here, in the store, so that a backend needs nothing from the features.
 */

export interface OAuthClientRecord {
  client_id: string;
  name: string;
  description: string | null;
  redirect_uris: string[];
  public: boolean;
  /** sealed; null for public clients */
  client_secret: string | null;
  created_at: string;
  /** `dynamic`: registered by the client itself (RFC 7591); absent: added by an admin */
  kind?: 'registered' | 'dynamic';
  /** a dynamic client's metadata as the authorization server accepted it */
  metadata?: Record<string, unknown>;
  /** last token a dynamic client got, kept to the day */
  last_used_at?: string;
  /** the address a dynamic client registered from (its per-address cap) */
  registered_from?: string;
}

/**
 * The model of the oauthState rows that mark a grant ended (src/oauth/token-family.ts). The team
 * store names it too: a change to such a row changes what the Bearer check answers.
 */
export const ENDED_GRANT_MODEL = 'EndedGrant';

/** A refresh token or grant of the authorization server, sealed (src/oauth/adapter.ts). */
export interface OAuthStateRecord {
  model: string;
  /** sha256 of the record id: for a refresh token the id is the token itself */
  id: string;
  /** sealed JSON payload */
  payload: string;
  grant_id: string | null;
  expires_at: number | null;
  /** ms; absent on rows written before it was kept */
  created_at?: number;
  /** a hash of the uid or user code oidc-provider finds this row by, on a team server (where every model is stored) */
  lookup?: string;
}

export interface ProviderRecord {
  name: string;
  base_url: string;
  /** sealed with kind provider_api_key, id = name */
  api_key: string | null;
  models: string[];
  discovered_models: string[];
  /** `created` (Unix seconds) of the discovered models whose provider gave one; absent on older records */
  discovered_created?: Record<string, number>;
  discovered_at: string | null;
  discovery_error: string | null;
  timeout_ms: number;
  created_at: string;
  /** the API it serves apps' Messages calls with: chat (translated onto /chat/completions) or messages (passed through); absent on older records: chat */
  api?: 'chat' | 'messages';
  /** where a messages provider takes its key: x-api-key (Anthropic's) or Authorization: Bearer; absent: x-api-key */
  auth_header?: 'x-api-key' | 'authorization';
}

export interface AliasRecord {
  id: string;
  provider: string;
  model: string;
  /** request fields applied unless the app sets them */
  defaults: Record<string, unknown>;
  created_at: string;
  /** the user who created it (through a session or an app token); absent on aliases made before owners were kept */
  owner_id?: string | null;
}

export interface PullRecord {
  id: string;
  url: string;
  filename: string;
  sha256: string | null;
  status: PullStatus;
  bytes_done: number;
  bytes_total: number | null;
  error: string | null;
  created_at: string;
  updated_at: string;
  /** the user it was started for (session or app token); absent on downloads made before owners were kept */
  user_id?: string | null;
  /** started by an app token: only public addresses, and the app sees no more than done or failed */
  by_app?: boolean;
  /** the sha256 the caller gave, if any (`sha256` becomes the digest of what was found) */
  expected_sha256?: string | null;
  /** on a team server, the replica whose data dir holds the file */
  replica?: string;
}

export interface CachedTool {
  name: string;
  description?: string;
  input_schema: unknown;
  /** the hints the server gave (MCP ToolAnnotations); they set a tool's default choice */
  annotations?: ToolHints;
}

/** An MCP tool's annotations as svc keeps them: hints only, each bounded. */
export interface ToolHints {
  title?: string;
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

/** An MCP instance's tool list as last fetched; stored under the instance's id. */
export interface ToolCache {
  tools: CachedTool[];
  refreshed_at: string;
}
