/*
 * The store's record types are in three files, by what each is for:
 * - vocabulary.ts: the fixed words (roles, statuses), values that the CLI and the features import
 *   on their own, without any record type or check;
 * - schema.ts (here): the core records (users, sessions, MCP instances, access requests, API
 *   keys, meta), the ones the one loose check of db.json below looks into, and that check;
 * - records.ts: the records of the other collections (OAuth clients and state, providers,
 *   aliases, downloads, tool lists), which the check takes as any object.
 * tables.ts then says which collection holds which record, under which key. Records are plain
 * JSON; secret fields hold sealed strings only.
 */
import { accessRequestStatuses } from './vocabulary.js';
import type { AccessRequestStatus, AppRole, UserRole } from './vocabulary.js';
import { COLLECTION_KEYS, isCollection } from './tables.js';

export { accessRequestStatuses, appRoles, userRoles } from './vocabulary.js';
export type { AccessRequestStatus, AppRole, UserRole } from './vocabulary.js';

export interface UserRecord {
  id: string;
  username: string;
  role: UserRole;
  password_hash: string;
  created_at: string;
}

export interface SessionRecord {
  /** sha256 of the session id: the raw id lives only in the cookie. */
  id_hash: string;
  user_id: string;
  csrf: string;
  expires_at: number;
  data: Record<string, unknown>;
}

export interface McpHeaderRecord {
  name: string;
  /** sealed with kind "mcp_header", id "<instance id>:<name>" */
  value: string;
}

/** How svc runs a command MCP server (one that speaks MCP on its stdin and stdout). */
export interface McpCommandRecord {
  /** the program, run with no shell: an absolute path or a name looked up on PATH */
  command: string;
  args: string[];
  /** the variables it gets beside svc's minimal environment; values sealed with kind "mcp_env", id "<instance id>:<name>" */
  env: McpHeaderRecord[];
  /** where it runs; null: svc's own working directory */
  cwd: string | null;
}

export interface McpInstanceRecord {
  id: string;
  owner_id: string;
  name: string;
  /** an HTTP instance's server URL; a command instance's app-facing name only (never fetched) */
  url: string;
  enabled: boolean;
  /** an HTTP instance's upstream headers; always empty for a command instance */
  headers: McpHeaderRecord[];
  /** present: a command server svc runs; absent: an HTTP server at `url` */
  command?: McpCommandRecord;
  allow_tools: string[] | null;
  /** set when the server signs people in with OAuth (mcp/upstream-oauth) */
  oauth?: McpOAuthRecord;
  created_at: string;
  updated_at: string;
}

/** How svc signs in to an instance's OAuth-protected server, and the sign-in it holds. */
export interface McpOAuthRecord {
  status: 'connected' | 'needs_sign_in';
  /** why a sign-in is needed: never signed in, the refresh was refused, the server refused the token, signed out */
  reason?: 'not_signed_in' | 'refresh_refused' | 'token_refused' | 'signed_out';
  /** the protected-resource metadata URL the server's 401 named */
  resource_metadata_url?: string;
  /** scopes asked for instead of the metadata's (`--oauth-scope`) */
  scope?: string;
  /** the client svc signs in as: given by the owner, or registered by svc (kept and reused) */
  client?: { kind: 'pre_registered' | 'metadata_document' | 'dynamic'; client_id: string; issuer?: string; client_secret?: string };
  /** the authorization server of the sign-in, and its endpoints (no secrets) */
  issuer?: string;
  token_endpoint?: string;
  revocation_endpoint?: string;
  /** the access and refresh tokens, sealed as one JSON value (kind mcp_oauth_tokens, id = the instance's) */
  tokens?: string;
  /** when the access token ends (ms since the epoch), if the server said */
  expires_at?: number;
  /** counts the token sets: a refresh that finds another number knows another one refreshed first */
  generation: number;
  connected_at?: string;
  /** authorizations started and not yet come back (each used once) */
  pending?: McpOAuthPending[];
}

