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

/** What the resolvers need of the daemon connection. */
export interface IdLookup {
  request<T>(method: string, pathname: string): Promise<{ body: T }>;
}

/**
 * Where each kind of id is listed, as the caller may see them. Every command that takes an id
 * goes through `resolve` with one of these, so a short id one command shows works in every other.
 */
const KINDS = {
  request: { what: 'request', list: '/svc/v1/access-requests', idOf: (r: { id: string }) => r.id },
  instance: { what: 'MCP instance', list: '/svc/v1/mcps', idOf: (r: { id: string }) => r.id },
  key: { what: 'API key', list: '/svc/v1/keys', idOf: (r: { id: string }) => r.id },
  client: { what: 'client', list: '/admin/v1/clients', idOf: (r: { client_id: string }) => r.client_id },
  call: { what: 'held call', list: '/svc/v1/calls', idOf: (r: { id: string }) => r.id },
} as const;

export type IdKind = keyof typeof KINDS;

const FULL_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The full id of a `kind` record from what was typed; a whole UUID is taken as it is (no list call). */
export async function resolve(client: IdLookup, kind: IdKind, typed: string): Promise<string> {
  if (FULL_UUID.test(typed)) return typed;
  const { what, list, idOf } = KINDS[kind];
  const { body } = await client.request<{ data: Parameters<typeof idOf>[0][] }>('GET', list);
  return resolveId(typed, body.data.map((r) => idOf(r as never)), what);
}

/**
 * `--mcp URL=INSTANCE_ID` selections with each id resolved among the caller's instances, as
 * `svc mcp list` shows them (short or whole). An id that is none of the caller's is said here, with
 * where to look, rather than left to the daemon's refusal, which reads as a matter of rights.
 */
export async function resolveMcpSelections(client: IdLookup, selections: { url: string; instance_ids: string[] }[]): Promise<{ url: string; instance_ids: string[] }[]> {
  if (selections.length === 0) return [];
  const { body } = await client.request<{ data: { id: string; url: string }[] }>('GET', KINDS.instance.list);
  const mine = body.data.map((m) => m.id);
  return selections.map((s) => ({
    url: s.url,
    instance_ids: s.instance_ids.map((typed) => {
      const id = resolveId(typed, mine, KINDS.instance.what);
      // a whole id is the daemon's to judge (someone else's instance is a refusal, exit 4)
      if (!mine.includes(id) && !FULL_UUID.test(id)) throw new CliError(`No MCP instance of yours has an id that starts ${typed} (\`svc mcp list\` shows yours and their URLs).`, EXIT.error);
      return id;
    }),
  }));
}
