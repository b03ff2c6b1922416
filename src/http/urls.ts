import { z } from 'zod';

/**
 * An absolute http(s) URL, no credentials in it, normalised (WHATWG) so that two spellings of
 * one server compare equal when a request's URL is matched to an instance's.
 */
export const MAX_URL_LENGTH = 2048;

/**
 * Characters a URL that is stored and later shown or matched must not hold: the WHATWG parser
 * silently drops tabs and newlines and trims controls, and invisible (format) characters read as
 * something else, so what was checked would not be what is shown.
 */
const UNSAFE_IN_URL = /[\p{Cc}\p{Cf}\p{Cs}\p{Z}\s]/u;

/** Whether `value` holds a control, whitespace, invisible (format) character or lone surrogate. */
export const hasUnsafeUrlCharacter = (value: string): boolean => UNSAFE_IN_URL.test(value);

/** `value` as an absolute http(s) URL, normalised; an issue on `ctx` (and z.NEVER) when it is not one. */
function normalHttpUrl(value: string, ctx: z.RefinementCtx): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    ctx.addIssue({ code: 'custom', message: 'must be an absolute URL' });
    return z.NEVER;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    ctx.addIssue({ code: 'custom', message: 'must be an http or https URL' });
    return z.NEVER;
  }
  if (url.username || url.password) {
    ctx.addIssue({ code: 'custom', message: 'must not carry credentials (use --header for them)' });
    return z.NEVER;
  }
  url.hash = '';
  // normalising can lengthen it (percent-encoding); the cap holds for what is stored
  if (url.href.length > MAX_URL_LENGTH) {
    ctx.addIssue({ code: 'custom', message: `must be at most ${MAX_URL_LENGTH} characters` });
    return z.NEVER;
  }
  return url.href;
}

export const httpUrl = z
  .string()
  .max(MAX_URL_LENGTH)
  .transform(normalHttpUrl)
  .meta({ format: 'uri', description: 'Absolute http(s) URL without credentials' });

/**
 * A command server's app-facing name: `stdio://` and a host of letters, digits, `.`, `_` and `-`,
 * with an optional path of the same and `/` and `~`. Nothing else (no port, query, credentials or
 * percent-encoding), so what is stored, shown and matched is one spelling; the scheme and host
 * compare case-insensitively and are stored lowercased, the path as given.
 */
const STDIO_URL = /^stdio:\/\/([A-Za-z0-9._-]{1,253})(\/[A-Za-z0-9._~/-]*)?$/i;

/** `value` as a stdio URL, normalised; an issue on `ctx` (and z.NEVER) when it is not one. */
function normalStdioUrl(value: string, ctx: z.RefinementCtx): string {
  const m = STDIO_URL.exec(value);
  if (!m) {
    ctx.addIssue({ code: 'custom', message: 'must be stdio://NAME, NAME of letters, digits, ".", "_" and "-" (optionally a /path of the same)' });
    return z.NEVER;
  }
  return `stdio://${m[1].toLowerCase()}${m[2] ?? ''}`;
}

/** Whether a stored or requested MCP server URL names a command server (stdio://) rather than an HTTP one. */
export const isStdioUrl = (value: string): boolean => /^stdio:/i.test(value);

/**
 * The URL an MCP server is named by in access requests, API keys and grants: an http(s) URL as
 * `httpUrl` takes it, or a command server's `stdio://NAME` (normalised the same way every time, so
 * an app's request matches the instance's URL exactly).
 */
export const mcpServerUrl = z
  .string()
  .max(MAX_URL_LENGTH)
  .transform((value, ctx) => (isStdioUrl(value) ? normalStdioUrl(value, ctx) : normalHttpUrl(value, ctx)))
  .meta({ format: 'uri', description: 'An MCP server URL: absolute http(s) without credentials, or stdio://NAME for a command server svc runs' });