export interface McpOAuthPending {
  /** sha256 of the state's secret part */
  state_hash: string;
  /** the session that started it from a web page: only that browser may finish it */
  session_hash?: string;
  /**
   * sha256 of the secret of the `svc mcp login` that started it (the CLI holds it and asks with it
   * how the sign-in went): the callback takes its state in any browser, once
   */
  cli_hash?: string;
  /** how a CLI-started sign-in ended (kept until it expires, for the CLI to read); none while under way */
  result?: 'exchanging' | 'connected' | 'refused';
  /** the refusal's title, when refused */
  why?: string;
  /** the PKCE verifier, sealed (kind mcp_oauth_verifier, id = "<instance id>:<state_hash>") */
  verifier: string;
  issuer: string;
  authorization_response_iss: boolean;
  token_endpoint: string;
  revocation_endpoint?: string;
  redirect_uri: string;
  resource: string;
  expires_at: number;
}

export interface ApprovedMcpServer {
  url: string;
  instance_ids: string[];
}

/** How the client behind an authorization-endpoint request is known (decisions: Standard clients). */
export type OAuthClientKind = 'registered' | 'dynamic' | 'metadata_document';

/** Set on a request made at the authorization endpoint by a standard OAuth client (an MCP host). */
export interface AuthorizeOrigin {
  /** the authorization server's interaction that resumes once the person decides */
  interaction: string;
  /** where the client's authorization code goes: shown to the person */
  redirect_uri: string;
  client_kind: OAuthClientKind;
  client_name: string | null;
  /** the instances named by the request's resource values: ticked for their owner */
  suggested_instance_ids: string[];
  /** the request's RFC 8707 resource values (none: the whole service); absent on older records */
  resources?: string[];
}

export interface AccessRequestRecord {
  id: string;
  app_client_id: string;
  flow_type: 'popup' | 'redirect';
  requested_role: AppRole;
  requested: { version: '1'; mcp_servers: { url: string }[] };
  redirect_url: string | null;
  status: AccessRequestStatus;
  created_at: string;
  expires_at: string;
  updated_at: string;
  approved_role: AppRole | null;
  approved: { version: '1'; mcp_servers: ApprovedMcpServer[] } | null;
  /** the approver, who becomes the request's user; also set on deny */
  user_id: string | null;
  decided_at: string | null;
  revoked_at: string | null;
  revoked_by: string | null;
  failure_reason: string | null;
  /** present when the request was made at the authorization endpoint */
  authorize?: AuthorizeOrigin;
  /** revoked because a later sign-in of the same app and person, for the same resources, replaced it */
  replaced_by?: string;
  /** what the person set on the grant; a missing or null field is no limit */
  limits?: { requests_per_minute: number | null; tokens_per_day: number | null };
  /**
   * The person's tool choices, per granted MCP instance: a default for its tools and a choice per
   * tool. Whatever is not set here follows the tool's annotations (src/mcp/policies.ts).
   */
  tool_policies?: Record<string, ToolPolicy>;
  /**
   * Approvals the person said to remember (`remember_minutes`), per granted MCP instance and tool:
   * until then that tool runs without asking. Kept on the grant, so every replica of a team server
   * reads them with the grant, and a change of the tool's choice ends them in the same write.
   */
  remembered?: Record<string, Record<string, RememberedApproval>>;
}

export interface RememberedApproval {
  until: string;
  /** who approved (username) */
  by: string;
  /** the held call whose approval this is */
  call_id: string;
  /** the instance's updated_at when it was approved: the owner changing the instance ends it */
  instance_at: string;
}

/** What a tool of a granted instance may do: run, wait for the person's yes, or never run. */
export type ToolChoice = 'allow' | 'ask' | 'deny';

export interface ToolPolicy {
  default?: ToolChoice;
  tools?: Record<string, ToolChoice>;
}

/** An API key (decisions: API keys): a Bearer credential standing on an approved access request. */
export interface ApiKeyRecord {
  id: string;
  name: string;
  /** the person who made it, and the approver of its access request */
  user_id: string;
  /** whose app_client_id is `svc-key:<id>` */
  access_request_id: string;
  /** sha256 (hex) of the key: the key itself is never stored */
  key_hash: string;
  created_at: string;
  /** null: never expires */
  expires_at: string | null;
  revoked_at: string | null;
}

