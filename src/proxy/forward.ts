import { AppError, invalidBody } from '../errors.js';
import type { ServerResponse } from 'node:http';
import type { AppContext } from '../http/context.js';
import type { Logger } from '../log.js';
import type { ModelCatalog, ResolvedModel } from '../models/catalog.js';
import type { ProvidersService } from '../providers/service.js';
import { mediaTypeOf } from '../upstream/media-type.js';
import { LineRelay, MIN_SCRUBBED_KEY_LENGTH, scrubJsonText, scrubText } from '../upstream/scrub.js';
import { abortOnClientGone, callUpstream, type ClientGone, readBody, type UpstreamResponse, upstreamUnavailable, upstreamUrl } from '../upstream/client.js';
import { pumpStream, type StreamBreak, type StreamTransform, takeResponse } from '../upstream/pump.js';
import { type Tokens, UsageTap, usageInAnswer } from '../activity/usage.js';
import { clientClosed, deeperThan, type Endpoint, floatsToBase64, isObject, modelNotFound, outputCap, streamErrorEvent, upstreamMessage, usageAsked } from './answers.js';

/** A non-streamed upstream answer is read whole, at most this much, before anything is sent. */
export const UPSTREAM_ANSWER_LIMIT = 64 * 1024 * 1024;
/** One line of an upstream event stream may be at most this long. */
export const STREAM_LINE_LIMIT = 32 * 1024 * 1024;
/** How deep a body svc will re-serialise (alias or `<provider>/<model>` ids); deeper is a 400. */
export const MAX_REWRITE_DEPTH = 1000;

/** What forwarding a call needs: where models lead, the providers' keys, and a log. */
export interface ForwardDeps {
  logger: Logger;
  providers: ProvidersService;
  catalog: ModelCatalog;
  /** how long a stream whose dialect pings may be quiet before it sends one */
  pingMs?: number;
}

/** What a stream's relay counted, and how it ends a stream that broke. */
export interface StreamRelay extends StreamTransform {
  /** the upstream's usage, else svc's estimate (marked as one) */
  counted(requestBytes: number): Tokens & { tokens_estimated?: true };
  /** what goes out when the upstream broke off, stalled or sent a line too long */
  broke(why: StreamBreak, message: string, code: 'upstream_unavailable' | 'upstream_timeout'): string;
  /** what goes out at once, before the upstream's first chunk ('' for nothing) */
  start(): string;
  /** an event sent while the upstream is quiet; absent: nothing is sent */
  ping?(): string;
}

/**
 * What differs between the wire formats svc serves over one forward: the endpoint as limits and
 * errors name it, the provider's path, the body and credential sent, the usage read and the
 * error event that ends a broken stream (the error bodies themselves are the error middleware's,
 * by the route's error shape).
 */
export interface Dialect {
  /** the app's endpoint, for its output cap (max_tokens) */
  endpoint: Endpoint;
  /** the provider's path that is called */
  upstreamPath(resolved: ResolvedModel): string;
  /** the body sent upstream, and whether svc asked for a stream's usage the app did not */
  outgoing(raw: string, body: Record<string, unknown>, resolved: ResolvedModel, stream: boolean): { text: string; askedUsage: boolean };
  /** the provider's credential (and any other header the format needs) */
  headers(providers: ProvidersService, resolved: ResolvedModel, ctx: AppContext): Record<string, string>;
  /** the transform of an event stream, whole lines in (`lines` cuts and scrubs them) */
  streamRelay(lines: LineRelay, askedUsage: boolean, body: Record<string, unknown>, requestBytes: number): StreamRelay;
  /** false: the call spends no tokens (a count of them): nothing is reserved or counted */
  spends?: false;
  /**
   * A whole answer (its text, the key already scrubbed) turned into the app's format, with its
   * usage; absent: relayed as it came. Throws an AppError for an answer it cannot read.
   */
  answer?(text: string, body: Record<string, unknown>, name: string): { text: string; tokens: Tokens | null };
}

/**
 * Sends an app's call to the provider of its model and relays the answer. `raw` is the app's body
 * as it came; `body` the same parsed.
 */
