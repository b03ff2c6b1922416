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

export const httpUrl = z
  .string()
  .max(MAX_URL_LENGTH)
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
    // normalising can lengthen it (percent-encoding); the cap holds for what is stored
    if (url.href.length > MAX_URL_LENGTH) {
      ctx.addIssue({ code: 'custom', message: `must be at most ${MAX_URL_LENGTH} characters` });
      return z.NEVER;
    }
    return url.href;
  })
  .meta({ format: 'uri', description: 'Absolute http(s) URL without credentials' });