export interface DbMeta {
  schema: 1;
  created_at: string;
  /** where the master key lives; the daemon refuses to start if it cannot be found there (`team`: every replica is given it) */
  key_backend: 'keychain' | 'file' | 'team';
  /** a sealed known value, to detect a wrong master key before anything is written */
  key_check: string;
  /** sealed cookie-signing keys */
  session_keys: string;
  /**
   * The first admin's id while its generated password has not been shown: set with the account,
   * cleared once the password is printed or set anew (`svc users passwd admin --offline`).
   */
  unshown_password_user?: string | null;
}

/** db.json as a whole, the way a file read whole (not streamed) comes back. */
export interface Db {
  meta: DbMeta | null;
  users: UserRecord[];
  sessions: SessionRecord[];
  mcp_instances: McpInstanceRecord[];
  access_requests: AccessRequestRecord[];
  /** absent from a file an older svc wrote, as are the ones below */
  api_keys?: ApiKeyRecord[];
  /** the other features' collections, typed in records.ts */
  oauth_clients?: unknown[];
  oauth_state?: unknown[];
  providers?: unknown[];
  model_aliases?: unknown[];
  model_pulls?: unknown[];
  mcp_tools?: Record<string, unknown>;
  /** unknown keys are preserved */
  [collection: string]: unknown;
}

/**
 * The one check of db.json, loose on purpose: enough to refuse a file that is not ours, never a
 * second schema of every field. The snapshot reader applies it a part at a time as it streams the
 * file (`metaProblem` on the header, `recordProblem` on each record, `requiredCollections` at the
 * end), so a large store never sits in memory twice; `validateDb` applies the same parts to a file
 * read whole. Each answers what is wrong, or null.
 */
export function metaProblem(meta: unknown): string | null {
  if (meta === null) return null;
  return isPlainObject(meta) && meta.schema === 1 ? null : 'not a meta record';
}

/** What is wrong with one record of `collection`, or null. */
export function recordProblem(collection: string, record: unknown): string | null {
  if (!isPlainObject(record)) return 'expected object';
  const r = record;
  const str = (k: string) => (typeof r[k] === 'string' ? null : `${k}: expected string`);
  switch (collection) {
    case 'users':
      return str('id') ?? str('username');
    case 'sessions':
      return str('id_hash');
    case 'mcp_instances':
      return str('id') ?? commandProblem(r.command);
    case 'access_requests':
      return str('id') ?? ((accessRequestStatuses as readonly unknown[]).includes(r.status) ? null : 'status: invalid');
    case 'api_keys':
      return str('id') ?? str('key_hash');
    default:
      return null;
  }
}

/** What is wrong with an instance's `command` (absent is fine: an HTTP instance), or null. */
function commandProblem(command: unknown): string | null {
  if (command === undefined) return null;
  if (!isPlainObject(command)) return 'command: expected object';
  if (typeof command.command !== 'string') return 'command.command: expected string';
  if (!Array.isArray(command.args) || !command.args.every((a) => typeof a === 'string')) return 'command.args: expected array of strings';
  if (!Array.isArray(command.env)) return 'command.env: expected array';
  return null;
}

/** The same checks on a whole document; the value itself is kept (a large store is not held twice). */
export function validateDb(value: unknown): { ok: true; data: Db } | { ok: false; reason: string } {
  const reason = dbProblem(value);
  return reason === null ? { ok: true, data: value as Db } : { ok: false, reason };
}

function dbProblem(value: unknown): string | null {
  if (!isPlainObject(value)) return '(root): expected object';
  const meta = metaProblem(value.meta);
  if (meta) return `meta: ${meta}`;
  for (const name of requiredCollections) if (value[name] === undefined) return `${name}: missing`;
  for (const [name, records] of Object.entries(value)) {
    if (!isCollection(name)) continue;
    if (COLLECTION_KEYS[name] === null) {
      if (!isPlainObject(records)) return `${name}: expected object`;
      continue;
    }
    if (!Array.isArray(records)) return `${name}: expected array`;
    for (let i = 0; i < records.length; i++) {
      const problem = recordProblem(name, records[i]);
      if (problem) return `${name}.${i}: ${problem}`;
    }
  }
  return null;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The collections every snapshot has. */
export const requiredCollections = ['users', 'sessions', 'mcp_instances', 'access_requests'] as const;
