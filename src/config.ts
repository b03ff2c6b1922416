import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { KeyBackendPreference } from './store/master-key.js';
import { isDatabaseUrl, redactDatabaseUrl } from './store/postgres/url.js';

/** A value no log line, message or output may show (a password inside a URL, a key): it prints as [redacted]. */
export class Secret {
  readonly #value: string;
  constructor(value: string) {
    this.#value = value;
  }
  reveal(): string {
    return this.#value;
  }
  toString(): string {
    return '[redacted]';
  }
  toJSON(): string {
    return '[redacted]';
  }
  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return 'Secret([redacted])';
  }
}

/** Where a team server's master key comes from: a file, or SVC_MASTER_KEY itself. */
export type MasterKeySource = { file: string } | { value: Secret };

export interface Config {
  host: string;
  port: number;
  dataDir: string;
  /** The public base URL; when unset it is derived from host and the bound port. */
  baseUrl: string | null;
  /** Requests a minute per app_client_id on unauthenticated endpoints; 0 turns it off. */
  rateLimitClient: number;
  /** Requests a minute per remote address on unauthenticated endpoints; 0 turns it off. */
  rateLimitAddress: number;
  /** Polls a minute per (remote address, access request id); 0 turns it off. */
  rateLimitPoll: number;
  keychain: KeyBackendPreference;
  logLevel: string;
  /** `human` lines (a terminal) or `json` lines; `auto` is human when stdout is a terminal */
  logFormat: 'auto' | 'human' | 'json';
  /** Largest JSON body accepted, in bytes. */
  bodyLimit: number;
  /** An external authorization server; null runs the embedded one. */
  issuer: string | null;
  /** The audience external tokens must carry (defaults to the base URL). */
  audience: string | null;
  /** Accept `typ: JWT` access tokens from the external issuer (Keycloak and others). */
  allowJwtTyp: boolean;
  /** How long an MCP server may take to answer (tool calls, the proxy's POSTs), in ms. */
  mcpTimeoutMs: number;
  /** How long a translated /v1/messages stream may be quiet before svc sends a `ping` event, in ms. */
  messagesPingMs: number;
  /** Fetch Client ID Metadata Documents from loopback and private addresses too (development, tests). */
  clientMetadataAllowLoopback: boolean;
  /** Dynamic client registrations a minute per address; 0 turns the limit off. */
  rateLimitRegistration: number;
  /** At most this many self-registered clients at once; 0 turns registration off. */
  dynamicClientMax: number;
  /** At most this many self-registered clients registered from one address; 0 = only the total cap. */
  dynamicClientMaxPerAddress: number;
  /** Self-registered clients unused this many days are removed; 0 keeps them. */
  dynamicClientRetentionDays: number;
  /** Expired, denied and failed access requests are removed after this many days; 0 keeps them. */
  requestRetentionDays: number;
  /** Revoked access requests are removed after this many days; 0 keeps them. */
  revokedRetentionDays: number;
  /** Upstream calls one grant may have in flight, and MCP streams it may hold open (0 = no limit). */
  grantConcurrency: number;
  grantStreams: number;
  /** Open MCP streams the daemon holds at once, all grants together (503 beyond). */
  maxStreams: number;
  /** A command server's process idle this many seconds is ended (`--stdio-idle-timeout`). */
  stdioIdleTimeoutS: number;
  /** At most this many command server processes of one instance, and in all (503 beyond). */
  stdioMaxProcesses: number;
  stdioMaxProcessesTotal: number;
  /** Activity events older than this many days go (0 keeps them), and at most this many are kept. */
  activityRetentionDays: number;
  activityMaxEvents: number;
  /** false: no activity is recorded (nothing of what apps do is kept; per-day token limits then count nothing) */
  activity: boolean;
  /** Undecided drafts per app_client_id, and in all (429 beyond). */
  maxDraftsPerClient: number;
  maxDrafts: number;
  /** Disk each user's model downloads may take, in bytes; 0 is no limit. */
  downloadQuotaBytes: number;
  /** Non-public networks (CIDR) that downloads started by app tokens may still reach, e.g. a LAN mirror. */
  downloadAllowNetworks: string[];
  /** Desktop notifications of held tool calls and new access requests (notify-send, osascript). */
  notify: boolean;
  /** How long a held tool call waits for the person's decision, in seconds. */
  callApprovalTimeoutS: number;
  /**
   * svc runs behind a reverse proxy or load balancer that appends the client's address to
   * X-Forwarded-For: per-address limits and the login backoff count that address, not the proxy's.
   */
  trustProxy: boolean;
  /** A team server: all state in PostgreSQL at this URL (which may hold its password), not in the data dir's store. */
  database: Secret | null;
  /** The team's master key, only read with `database` (a file store keeps its key in the keychain or master.key). */
  masterKey: MasterKeySource | null;
}

