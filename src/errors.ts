/**
 * The one error type of svc. The Koa error middleware turns it into the OpenAI-shaped body
 * (docs/decisions.md, Errors), and the CLI maps its status to an exit code, so both read the same fields.
 */
export type ErrorType =
  | 'invalid_request_error'
  | 'not_found_error'
  | 'authentication_error'
  | 'forbidden_error'
  | 'conflict_error'
  | 'rate_limit_error'
  | 'upstream_error'
  | 'server_error';

/**
 * Every error code svc answers with, its status and type (decisions: Errors), and when it is answered:
 * the one list that AppError, the CLI's exit codes (by status) and the OpenAPI error responses
 * read. `status: 'upstream'` marks the one code whose status is the upstream's own.
 */
export const ERROR_CODES = {
  invalid_body: { status: 400, type: 'invalid_request_error', when: 'the body, query or path is not what the endpoint takes' },
  missing_redirect_url: { status: 400, type: 'invalid_request_error', when: 'flow_type redirect without redirect_url' },
  invalid_redirect_url: { status: 400, type: 'invalid_request_error', when: 'redirect_url not allowed (scheme, credentials, fragment, not a registered redirect URI)' },
  unsupported_version: { status: 400, type: 'invalid_request_error', when: 'requested.version missing or not "1"' },
  mcp_instance_disabled: { status: 400, type: 'invalid_request_error', when: 'the MCP instance is disabled by its owner' },
  invalid_host: { status: 400, type: 'invalid_request_error', when: 'a Host header svc does not answer to (DNS rebinding)' },
  header_mismatch: { status: 400, type: 'invalid_request_error', when: 'Mcp-Method or Mcp-Name disagree with the checked body' },
  ambiguous_id: { status: 400, type: 'invalid_request_error', when: 'an id prefix matches more than one record' },
  mcp_command_failed: { status: 400, type: 'invalid_request_error', when: 'a command MCP server that did not start and answer initialize when tried on add or change (the message names the command and its exit); nothing was stored' },
  address_not_allowed: { status: 400, type: 'invalid_request_error', when: 'an app asked svc to fetch from a non-public address' },
  login_required: { status: 401, type: 'authentication_error', when: 'no session' },
  invalid_credentials: { status: 401, type: 'authentication_error', when: 'wrong username or password' },
  invalid_token: { status: 401, type: 'authentication_error', when: 'Bearer token missing, malformed, bad signature, wrong iss/aud/typ, expired, or its grant gone' },
  forbidden: { status: 403, type: 'forbidden_error', when: 'your account may not do this' },
  cross_origin: { status: 403, type: 'forbidden_error', when: 'a state-changing session call from another origin' },
  invalid_csrf_token: { status: 403, type: 'forbidden_error', when: 'a form without the session CSRF token' },
  privilege_escalation: { status: 403, type: 'forbidden_error', when: 'a role above the requested one or above what the reviewer may grant' },
  mcp_instance_not_owned: { status: 403, type: 'forbidden_error', when: 'an MCP instance that is not the reviewer\'s, or not for that URL' },
  insufficient_scope: { status: 403, type: 'forbidden_error', when: 'the grant\'s role is too low for the endpoint' },
  origin_not_allowed: { status: 403, type: 'forbidden_error', when: 'a browser origin the app did not register' },
  tool_not_allowed: { status: 403, type: 'forbidden_error', when: 'a tool outside the instance\'s allow-list' },
  alias_not_owned: { status: 403, type: 'forbidden_error', when: 'an alias another user made' },
  not_found: { status: 404, type: 'not_found_error', when: 'no such record (or not yours)' },
  // OpenAI's own answer for an unknown model: a 404 whose type is invalid_request_error
  model_not_found: { status: 404, type: 'invalid_request_error', when: 'no provider or alias serves that model id' },
  tool_not_found: { status: 404, type: 'not_found_error', when: 'the MCP server has no such tool' },
  // OpenAI's own answer for a URL it does not serve: a 404 whose type is invalid_request_error
  unsupported_endpoint: { status: 404, type: 'invalid_request_error', when: 'svc does not proxy that OpenAI endpoint (moderations, images, audio, a stored response by id), or the provider does not serve it' },
  method_not_allowed: { status: 405, type: 'invalid_request_error', when: 'an HTTP method the endpoint does not take' },
  already_processed: { status: 409, type: 'conflict_error', when: 'the request was already decided' },
  expired: { status: 409, type: 'conflict_error', when: 'the draft expired' },
  not_approved: { status: 409, type: 'conflict_error', when: 'only an approved request can be revoked' },
  already_revoked: { status: 409, type: 'conflict_error', when: 'already revoked' },
  user_exists: { status: 409, type: 'conflict_error', when: 'that username is taken' },
  last_admin: { status: 409, type: 'conflict_error', when: 'the last admin cannot be removed or demoted' },
  password_shown: { status: 409, type: 'conflict_error', when: 'the first password was already shown' },
  provider_exists: { status: 409, type: 'conflict_error', when: 'a provider of that name exists' },
  model_id_taken: { status: 409, type: 'conflict_error', when: 'the model id is another user\'s alias or a provider\'s model' },
  download_in_progress: { status: 409, type: 'conflict_error', when: 'that file is already being downloaded' },
  file_exists: { status: 409, type: 'conflict_error', when: 'a file of that name exists' },
  download_quota_exceeded: { status: 409, type: 'conflict_error', when: 'the user\'s download quota is used up' },
  too_many_keys: { status: 409, type: 'conflict_error', when: 'the person has 100 live API keys' },
  not_pending: { status: 409, type: 'conflict_error', when: 'a held tool call that was already decided, expired or ended' },
  request_timeout: { status: 408, type: 'invalid_request_error', when: 'the request line, headers or body did not arrive in time' },
  payload_too_large: { status: 413, type: 'invalid_request_error', when: 'the body is over the limit' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error', when: 'an MCP body that is not UTF-8 JSON' },
  headers_too_large: { status: 431, type: 'invalid_request_error', when: 'the request line and headers are over 16 KiB (a very long URL or cookie)' },
  rate_limited: { status: 429, type: 'rate_limit_error', when: 'a rate or concurrency limit (Retry-After)' },
  grant_rate_limited: { status: 429, type: 'rate_limit_error', when: "the grant's calls a minute, as the person set them (Retry-After)" },
  grant_token_budget_exhausted: { status: 429, type: 'rate_limit_error', when: "the grant's tokens for today, as the person set them (Retry-After: local midnight)" },
  too_many_drafts: { status: 429, type: 'rate_limit_error', when: 'the caps on undecided drafts (Retry-After)' },
  client_closed: { status: 499, type: 'invalid_request_error', when: 'the client went away' },
  internal_error: { status: 500, type: 'server_error', when: 'a fault of svc (never a client\'s mistake)' },
  processing_failed: { status: 500, type: 'server_error', when: 'a decision failed; the request is now failed' },
  upstream_rejected: { status: 'upstream', type: 'upstream_error', when: 'the upstream refused the call (its own 4xx, or 502 when it refused svc\'s credentials)' },
  upstream_unavailable: { status: 502, type: 'upstream_error', when: 'the upstream could not be reached or broke off' },
  store_unavailable: { status: 503, type: 'server_error', when: 'the change could not be saved; nothing changed' },
  issuer_unavailable: { status: 503, type: 'upstream_error', when: 'the external issuer\'s keys cannot be fetched (Retry-After)' },
  starting: { status: 503, type: 'server_error', when: 'the daemon is still starting (Retry-After)' },
  too_many_streams: { status: 503, type: 'server_error', when: 'svc holds as many open MCP streams as --max-streams allows (Retry-After)' },
  upstream_busy: { status: 503, type: 'upstream_error', when: "every connection to the upstream was busy for the call's whole timeout (Retry-After)" },
  upstream_timeout: { status: 504, type: 'upstream_error', when: 'the upstream did not answer in time' },
} as const satisfies Record<string, { status: number | 'upstream'; type: ErrorType; when: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** The codes answered with a status, for the OpenAPI error responses. */
export function codesFor(status: number): ErrorCode[] {
  return (Object.keys(ERROR_CODES) as ErrorCode[]).filter((c) => ERROR_CODES[c].status === status);
}

export interface ErrorBody {
  error: { message: string; type: ErrorType; code: string; param?: string };
}

export class AppError extends Error {
  readonly status: number;
  readonly type: ErrorType;
  readonly code: ErrorCode;
  readonly param?: string;
  /** Extra response headers (Retry-After, WWW-Authenticate). */
  readonly headers: Record<string, string>;
  /** Whether the message may be shown to the client; internal errors never are. */
  readonly expose: boolean;

  /**
   * `code` decides the status and type (ERROR_CODES); `opts.status` is taken only for
   * upstream_rejected, whose status is the upstream's own.
   */
  constructor(
    code: ErrorCode,
    message: string,
    opts: { param?: string; headers?: Record<string, string>; expose?: boolean; cause?: unknown; status?: number; type?: ErrorType } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    const entry = ERROR_CODES[code];
    this.name = 'AppError';
    // an upstream's own refusal keeps its status and says what kind it was (404: not_found_error)
    this.status = entry.status === 'upstream' ? (opts.status ?? 502) : entry.status;
    this.type = entry.status === 'upstream' ? (opts.type ?? entry.type) : entry.type;
    this.code = code;
    this.param = opts.param;
    this.headers = opts.headers ?? {};
    this.expose = opts.expose ?? this.status < 500;
  }

  /**
   * An error as the daemon answered it, for the CLI: the daemon's status, type and code stand as
   * they came (a daemon of another version may know codes this CLI does not).
   */
  static fromWire(status: number, type: ErrorType, code: string, message: string, param?: string): AppError {
    const err = new AppError('internal_error', message, { param, expose: true });
    return Object.assign(err, { status, type, code: code as ErrorCode });
  }

  toBody(): ErrorBody {
    const error: ErrorBody['error'] = {
      message: this.expose ? this.message : 'Internal error',
      type: this.type,
      code: this.code,
    };
    if (this.param !== undefined) error.param = this.param;
    return { error };
  }
}

export const invalidBody = (message: string, param?: string) => new AppError('invalid_body', message, { param });

export const notFound = (message = 'Not found') => new AppError('not_found', message);

export const loginRequired = () => new AppError('login_required', 'Not logged in.');

export const forbidden = (message: string, code: ErrorCode = 'forbidden') => new AppError(code, message);

export const conflict = (code: ErrorCode, message: string) => new AppError(code, message);

export const rateLimited = (retryAfterSeconds: number) =>
  new AppError('rate_limited', 'Too many requests; slow down.', {
    headers: { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterSeconds))) },
  });

export const payloadTooLarge = (limit: number) =>
  new AppError('payload_too_large', `Request body is larger than ${limit} bytes.`);

export const internalError = (cause?: unknown) =>
  new AppError('internal_error', 'Internal error', { expose: false, cause });
