/**
 * The one error type of svc. The Koa error middleware turns it into the OpenAI-shaped body of
 * CONTRACT §5, and the CLI maps its status to an exit code, so both read the same fields.
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

export interface ErrorBody {
  error: { message: string; type: ErrorType; code: string; param?: string };
}

export class AppError extends Error {
  readonly status: number;
  readonly type: ErrorType;
  readonly code: string;
  readonly param?: string;
  /** Extra response headers (Retry-After, WWW-Authenticate). */
  readonly headers: Record<string, string>;
  /** Whether the message may be shown to the client; internal errors never are. */
  readonly expose: boolean;

  constructor(
    status: number,
    type: ErrorType,
    code: string,
    message: string,
    opts: { param?: string; headers?: Record<string, string>; expose?: boolean; cause?: unknown } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'AppError';
    this.status = status;
    this.type = type;
    this.code = code;
    this.param = opts.param;
    this.headers = opts.headers ?? {};
    this.expose = opts.expose ?? status < 500;
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

export const invalidBody = (message: string, param?: string) =>
  new AppError(400, 'invalid_request_error', 'invalid_body', message, { param });

export const notFound = (message = 'Not found') => new AppError(404, 'not_found_error', 'not_found', message);

export const loginRequired = () =>
  new AppError(401, 'authentication_error', 'login_required', 'Not logged in.');

export const forbidden = (message: string, code = 'forbidden') =>
  new AppError(403, 'forbidden_error', code, message);

export const conflict = (code: string, message: string) => new AppError(409, 'conflict_error', code, message);

export const rateLimited = (retryAfterSeconds: number) =>
  new AppError(429, 'rate_limit_error', 'rate_limited', 'Too many requests; slow down.', {
    headers: { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterSeconds))) },
  });

export const payloadTooLarge = (limit: number) =>
  new AppError(413, 'invalid_request_error', 'payload_too_large', `Request body is larger than ${limit} bytes.`);

export const internalError = (cause?: unknown) =>
  new AppError(500, 'server_error', 'internal_error', 'Internal error', { expose: false, cause });
