import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { Client, Pool } from 'undici';
import { AppError } from '../errors.js';
import { collect } from './body.js';

/**
 * A keep-alive connection pool per upstream origin (model servers, MCP servers, downloads). undici
 * rather than node:http because it costs far less CPU per request, which is most of what a proxy
 * adds; a Pool per origin rather than an Agent because the Agent's per-call lookup shows up too.
 */
/** Connections per origin for calls (chats, tool calls): beyond, a call waits its turn, within its timeout. */
const CALL_CONNECTIONS = 256;
const pools = new Map<string, Pool>();
function poolFor(origin: string): Pool {
  let pool = pools.get(origin);
  if (!pool) {
    pool = new Pool(origin, { keepAliveTimeout: 10_000, keepAliveMaxTimeout: 60_000, connections: CALL_CONNECTIONS, pipelining: 1 });
    pools.set(origin, pool);
  }
  return pool;
}

/**
 * Long-lived streams (an MCP host's GET stream, open all day) get a connection of their own each,
 * outside the pools: a stream holds its connection for good, and in a shared fixed pool the 257th
 * would wait behind streams that never end, and chats behind them. The connection is destroyed
 * with the stream (a pool would keep it, reading on to reuse it). What bounds streams is the
 * daemon's cap on open streams (OpenStreams), refused at once beyond it.
 */
function streamConnection(origin: string): Client {
  return new Client(origin, { keepAliveTimeout: 1, pipelining: 1 });
}

/** Every connection of the call pool of `origin` busy and calls waiting: the upstream is saturated. */
function saturated(origin: string): boolean {
  const stats = pools.get(origin)?.stats;
  return stats !== undefined && stats.pending > 0 && stats.running >= CALL_CONNECTIONS;
}

// These say which upstream failed (never its URL or credentials), so they are shown to the app.
export const upstreamUnavailable = (message = 'The upstream server could not be reached.') =>
  new AppError('upstream_unavailable', message, { expose: true });
export const upstreamTimeout = (message = 'The upstream server did not answer in time.') =>
  new AppError('upstream_timeout', message, { expose: true });
const clientClosed = () => new AppError('client_closed', 'The client went away.');

export interface UpstreamRequest {
  url: URL;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
  /** time allowed until the response headers arrive, and (unless bodyTimeoutMs) between body chunks */
  timeoutMs: number;
  /** time allowed between body chunks, when a stream may rightly stay quiet longer than its headers may take */
  bodyTimeoutMs?: number;
  /** aborts the upstream call, e.g. when the app disconnects */
  signal?: AbortSignal | ClientGone;
  /** names the upstream in error messages, e.g. "provider local" (never its URL) */
  name?: string;
  /** a stream with no end of its own (the MCP GET stream): its own pool, see streamPools */
  stream?: boolean;
}

export interface UpstreamResponse {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  body: Readable;
}

/**
 * A call's abort flag, the signal undici is given: it takes any object with `on`/`once`,
 * `removeListener` and `aborted`. Two are made per upstream call (the app going away, and the
 * deadline), so this is the least such a signal can be: an EventEmitter or an AbortController
 * cost more than all the rest of setting the call up.
 */
export class ClientGone {
  aborted = false;
  private listeners: (() => void)[] | null = null;

  once(_event: 'abort', listener: () => void): this {
    (this.listeners ??= []).push(listener);
    return this;
  }

  on(event: 'abort', listener: () => void): this {
    return this.once(event, listener);
  }

  removeListener(_event: 'abort', listener: () => void): this {
    const at = this.listeners?.indexOf(listener) ?? -1;
    if (at !== -1) this.listeners!.splice(at, 1);
    return this;
  }

  /** Sets the flag and tells each listener, once. */
  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    const listeners = this.listeners;
    this.listeners = null;
    for (const listener of listeners ?? []) listener();
  }
}

/** An abort signal that fires when the app's response closes before it finished (the app went away). */
export function abortOnClientGone(res: ServerResponse): ClientGone {
  const gone = new ClientGone();
  res.once('close', () => {
    if (!res.writableFinished) gone.abort();
  });
  return gone;
}

