import { z } from 'zod';

/**
 * An absolute http(s) URL, no credentials in it, normalised (WHATWG) so that two spellings of
 * one server compare equal when a request's URL is matched to an instance's.
 */
export const httpUrl = z
  .string()
  .max(2048)
  .transform((value, ctx) => {
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
    return url.href;
  })
  .meta({ format: 'uri', description: 'Absolute http(s) URL without credentials' });

export function normalizeUrl(value: string): string | null {
  const parsed = httpUrl.safeParse(value);
  return parsed.success ? parsed.data : null;
}
