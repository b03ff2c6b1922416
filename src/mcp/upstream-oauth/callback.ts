import type { McpOAuthPending } from '../../store/schema.js';

/** What the callback refuses, each shown as a page of its own; nothing is stored for any of them. */
export interface Refusal {
  status: number;
  title: string;
  why: string;
}

export const REFUSALS = {
  unknown: { status: 400, title: 'This sign-in is not one svc started', why: 'svc has no sign-in under way with this state, or it was used already. Start the sign-in again from svc.' },
  otherSession: { status: 403, title: 'This sign-in was started elsewhere', why: 'The sign-in was started by another svc session than this browser\'s. Start it again from this browser, or from svc mcp login.' },
  expired: { status: 400, title: 'This sign-in took too long', why: 'A sign-in must come back within 10 minutes. Start it again.' },
  wrongIssuer: { status: 400, title: 'The answer came from another server', why: 'The authorization server named in the answer (iss) is not the one svc sent you to. Nothing was stored.' },
  declined: { status: 400, title: 'The sign-in was not completed', why: 'The MCP server\'s authorization server did not sign you in (you may have declined). Start it again if you meant to.' },
  codeRefused: { status: 400, title: 'The MCP server refused the sign-in', why: 'Its authorization server did not take the code svc was given. Start the sign-in again.' },
  unreachable: { status: 502, title: 'The MCP server could not be reached', why: 'svc could not reach its authorization server to finish the sign-in. Try again.' },
} satisfies Record<string, Refusal>;

export interface CallbackQuery {
  code?: string;
  state?: string;
  iss?: string;
  error?: string;
}

/**
 * Checks an answer against the authorization it claims to end: the same session (for one started
 * from a web page), in time, from
 * the authorization server that was asked (RFC 9207: its `iss` must match, and must be there
 * when the server says it sends one). Null when it may be exchanged.
 */
export function refusalFor(pending: McpOAuthPending, query: CallbackQuery, sessionHash: string | undefined, now: number): Refusal | null {
  // a CLI-started sign-in has no browser session: its state was given only to the owner's CLI
  if (!pending.cli_hash && (!sessionHash || pending.session_hash !== sessionHash)) return REFUSALS.otherSession;
  if (pending.expires_at <= now) return REFUSALS.expired;
  if (query.iss !== undefined && query.iss !== pending.issuer) return REFUSALS.wrongIssuer;
  if (query.iss === undefined && pending.authorization_response_iss) return REFUSALS.wrongIssuer;
  if (query.error !== undefined || !query.code) return REFUSALS.declined;
  return null;
}
