import { z } from 'zod';

import { accessRequestStatuses } from './vocabulary.js';
import type { AccessRequestStatus, AppRole, UserRole } from './vocabulary.js';

/** The shape of db.json. Records are plain JSON; secret fields hold sealed strings only. */
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

export interface McpInstanceRecord {
  id: string;
  owner_id: string;
  name: string;
  url: string;
  enabled: boolean;
  headers: McpHeaderRecord[];
  allow_tools: string[] | null;
  created_at: string;
  updated_at: string;
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

export interface Db {
  meta: DbMeta | null;
  users: UserRecord[];
  sessions: SessionRecord[];
  mcp_instances: McpInstanceRecord[];
  access_requests: AccessRequestRecord[];
  api_keys: ApiKeyRecord[];
  /**
   * The other features' collections, typed by the feature that owns them (through its own
   * accessor); always present, so reading one never writes it into being.
   */
  oauth_clients: unknown[];
  oauth_state: unknown[];
  providers: unknown[];
  model_aliases: unknown[];
  model_pulls: unknown[];
  mcp_tools: Record<string, unknown>;
  /** unknown keys are preserved */
  [collection: string]: unknown;
}

export function emptyDb(): Db {
  return {
    meta: null,
    users: [],
    sessions: [],
    mcp_instances: [],
    access_requests: [],
    api_keys: [],
    oauth_clients: [],
    oauth_state: [],
    providers: [],
    model_aliases: [],
    model_pulls: [],
    mcp_tools: {},
  };
}

/** Loose structural check of a loaded file: enough to refuse a file that is not ours. */
const dbFileSchema = z
  .object({
    meta: z.object({ schema: z.literal(1) }).passthrough().nullable(),
    users: z.array(z.object({ id: z.string(), username: z.string() }).passthrough()),
    sessions: z.array(z.object({ id_hash: z.string() }).passthrough()),
    mcp_instances: z.array(z.object({ id: z.string() }).passthrough()),
    access_requests: z.array(z.object({ id: z.string(), status: z.enum(accessRequestStatuses) }).passthrough()),
    api_keys: z.array(z.object({ id: z.string(), key_hash: z.string() }).passthrough()).optional(),
    oauth_clients: z.array(z.object({}).passthrough()).optional(),
    oauth_state: z.array(z.object({}).passthrough()).optional(),
    providers: z.array(z.object({}).passthrough()).optional(),
    model_aliases: z.array(z.object({}).passthrough()).optional(),
    model_pulls: z.array(z.object({}).passthrough()).optional(),
    mcp_tools: z.record(z.string(), z.unknown()).optional(),
  })
  .passthrough();

export function validateDb(value: unknown): { ok: true; data: Db } | { ok: false; reason: string } {
  const parsed = dbFileSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, reason: `${issue.path.join('.') || '(root)'}: ${issue.message}` };
  }
  // The value itself, not zod's copy of it: a large store is not held twice.
  return { ok: true, data: value as Db };
}

/**
 * The same loose checks, one record at a time, for the snapshot reader that streams db.json
 * record by record (so a large store never sits in memory twice). Answers what is wrong, or null.
 */
export function recordProblem(collection: string, record: unknown): string | null {
  if (!record || typeof record !== 'object' || Array.isArray(record)) return 'expected object';
  const r = record as Record<string, unknown>;
  const str = (k: string) => (typeof r[k] === 'string' ? null : `${k}: expected string`);
  switch (collection) {
    case 'users':
      return str('id') ?? str('username');
    case 'sessions':
      return str('id_hash');
    case 'mcp_instances':
      return str('id');
    case 'access_requests':
      return str('id') ?? ((accessRequestStatuses as readonly unknown[]).includes(r.status) ? null : 'status: invalid');
    case 'api_keys':
      return str('id') ?? str('key_hash');
    default:
      return null;
  }
}

/** The collections every snapshot has. */
export const requiredCollections = ['users', 'sessions', 'mcp_instances', 'access_requests'] as const;
