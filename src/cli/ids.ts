import { CliError, EXIT } from './errors.js';

/** The short form every surface shows (the review page, `svc review`, tables on a terminal). */
export const shortId = (id: string) => (/^[0-9a-f]{8}-[0-9a-f-]{27}$/i.test(id) ? id.slice(0, 8) : id);

export const MIN_PREFIX = 6;

/**
 * A full id from what the person typed: the id itself, or a unique prefix of at least 6
 * characters (as git and docker take). An ambiguous prefix is an error that lists the matches.
 */
export function resolveId(typed: string, candidates: string[], what: string): string {
  if (candidates.includes(typed)) return typed;
  if (typed.length < MIN_PREFIX) return typed; // let the daemon answer (not found) for short junk
  const matches = candidates.filter((c) => c.startsWith(typed));
  if (matches.length === 1) return matches[0];
  if (matches.length > 1) {
    throw new CliError(`${typed} is ambiguous: it starts ${matches.length} ${what}s (${matches.slice(0, 5).join(', ')}${matches.length > 5 ? ', ...' : ''}). Type more of it.`, EXIT.usage);
  }
  return typed;
}