export type Forward = (ctx: AppContext, dialect: Dialect | DialectOf, raw: string, body: Record<string, unknown>, stream: boolean) => Promise<void>;
/** A dialect that depends on the model's provider (one that serves the Messages API, or not). */
export type DialectOf = (resolved: ResolvedModel) => Dialect;

/** The OpenAI endpoints' dialect: the body as it came (model ids rewritten), the stream as it came, the usage taken out of it. */
export function openAiDialect(endpoint: Endpoint): Dialect {
  return {
    endpoint,
    upstreamPath: () => endpoint,
    outgoing(raw, body, resolved, stream) {
      // A stream tells its token counts only when asked; svc asks for the app that did not, and
      // takes the answer out again (UsageTap), so the activity counts what the app spent.
      const askedUsage = stream && (endpoint === '/chat/completions' || endpoint === '/completions') && !usageAsked(body);
      return { text: outgoingBody(raw, body, resolved, askedUsage), askedUsage };
    },
    headers: (providers, resolved) => providers.upstreamHeaders(resolved.provider),
    streamRelay(lines, askedUsage) {
      const tap = new UsageTap(lines, askedUsage);
      return {
        push: (chunk) => tap.push(chunk),
        end: () => tap.end(),
        counted: (requestBytes) => tap.tokens ?? { ...tap.estimate(requestBytes), tokens_estimated: true },
        broke: (_why, message, code) => lines.abandon() + streamErrorEvent(endpoint, message, code),
        start: () => '',
      };
    },
  };
}

/** The key to scrub from successful answers (short placeholders are left alone, see scrub.ts). */
function scrubKey(providers: ProvidersService, resolved: ResolvedModel): string | null {
  const key = providers.apiKey(resolved.provider);
  return key && key.length >= MIN_SCRUBBED_KEY_LENGTH ? key : null;
}

/**
 * The one forwarder of the OpenAI-compatible endpoints and of Anthropic's Messages API
 * (decisions: The OpenAI proxy), each call in its dialect. A stream is passed on (or translated)
 * line by line as it arrives; any other answer is read whole (bounded) before the first
 * byte goes to the app, so an upstream that stalls or breaks off gives a 504/502, never silence
 * or a truncated 200. The provider's key is scrubbed from everything relayed (see scrub.ts).
 */
export function createForwarder(deps: ForwardDeps): Forward {
  return async function forward(ctx, dialectOf, raw, body, stream) {
    if (ctx.state.activity) ctx.state.activity.model = String(body.model);
    const resolved = await resolveModel(deps.catalog, body);
    const dialect = typeof dialectOf === 'function' ? dialectOf(resolved) : dialectOf;
    const { endpoint } = dialect;
    // a grant's tokens a day: what this call may spend is reserved before it starts
    if (ctx.state.tokenBudget && dialect.spends !== false) await ctx.state.tokenBudget.reserve(Math.ceil(Buffer.byteLength(raw) / 4), outputCap(endpoint, resolved.defaults ? { ...resolved.defaults, ...body } : body));
    const { text: outgoing, askedUsage } = dialect.outgoing(raw, body, resolved, stream);
    const name = `provider ${resolved.provider.name}`;
    const abort = abortOnClientGone(ctx.res);
    const upstreamPath = dialect.upstreamPath(resolved);
    const upstream = await callUpstream({
      url: upstreamUrl(resolved.provider.base_url, upstreamPath),
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        Accept: stream ? 'text/event-stream' : 'application/json',
        ...dialect.headers(deps.providers, resolved, ctx),
      },
      body: outgoing,
      timeoutMs: resolved.provider.timeout_ms,
      signal: abort,
      name,
    });
    if (upstream.statusCode >= 300) return relayError(deps.providers, upstream, resolved, upstreamPath);

    const contentType = relayedContentType(upstream.headers['content-type'], stream ? 'text/event-stream' : 'application/json', scrubKey(deps.providers, resolved));
    const headers: Record<string, string> = {
      'Content-Type': contentType,
      'Cache-Control': 'no-store',
      'X-Content-Type-Options': 'nosniff',
    };
    const requestBytes = Buffer.byteLength(raw);
    if (stream && /^text\/event-stream/i.test(contentType)) {
      const relay = dialect.streamRelay(new LineRelay(scrubKey(deps.providers, resolved), STREAM_LINE_LIMIT), askedUsage, body, requestBytes);
      return relayStream(deps, ctx, upstream, headers, { relay, resolved, requestBytes });
    }
    return relayAnswer(deps.providers, ctx, upstream, headers, { endpoint, dialect, body, resolved, name, abort, contentType, requestBytes });
  };
}

