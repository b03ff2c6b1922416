import type { z } from 'zod';
import { AppError, type ErrorCode } from '../errors.js';

/**
 * Parses with a zod schema; a failure is a 400 naming the offending field. An issue raised with
 * `params.code` (unsupported_version, missing_redirect_url, ...) carries that wire code and wins
 * over generic ones, so a client can switch on it.
 */
export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown, where: 'body' | 'query' | 'path'): z.output<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  if (where === 'body' && (value === undefined || value === null || typeof value !== 'object')) {
    return throwInvalid('invalid_body', 'The request body must be a JSON object, sent as Content-Type: application/json.');
  }
  const issues = parsed.error.issues;
  const issue = issues.find((i) => typeof (i as { params?: { code?: unknown } }).params?.code === 'string') ?? issues[0];
  const code = ((issue as { params?: { code?: string } }).params?.code ?? 'invalid_body') as string;
  const param = issue.path.length > 0 ? issue.path.join('.') : undefined;
  const subject = param ? `${where === 'body' ? '' : `${where} `}${param}` : where === 'body' ? 'request body' : where;
  const message = code === 'invalid_body' ? `Invalid ${subject}: ${issue.message}` : issue.message;
  return throwInvalid(code, message, param);
}

function throwInvalid(code: string, message: string, param?: string): never {
  // zod issues carry their code in params.code: one of the catalogue's 400 codes (schemas.ts `coded`)
  throw new AppError(code as ErrorCode, message, { param });
}