export interface ConfigFlags {
  host?: string;
  port?: string | number;
  dataDir?: string;
  baseUrl?: string;
  rateLimitClient?: string | number;
  rateLimitAddress?: string | number;
  rateLimitPoll?: string | number;
  keychain?: string;
  logLevel?: string;
  logFormat?: string;
  issuer?: string;
  audience?: string;
  allowJwtTyp?: boolean;
  clientMetadataAllowLoopback?: boolean;
  rateLimitRegistration?: string | number;
  dynamicClientMax?: string | number;
  dynamicClientMaxPerAddress?: string | number;
  dynamicClientRetentionDays?: string | number;
  requestRetentionDays?: string | number;
  revokedRetentionDays?: string | number;
  grantConcurrency?: string | number;
  grantStreams?: string | number;
  maxStreams?: string | number;
  stdioIdleTimeout?: string | number;
  stdioMaxProcesses?: string | number;
  stdioMaxProcessesTotal?: string | number;
  activityRetentionDays?: string | number;
  activityMaxEvents?: string | number;
  activity?: boolean;
  maxDraftsPerClient?: string | number;
  maxDrafts?: string | number;
  downloadQuota?: string;
  downloadAllowNetworks?: string;
  /** commander's `--no-notify`: false when given (true, its default, means not given) */
  notify?: boolean;
  callApprovalTimeout?: string | number;
  trustProxy?: boolean;
  database?: string;
  masterKeyFile?: string;
}

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

export const DEFAULT_PORT = 7878;

export function defaultDataDir(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_DATA_HOME;
  const base = xdg && path.isAbsolute(xdg) ? xdg : path.join(env.HOME || os.homedir(), '.local', 'share');
  return path.join(base, 'svc');
}

function integer(value: string | number, name: string, min: number, max: number): number {
  const n = typeof value === 'number' ? value : Number(value);
  if (!Number.isInteger(n) || n < min || n > max) throw new ConfigError(`${name} must be a whole number from ${min} to ${max}, not "${value}".`);
  return n;
}

function baseUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(`--base-url must be an absolute http(s) URL, not "${value}".`);
  }
  if (!['http:', 'https:'].includes(url.protocol) || url.username || url.password || url.search || url.hash) {
    throw new ConfigError('--base-url must be an http(s) URL with no credentials, query or fragment.');
  }
  return url.href.replace(/\/+$/, '');
}

/**
 * An issuer identifier, kept exactly as given: OpenID Discovery and RFC 8414 compare it by string
 * equality with the discovery document's `issuer` and the tokens' `iss`, and some issuers (Auth0)
 * end theirs with a slash.
 */
function absoluteUrl(value: string, name: string): string {
  try {
    const url = new URL(value);
    if (url.protocol === 'http:' || url.protocol === 'https:') return value;
  } catch {
    /* below */
  }
  throw new ConfigError(`${name} must be an absolute http(s) URL, not "${value}".`);
}

const SIZE_UNITS: Record<string, number> = { '': 1, b: 1, k: 2 ** 10, kb: 2 ** 10, kib: 2 ** 10, m: 2 ** 20, mb: 2 ** 20, mib: 2 ** 20, g: 2 ** 30, gb: 2 ** 30, gib: 2 ** 30, t: 2 ** 40, tb: 2 ** 40, tib: 2 ** 40 };

/** `50GiB`, `500M`, `1.5T`, `0`: units are powers of 1024 whichever way they are spelt. */
export function parseSize(value: string, name: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(value);
  const unit = m ? SIZE_UNITS[m[2].toLowerCase()] : undefined;
  if (!m || unit === undefined) throw new ConfigError(`${name} must be a size such as 50GiB, 500MiB or 0, not "${value}".`);
  return Math.floor(Number(m[1]) * unit);
}

function networks(value: string, name: string): string[] {
  const list = value.split(',').map((s) => s.trim()).filter(Boolean);
  for (const item of list) {
    const [net, bits] = item.split('/');
    const family = isIP(net);
    const max = family === 4 ? 32 : 128;
    if (!family || (bits !== undefined && !(/^\d+$/.test(bits) && Number(bits) <= max))) throw new ConfigError(`${name} takes IP addresses or CIDR networks separated by commas, not "${item}".`);
  }
  return list;
}

