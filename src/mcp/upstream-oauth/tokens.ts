import { AppError } from '../../errors.js';
import type { McpOAuthRecord } from '../../store/schema.js';
import { fetchJson } from './discovery.js';
import type { ClientRecord } from './registration.js';

/** A token is refreshed this long before the server said it ends, so a call never meets its end. */
export const REFRESH_MARGIN_MS = 30_000;

/** The tokens of one sign-in, as they are sealed (never shown, logged or stored in the clear). */
export interface TokenSet {
  access_token: string;
  refresh_token?: string;
}

/** What a token endpoint answered: new tokens, a refusal (the sign-in is over), or a failure to reach it. */
export type TokenAnswer = { ok: true; tokens: TokenSet; expires_in?: number } | { ok: false; refused: boolean; error: string };

export const signInRequired = (name: string) =>
  new AppError('mcp_sign_in_required', `The MCP server of instance ${name.slice(0, 60)} needs its owner to sign in again (svc mcp login, or Sign in on the instances page).`, { expose: true });

/** How a client proves itself at the token endpoint: its secret in Basic auth, or its id in the form (public). */
function clientAuth(client: ClientRecord, secret: string | undefined, form: URLSearchParams): Record<string, string> {
  if (!secret) {
    form.set('client_id', client.client_id);
    return {};
  }
  const basic = Buffer.from(`${encodeURIComponent(client.client_id)}:${encodeURIComponent(secret)}`).toString('base64');
  return { authorization: `Basic ${basic}` };
}

/** One request at the token endpoint (a code exchanged, or a refresh). */
export async function tokenRequest(endpoint: string, client: ClientRecord, secret: string | undefined, params: Record<string, string>): Promise<TokenAnswer> {
  const form = new URLSearchParams(params);
  const headers = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json', ...clientAuth(client, secret, form) };
  let answer: { status: number; body: unknown };
  try {
    answer = await fetchJson(endpoint, { method: 'POST', headers, body: form.toString() });
  } catch {
    return { ok: false, refused: false, error: 'unreachable' };
  }
  const body = (answer.body ?? {}) as { access_token?: unknown; refresh_token?: unknown; expires_in?: unknown; token_type?: unknown; error?: unknown };
  if (answer.status === 200 && typeof body.access_token === 'string' && body.access_token && (body.token_type === undefined || String(body.token_type).toLowerCase() === 'bearer')) {
    return {
      ok: true,
      tokens: { access_token: body.access_token, ...(typeof body.refresh_token === 'string' && body.refresh_token ? { refresh_token: body.refresh_token } : {}) },
      ...(typeof body.expires_in === 'number' && body.expires_in > 0 ? { expires_in: body.expires_in } : {}),
    };
  }
  const error = typeof body.error === 'string' ? body.error.slice(0, 60) : `status ${answer.status}`;
  // RFC 6749 §5.2: these end the sign-in; anything else (a 5xx, a timeout) may pass
  return { ok: false, refused: answer.status === 400 || answer.status === 401, error };
}

/** RFC 7009: asks the server to forget a token; a failure is only logged (the tokens are forgotten here anyway). */
export async function revokeToken(endpoint: string, client: ClientRecord, secret: string | undefined, token: string, hint: 'refresh_token' | 'access_token'): Promise<boolean> {
  const form = new URLSearchParams({ token, token_type_hint: hint });
  const headers = { 'content-type': 'application/x-www-form-urlencoded', ...clientAuth(client, secret, form) };
  try {
    const { status } = await fetchJson(endpoint, { method: 'POST', headers, body: form.toString() });
    return status === 200;
  } catch {
    return false;
  }
}

/** Whether the access token is past, or within the margin of, its end. */
export const expiresSoon = (o: McpOAuthRecord, now: number) => o.expires_at !== undefined && o.expires_at - REFRESH_MARGIN_MS <= now;

/**
 * Runs one refresh per key at a time in this process: calls that meet the same stale token wait
 * for the refresh the first one started, and all get its answer.
 */
export class SingleFlight<T> {
  private readonly running = new Map<string, Promise<T>>();

  run(key: string, fn: () => Promise<T>): Promise<T> {
    const current = this.running.get(key);
    if (current) return current;
    const started = fn().finally(() => this.running.delete(key));
    this.running.set(key, started);
    return started;
  }
}