/** The model the body names, as the catalog resolves it; a 404 when it names none svc has. */
export async function resolveModel(catalog: ModelCatalog, body: Record<string, unknown>): Promise<ResolvedModel> {
  const resolved = await catalog.resolve(String(body.model));
  if (!resolved) throw modelNotFound(String(body.model));
  return resolved;
}

/**
 * The upstream's Content-Type as the app gets it: the media type and its charset, nothing else
 * (the one upstream header relayed, so it is no way round the key's scrubbing either).
 */
function relayedContentType(value: unknown, fallback: string, key: string | null): string {
  // an upstream sends the same few values call after call: the last one's answer is kept
  const last = lastContentType;
  if (last.value === value && last.fallback === fallback && last.key === key) return last.relayed;
  let relayed = mediaTypeOf(String(value ?? fallback)) || fallback;
  if (scrubText(relayed, key) !== relayed) relayed = fallback;
  lastContentType = { value, fallback, key, relayed };
  return relayed;
}

let lastContentType: { value: unknown; fallback: string; key: string | null; relayed: string } = { value: Symbol('none'), fallback: '', key: null, relayed: '' };

/** The body as the app sent it, unless the model id must change, an alias adds defaults or svc asks for a stream's usage. */
export function outgoingBody(raw: string, body: Record<string, unknown>, resolved: ResolvedModel, askUsage: boolean): string {
  const sameModel = !resolved.defaults && resolved.upstreamModel === body.model;
  if (sameModel && !askUsage) return raw;
  if (sameModel && body.stream_options === undefined) {
    const asked = withUsageAsked(raw);
    if (asked !== null) return asked;
  }
  if (deeperThan(body, MAX_REWRITE_DEPTH, raw)) {
    throw invalidBody(`The request body nests deeper than ${MAX_REWRITE_DEPTH} levels, too deep for svc to rewrite for this model id.`);
  }
  const rewritten: Record<string, unknown> = resolved.defaults ? { ...resolved.defaults, ...body, model: resolved.upstreamModel } : { ...body, model: resolved.upstreamModel };
  if (askUsage) rewritten.stream_options = { ...(isObject(rewritten.stream_options) ? rewritten.stream_options : {}), include_usage: true };
  return JSON.stringify(rewritten);
}

const ASK_USAGE = '"stream_options":{"include_usage":true}';

/**
 * The body as it came with `stream_options` asking for usage added as its last key, when it has
 * no such key (the parsed body says so, whatever escapes spelt its keys): the text changes by that
 * key alone, with no walk and no re-serialisation of what the app sent. null when the text does
 * not end as an object with keys does (svc then re-serialises, as for any other change).
 */
export function withUsageAsked(raw: string): string | null {
  let end = raw.length - 1;
  while (end > 0 && (raw[end] === ' ' || raw[end] === '\n' || raw[end] === '\r' || raw[end] === '\t')) end--;
  if (raw[end] !== '}') return null;
  let last = end - 1;
  while (last > 0 && (raw[last] === ' ' || raw[last] === '\n' || raw[last] === '\r' || raw[last] === '\t')) last--;
  // `{}` has no key to follow
  if (last <= 0 || raw[last] === '{') return null;
  return `${raw.slice(0, end)},${ASK_USAGE}${raw.slice(end)}`;
}

/**
 * Relays an upstream error: 4xx keep their status and OpenAI-shaped message, 5xx become 502, and
 * a provider that lacks the endpoint (404 not about a model, 405, 501) is a 404 naming it.
 */
