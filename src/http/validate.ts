import { z } from 'zod';
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

/**
 * A schema checked on every call of the data plane, compiled by zod (`z.compile`). A valid value
 * runs generated code, with no per-node dispatch. An invalid one is then parsed by the schema's
 * own parser, so its error is the one the schema gives (and a refused body costs both). Same
 * schema, same answers; only the cost differs. Inside the daemon the chat body's parse read 26 µs
 * uncompiled, most of a call's zod. A schema zod cannot compile is handed back unchanged; the data
 * plane's are held to compiling in their tests. The OpenAPI document is built from the schema
 * itself, not from this copy.
 */
export function compiledSchema<S extends z.ZodType>(schema: S): S {
  return z.compile(schema) as S;
}

function throwInvalid(code: string, message: string, param?: string): never {
  // zod issues carry their code in params.code: one of the catalogue's 400 codes (schemas.ts `coded`)
  throw new AppError(code as ErrorCode, message, { param });
}

/**
 * How deep svc takes a JSON value that it keeps or sends on as it is (a tool's arguments, an
 * alias's defaults, an MCP message): deeper than any real one, and far from where serializing it
 * again (JSON.stringify recurses) would run out of stack.
 */
export const MAX_JSON_DEPTH = 100;

/** Whether `value` nests at most `max` arrays and objects; measured without recursion, so any depth can be measured. */
export function nestedAtMost(value: unknown, max: number): boolean {
  const pending: [unknown, number][] = [[value, 0]];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const [v, depth] = next;
    if (v === null || typeof v !== 'object') continue;
    if (depth >= max) return false;
    for (const child of Object.values(v)) pending.push([child, depth + 1]);
  }
  return true;
}

/** Any JSON value nested at most MAX_JSON_DEPTH deep. */
export const jsonValue = z.unknown().refine((v) => nestedAtMost(v, MAX_JSON_DEPTH), `nested more than ${MAX_JSON_DEPTH} levels deep`);