/** --database and the team's master key; the URL is only ever named without its password. */
function teamSettings(flags: ConfigFlags, env: NodeJS.ProcessEnv): Pick<Config, 'database' | 'masterKey'> {
  const url = flags.database ?? (env.SVC_DATABASE_URL || undefined);
  if (url === undefined) {
    if (flags.masterKeyFile !== undefined) throw new ConfigError('--master-key-file goes with --database: a file store keeps its master key in the OS keychain or master.key.');
    return { database: null, masterKey: null };
  }
  if (!isDatabaseUrl(url)) throw new ConfigError(`--database must be a postgres:// URL, not "${redactDatabaseUrl(url)}".`);
  const file = flags.masterKeyFile;
  const value = env.SVC_MASTER_KEY;
  const masterKey: MasterKeySource | null = file !== undefined ? { file: path.resolve(file) } : value ? { value: new Secret(value) } : null;
  return { database: new Secret(url), masterKey };
}

function logFormat(value: string): Config['logFormat'] {
  if (value === 'auto' || value === 'human' || value === 'json') return value;
  throw new ConfigError(`--log-format must be auto, human or json, not "${value}".`);
}

/** Flags > environment > defaults (decisions: Configuration). */
export function resolveConfig(flags: ConfigFlags = {}, env: NodeJS.ProcessEnv = process.env): Config {
  const pick = <T>(flag: T | undefined, envName: string): T | string | undefined =>
    flag !== undefined ? flag : env[envName] !== undefined && env[envName] !== '' ? env[envName] : undefined;
  const keychain = String(pick(flags.keychain, 'SVC_KEYCHAIN') ?? 'auto');
  if (!['auto', 'keychain', 'file'].includes(keychain)) throw new ConfigError(`--keychain must be auto, keychain or file, not "${keychain}".`);
  const rawBase = pick(flags.baseUrl, 'SVC_BASE_URL');
  const issuer = pick(flags.issuer, 'SVC_ISSUER');
  const audience = pick(flags.audience, 'SVC_AUDIENCE');
  if (audience !== undefined && issuer === undefined) throw new ConfigError('--audience goes with --issuer.');
  return {
    host: String(pick(flags.host, 'SVC_HOST') ?? '127.0.0.1'),
    port: integer(pick(flags.port, 'SVC_PORT') ?? DEFAULT_PORT, 'port', 0, 65535),
    dataDir: path.resolve(String(pick(flags.dataDir, 'SVC_HOME') ?? defaultDataDir(env))),
    baseUrl: rawBase === undefined ? null : baseUrl(String(rawBase)),
    rateLimitClient: integer(pick(flags.rateLimitClient, 'SVC_RATE_LIMIT_CLIENT') ?? 60, 'rate-limit-client', 0, 1_000_000),
    rateLimitAddress: integer(pick(flags.rateLimitAddress, 'SVC_RATE_LIMIT_ADDRESS') ?? 600, 'rate-limit-address', 0, 1_000_000),
    rateLimitPoll: integer(pick(flags.rateLimitPoll, 'SVC_RATE_LIMIT_POLL') ?? 120, 'rate-limit-poll', 0, 1_000_000),
    keychain: keychain as KeyBackendPreference,
    logLevel: String(pick(flags.logLevel, 'SVC_LOG_LEVEL') ?? 'info'),
    logFormat: logFormat(String(pick(flags.logFormat, 'SVC_LOG_FORMAT') ?? 'auto')),
    bodyLimit: 1024 * 1024,
    issuer: issuer === undefined ? null : absoluteUrl(String(issuer), '--issuer'),
    audience: audience === undefined ? null : String(audience),
    allowJwtTyp: Boolean(flags.allowJwtTyp) || env.SVC_ALLOW_JWT_TYP === '1' || env.SVC_ALLOW_JWT_TYP === 'true',
    mcpTimeoutMs: integer(env.SVC_MCP_TIMEOUT_MS ?? 30_000, 'SVC_MCP_TIMEOUT_MS', 100, 3_600_000),
    messagesPingMs: integer(env.SVC_MESSAGES_PING_MS ?? 10_000, 'SVC_MESSAGES_PING_MS', 10, 600_000),
    clientMetadataAllowLoopback: Boolean(flags.clientMetadataAllowLoopback) || env.SVC_CLIENT_METADATA_ALLOW_LOOPBACK === '1' || env.SVC_CLIENT_METADATA_ALLOW_LOOPBACK === 'true',
    rateLimitRegistration: integer(pick(flags.rateLimitRegistration, 'SVC_RATE_LIMIT_REGISTRATION') ?? 10, 'rate-limit-registration', 0, 1_000_000),
    dynamicClientMax: integer(pick(flags.dynamicClientMax, 'SVC_DYNAMIC_CLIENT_MAX') ?? 500, 'dynamic-client-max', 0, 1_000_000),
    dynamicClientMaxPerAddress: integer(pick(flags.dynamicClientMaxPerAddress, 'SVC_DYNAMIC_CLIENT_MAX_PER_ADDRESS') ?? 100, 'dynamic-client-max-per-address', 0, 1_000_000),
    dynamicClientRetentionDays: integer(pick(flags.dynamicClientRetentionDays, 'SVC_DYNAMIC_CLIENT_RETENTION_DAYS') ?? 30, 'dynamic-client-retention-days', 0, 36_500),
    requestRetentionDays: integer(pick(flags.requestRetentionDays, 'SVC_REQUEST_RETENTION_DAYS') ?? 7, 'request-retention-days', 0, 36_500),
    revokedRetentionDays: integer(pick(flags.revokedRetentionDays, 'SVC_REVOKED_RETENTION_DAYS') ?? 30, 'revoked-retention-days', 0, 36_500),
    grantConcurrency: integer(pick(flags.grantConcurrency, 'SVC_GRANT_CONCURRENCY') ?? 32, 'grant-concurrency', 0, 100_000),
    grantStreams: integer(pick(flags.grantStreams, 'SVC_GRANT_STREAMS') ?? 8, 'grant-streams', 0, 100_000),
    maxStreams: integer(pick(flags.maxStreams, 'SVC_MAX_STREAMS') ?? defaultMaxStreams(), 'max-streams', 0, 1_000_000),
    stdioIdleTimeoutS: integer(pick(flags.stdioIdleTimeout, 'SVC_STDIO_IDLE_TIMEOUT') ?? 600, 'stdio-idle-timeout', 1, 86_400 * 30),
    stdioMaxProcesses: integer(pick(flags.stdioMaxProcesses, 'SVC_STDIO_MAX_PROCESSES') ?? 16, 'stdio-max-processes', 1, 100_000),
    stdioMaxProcessesTotal: integer(pick(flags.stdioMaxProcessesTotal, 'SVC_STDIO_MAX_PROCESSES_TOTAL') ?? 64, 'stdio-max-processes-total', 1, 100_000),
    activityRetentionDays: integer(pick(flags.activityRetentionDays, 'SVC_ACTIVITY_RETENTION_DAYS') ?? 30, 'activity-retention-days', 0, 36_500),
    activity: flags.activity !== false && env.SVC_ACTIVITY !== '0' && env.SVC_ACTIVITY !== 'false',
    activityMaxEvents: integer(pick(flags.activityMaxEvents, 'SVC_ACTIVITY_MAX_EVENTS') ?? 100_000, 'activity-max-events', 1, 10_000_000),
    maxDraftsPerClient: integer(pick(flags.maxDraftsPerClient, 'SVC_MAX_DRAFTS_PER_CLIENT') ?? 20, 'max-drafts-per-client', 1, 1_000_000),
    maxDrafts: integer(pick(flags.maxDrafts, 'SVC_MAX_DRAFTS') ?? 1000, 'max-drafts', 1, 10_000_000),
    downloadQuotaBytes: parseSize(String(pick(flags.downloadQuota, 'SVC_DOWNLOAD_QUOTA') ?? '50GiB'), 'download-quota'),
    downloadAllowNetworks: networks(String(pick(flags.downloadAllowNetworks, 'SVC_DOWNLOAD_ALLOW_NETWORKS') ?? ''), 'download-allow-networks'),
    notify: flags.notify !== false && !['0', 'false', 'off', 'no'].includes(String(env.SVC_NOTIFY ?? '').toLowerCase()),
    callApprovalTimeoutS: integer(pick(flags.callApprovalTimeout, 'SVC_CALL_APPROVAL_TIMEOUT') ?? 55, 'call-approval-timeout', 1, 86_400),
    trustProxy: flags.trustProxy === true || ['1', 'true', 'on', 'yes'].includes(String(env.SVC_TRUST_PROXY ?? '').toLowerCase()),
    ...teamSettings(flags, env),
  };
}

/** The URL clients use for a daemon bound to host:port. */
export function urlFor(host: string, port: number): string {
  const h = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '[::1]' : host.includes(':') ? `[${host}]` : host;
  return `http://${h}:${port}`;
}

/**
 * As many open streams as the process's file descriptors allow: each holds two (the app's and the
 * upstream's), and a thousand are kept for everything else. Read from /proc on Linux; elsewhere a
 * number that fits the usual limit once raised (the service unit raises it).
 */
export function defaultMaxStreams(limitsFile = '/proc/self/limits'): number {
  let soft = 0;
  try {
    const line = readFileSync(limitsFile, 'utf8').split('\n').find((l) => l.startsWith('Max open files'));
    soft = Number(line?.trim().split(/\s{2,}/)[1]);
  } catch {
    return 4000;
  }
  if (!Number.isFinite(soft) || soft <= 0) return 4000;
  return Math.max(64, Math.min(100_000, Math.floor((soft - 1000) / 2)));
}