async function relayError(providers: ProvidersService, upstream: UpstreamResponse, resolved: ResolvedModel, upstreamPath: string): Promise<never> {
  const status = upstream.statusCode;
  const name = resolved.provider.name;
  const text = (await readBody(upstream.body, 1024 * 1024).catch(() => Buffer.alloc(0))).toString('utf8');
  // Scrubbed after decoding, then cut: a cut first could leave part of the key.
  const upstreamText = scrubText(upstreamMessage(text), providers.apiKey(resolved.provider)).slice(0, 2000);
  if (status === 405 || status === 501 || (status === 404 && !/model/i.test(upstreamText))) {
    throw new AppError('unsupported_endpoint', `Provider ${name} does not serve /v1${upstreamPath} (it answered ${status}).`);
  }
  if (status >= 500 || status < 400) throw upstreamUnavailable(`Upstream provider ${name} answered ${status}.`);
  // The app's token was fine; it is svc's key for this provider that was refused. A 401 here
  // would read to the app's client as its own credentials failing.
  if (status === 401 || status === 403) {
    throw new AppError('upstream_rejected', `The upstream model server refused svc's credentials for provider ${name} (${status}).`);
  }
  throw new AppError('upstream_rejected', upstreamText || `Upstream provider ${name} answered ${status}.`, { status, type: status === 404 ? 'not_found_error' : 'invalid_request_error' });
}

/** Passes an event stream on line by line; an upstream failure ends it with the dialect's error event. */
async function relayStream(
  deps: ForwardDeps,
  ctx: AppContext,
  upstream: UpstreamResponse,
  headers: Record<string, string>,
  { relay, resolved, requestBytes }: { relay: StreamRelay; resolved: ResolvedModel; requestBytes: number },
): Promise<void> {
  const name = resolved.provider.name;
  headers['X-Accel-Buffering'] = 'no';
  const res = takeResponse(ctx, upstream.statusCode, headers);
  // The headers go at once, so the app sees the answer start as the upstream does; with what the
  // dialect sends first (Messages' message_start) when it has something, in the same write.
  const first = relay.start();
  if (first) res.write(first);
  else res.flushHeaders();
  const quiet = relay.ping ? pingWhileQuiet(res, relay, relay.ping, deps.pingMs ?? 10_000) : null;
  await pumpStream(res, upstream.body, quiet?.transform ?? relay, (why) => {
    const [message, code] =
      why === 'too_long'
        ? [`Upstream provider ${name} sent an event line over ${STREAM_LINE_LIMIT} bytes.`, 'upstream_unavailable' as const]
        : why === 'timeout'
          ? [`Upstream provider ${name} stopped sending for ${resolved.provider.timeout_ms} ms.`, 'upstream_timeout' as const]
          : [`Upstream provider ${name} broke off the stream.`, 'upstream_unavailable' as const];
    deps.logger.warn({ requestId: ctx.state.requestId, provider: name, code }, 'upstream stream broke off');
    return relay.broke(why, message, code);
  });
  quiet?.stop();
  // A stream that ended without its usage (the app hung up first, or the upstream sends none)
  // counts an estimate, marked as one: otherwise leaving before the usage would spend for free.
  if (ctx.state.activity) Object.assign(ctx.state.activity, relay.counted(requestBytes));
}

/**
 * Sends the relay's ping each time the upstream has been quiet for `ms`, between whole events
 * (the transform answers whole events only) and never past the app's pace.
 */
function pingWhileQuiet(res: ServerResponse, relay: StreamRelay, ping: () => string, ms: number) {
  let heard = true;
  const timer = setInterval(() => {
    if (!heard && !res.writableEnded && !res.destroyed && !res.writableNeedDrain) {
      const event = ping();
      if (event) res.write(event);
    }
    heard = false;
  }, ms);
  timer.unref();
  const transform: StreamTransform = {
    push(chunk) {
      heard = true;
      return relay.push(chunk);
    },
    end: () => relay.end(),
  };
  return { transform, stop: () => clearInterval(timer) };
}

/** What relaying a whole answer needs to know of the call. */
interface WholeAnswerCall {
  endpoint: Endpoint;
  dialect: Dialect;
  body: Record<string, unknown>;
  resolved: ResolvedModel;
  /** the provider as error messages name it */
  name: string;
  abort: ClientGone;
  contentType: string;
  /** the app's body's size, for an estimate of what went in */
  requestBytes: number;
}