/** Aborts the upstream call that listens to `signal`, as if the app had gone away. */
export function abortUpstream(signal: ClientGone): void {
  signal.abort();
}

/**
 * One upstream HTTP call. It resolves as soon as the response headers arrive, so a stream can be
 * passed on chunk by chunk. Errors are AppErrors that name neither the upstream URL nor its
 * credentials: 504 when it stalls, 502 when it cannot be reached.
 */
export async function callUpstream(req: UpstreamRequest): Promise<UpstreamResponse> {
  // undici's headers timeout starts once the request is on a connection, so a call waiting for a
  // free one would wait without end: the whole wait for headers, queue included, is bounded here.
  const deadline = new ClientGone();
  // The caller's signal (the app went away) aborts the call for its whole life, body included.
  const onGone = () => abortUpstream(deadline);
  const signal = req.signal;
  if (signal && 'addEventListener' in signal) signal.addEventListener('abort', onGone, { once: true });
  else signal?.once('abort', onGone);
  if (signal?.aborted) onGone();
  let waitedOut = false;
  const timer = setTimeout(() => {
    waitedOut = true;
    abortUpstream(deadline);
  }, req.timeoutMs);
  const own = req.stream ? streamConnection(req.url.origin) : null;
  try {
    const res = await (own ?? poolFor(req.url.origin)).request({
      path: `${req.url.pathname}${req.url.search}`,
      method: req.method,
      headers: req.headers,
      body: req.body,
      signal: deadline,
      headersTimeout: req.timeoutMs,
      bodyTimeout: req.bodyTimeoutMs ?? req.timeoutMs,
    });
    if (own) res.body.once('close', () => void own.destroy().catch(() => undefined));
    return { statusCode: res.statusCode, headers: res.headers, body: res.body };
  } catch (err) {
    void own?.destroy().catch(() => undefined);
    if (req.signal?.aborted) throw clientClosed();
    if (waitedOut && !req.stream && saturated(req.url.origin)) {
      throw new AppError('upstream_busy', `Every connection to upstream ${req.name ?? 'server'} stayed busy for ${req.timeoutMs} ms; try again shortly.`, { headers: { 'Retry-After': '1' }, expose: true });
    }
    if (waitedOut) throw upstreamTimeout(req.name ? `Upstream ${req.name} did not answer within ${req.timeoutMs} ms.` : undefined);
    const code = (err as { code?: string }).code;
    if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
      throw upstreamTimeout(req.name ? `Upstream ${req.name} did not answer within ${req.timeoutMs} ms.` : undefined);
    }
    throw upstreamUnavailable(req.name ? `Upstream ${req.name} could not be reached.` : undefined);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The whole body, at most `limit` bytes. A body that breaks off, stalls past the call's timeout or
 * runs over the limit is an AppError (502/504) naming `name` when given.
 */
export async function readBody(body: Readable, limit = 32 * 1024 * 1024, name?: string): Promise<Buffer> {
  try {
    return await collect(body, limit, () => upstreamUnavailable(`The answer of upstream ${name ?? 'server'} was larger than ${limit} bytes.`));
  } catch (err) {
    if (err instanceof AppError) throw err;
    const code = (err as { code?: string }).code;
    throw code === 'UND_ERR_BODY_TIMEOUT'
      ? upstreamTimeout(`Upstream ${name ?? 'server'} stopped sending its answer.`)
      : upstreamUnavailable(`Upstream ${name ?? 'server'} broke off its answer.`);
  }
}

/** Joins a provider base URL ("http://host/v1") and an OpenAI path ("/chat/completions"). */
export function upstreamUrl(baseUrl: string, path: string): URL {
  const joined = `${baseUrl.replace(/\/+$/, '')}${path}`;
  let url = parsedUrls.get(joined);
  if (!url) {
    url = new URL(joined);
    // a few providers and paths: parsed once each (callUpstream only reads the URL)
    if (parsedUrls.size >= 1000) parsedUrls.clear();
    parsedUrls.set(joined, url);
  }
  return url;
}

const parsedUrls = new Map<string, URL>();