/** Reads a non-streamed answer all before writing anything, so a failure here is still a proper 502/504. */
async function relayAnswer(providers: ProvidersService, ctx: AppContext, upstream: UpstreamResponse, headers: Record<string, string>, call: WholeAnswerCall): Promise<void> {
  let buf: Buffer;
  try {
    buf = await readBody(upstream.body, UPSTREAM_ANSWER_LIMIT, call.name);
  } catch (err) {
    throw call.abort.aborted ? clientClosed() : err;
  }
  if (call.dialect.answer) return translatedAnswer(providers, ctx, upstream, headers, call, buf);
  // An answer that reports no usage counts an estimate, marked as one, as a stream does: else an
  // upstream that leaves usage out would spend a tokens-a-day limit for free.
  if (ctx.state.activity && call.dialect.spends !== false) Object.assign(ctx.state.activity, usageInAnswer(buf) ?? { ...answerEstimate(call.endpoint, call.requestBytes, buf.length), tokens_estimated: true });
  let text = checkedAnswerText(upstream, buf, call);
  const key = scrubKey(providers, call.resolved);
  if (key) text = scrubJsonText(text ?? buf.toString('utf8'), key);

  if (text === null) {
    headers['Content-Length'] = String(buf.length);
    // a string body leaves with the headers in one write (a Buffer would take a writev)
    takeResponse(ctx, upstream.statusCode, headers).end(buf.toString('latin1'), 'latin1');
  } else {
    headers['Content-Length'] = String(Buffer.byteLength(text));
    takeResponse(ctx, upstream.statusCode, headers).end(text, 'utf8');
  }
}

/** A whole answer the dialect translates: its text in the app's format, the key scrubbed from it (before it is parsed, so from every spelling). */
function translatedAnswer(providers: ProvidersService, ctx: AppContext, upstream: UpstreamResponse, headers: Record<string, string>, call: WholeAnswerCall, buf: Buffer): void {
  const key = scrubKey(providers, call.resolved);
  const whole = buf.toString('utf8');
  const { text, tokens } = call.dialect.answer!(key ? scrubJsonText(whole, key) : whole, call.body, call.name);
  if (ctx.state.activity) Object.assign(ctx.state.activity, tokens ?? { ...answerEstimate(call.endpoint, call.requestBytes, buf.length), tokens_estimated: true });
  headers['Content-Type'] = 'application/json';
  headers['Content-Length'] = String(Buffer.byteLength(text));
  takeResponse(ctx, upstream.statusCode, headers).end(text, 'utf8');
}

/** The tokens of a whole answer without usage: one per 4 bytes of the request, and of the answer (an embedding's vectors are no output). */
function answerEstimate(endpoint: Endpoint, requestBytes: number, answerBytes: number) {
  return { tokens_in: Math.ceil(requestBytes / 4), tokens_out: endpoint === '/embeddings' ? 0 : Math.ceil(answerBytes / 4) };
}

/**
 * Checks that a JSON answer is whole where its framing cannot tell, and encodes embeddings as the
 * app asked. Answers the text to send when it changed, else null (the bytes go as they came).
 */
function checkedAnswerText(upstream: UpstreamResponse, buf: Buffer, { endpoint, body, resolved, name, contentType }: WholeAnswerCall): string | null {
  // A body without Content-Length or chunked framing ends when the connection does, so a reset
  // looks like an end: check that JSON is whole rather than pass on half of it.
  const framed = upstream.headers['content-length'] !== undefined || /chunked/i.test(String(upstream.headers['transfer-encoding'] ?? ''));
  const wantsBase64 = endpoint === '/embeddings' && (body.encoding_format ?? resolved.defaults?.encoding_format) === 'base64';
  if (!/[/+]json/i.test(contentType) || (framed && !wantsBase64)) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(buf.toString('utf8'));
  } catch {
    throw upstreamUnavailable(`Upstream ${name} sent an incomplete or malformed answer.`);
  }
  return wantsBase64 && floatsToBase64(parsed) ? JSON.stringify(parsed) : null;
}
