import { AppError, invalidBody } from '../errors.js';
import type { AppContext } from '../http/context.js';
import type { Logger } from '../log.js';
import type { ModelCatalog, ResolvedModel } from '../models/catalog.js';
import type { ProvidersService } from '../providers/service.js';
import { mediaTypeOf } from '../upstream/media-type.js';
import { LineRelay, MIN_SCRUBBED_KEY_LENGTH, scrubJsonText, scrubText } from '../upstream/scrub.js';
import { abortOnClientGone, callUpstream, type ClientGone, readBody, type UpstreamResponse, upstreamUnavailable, upstreamUrl } from '../upstream/client.js';
import { pumpStream, takeResponse } from '../upstream/pump.js';
import { UsageTap, usageInAnswer } from '../activity/usage.js';
import { clientClosed, deeperThan, type Endpoint, floatsToBase64, isObject, modelNotFound, outputCap, streamErrorEvent, upstreamMessage, usageAsked } from './answers.js';

/** A non-streamed upstream answer is read whole, at most this much, before anything is sent. */
export const UPSTREAM_ANSWER_LIMIT = 64 * 1024 * 1024;
/** One line of an upstream event stream may be at most this long. */
const STREAM_LINE_LIMIT = 32 * 1024 * 1024;
/** How deep a body svc will re-serialise (alias or `<provider>/<model>` ids); deeper is a 400. */
export const MAX_REWRITE_DEPTH = 1000;

/** What forwarding a call needs: where models lead, the providers' keys, and a log. */
export interface ForwardDeps {
  logger: Logger;
  providers: ProvidersService;
  catalog: ModelCatalog;
}

/**
 * Sends an app's call to the provider of its model and relays the answer. `raw` is the app's body
 * as it came; `body` the same parsed.
 */
export type Forward = (ctx: AppContext, endpoint: Endpoint, raw: string, body: Record<string, unknown>, stream: boolean) => Promise<void>;

/** The key to scrub from successful answers (short placeholders are left alone, see scrub.ts). */
function scrubKey(providers: ProvidersService, resolved: ResolvedModel): string | null {
  const key = providers.apiKey(resolved.provider);
  return key && key.length >= MIN_SCRUBBED_KEY_LENGTH ? key : null;
}

/**
 * The forwarder of the OpenAI-compatible endpoints (decisions: The OpenAI proxy). A stream is
 * passed on line by line as it arrives; any other answer is read whole (bounded) before the first
 * byte goes to the app, so an upstream that stalls or breaks off gives a 504/502, never silence
 * or a truncated 200. The provider's key is scrubbed from everything relayed (see scrub.ts).
 */
export function createForwarder(deps: ForwardDeps): Forward {
  return async function forward(ctx, endpoint, raw, body, stream) {
    if (ctx.state.activity) ctx.state.activity.model = String(body.model);
    const resolved = await deps.catalog.resolve(String(body.model));
    if (!resolved) throw modelNotFound(String(body.model));
    // a grant's tokens a day: what this call may spend is reserved before it starts
    if (ctx.state.tokenBudget) await ctx.state.tokenBudget.reserve(Math.ceil(Buffer.byteLength(raw) / 4), outputCap(endpoint, resolved.defaults ? { ...resolved.defaults, ...body } : body));
    // A stream tells its token counts only when asked; svc asks for the app that did not, and
    // takes the answer out again (UsageTap), so the activity counts what the app spent.
    const askUsage = stream && (endpoint === '/chat/completions' || endpoint === '/completions') && !usageAsked(body);
    const outgoing = outgoingBody(raw, body, resolved, askUsage);
    const name = `provider ${resolved.provider.name}`;
    const abort = abortOnClientGone(ctx.res);
    const upstream = await callUpstream({
      url: upstreamUrl(resolved.provider.base_url, endpoint),
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        Accept: stream ? 'text/event-stream' : 'application/json',
        ...deps.providers.upstreamHeaders(resolved.provider),
      },
      body: outgoing,
      timeoutMs: resolved.provider.timeout_ms,
      signal: abort,
      name,
    });
    if (upstream.statusCode >= 300) return relayError(deps.providers, upstream, resolved, endpoint);

    const contentType = relayedContentType(upstream.headers['content-type'], stream ? 'text/event-stream' : 'application/json', scrubKey(deps.providers, resolved));
    const headers: Record<string, string> = {
      'Content-Type': contentType,
      'Cache-Control': 'no-store',
      'X-Content-Type-Options': 'nosniff',
    };
    if (stream && /^text\/event-stream/i.test(contentType)) return relayStream(deps, ctx, upstream, headers, { endpoint, resolved, hideUsage: askUsage, requestBytes: Buffer.byteLength(raw) });
    return relayAnswer(deps.providers, ctx, upstream, headers, { endpoint, body, resolved, name, abort, contentType, requestBytes: Buffer.byteLength(raw) });
  };
}

/**
 * The upstream's Content-Type as the app gets it: the media type and its charset, nothing else
 * (the one upstream header relayed, so it is no way round the key's scrubbing either).
 */
function relayedContentType(value: unknown, fallback: string, key: string | null): string {
  const relayed = mediaTypeOf(String(value ?? fallback)) || fallback;
  return scrubText(relayed, key) === relayed ? relayed : fallback;
}

/** The body as the app sent it, unless the model id must change, an alias adds defaults or svc asks for a stream's usage. */
function outgoingBody(raw: string, body: Record<string, unknown>, resolved: ResolvedModel, askUsage: boolean): string {
  if (!resolved.defaults && resolved.upstreamModel === body.model && !askUsage) return raw;
  if (deeperThan(body, MAX_REWRITE_DEPTH)) {
    throw invalidBody(`The request body nests deeper than ${MAX_REWRITE_DEPTH} levels, too deep for svc to rewrite for this model id.`);
  }
  const rewritten: Record<string, unknown> = resolved.defaults ? { ...resolved.defaults, ...body, model: resolved.upstreamModel } : { ...body, model: resolved.upstreamModel };
  if (askUsage) rewritten.stream_options = { ...(isObject(rewritten.stream_options) ? rewritten.stream_options : {}), include_usage: true };
  return JSON.stringify(rewritten);
}

/**
 * Relays an upstream error: 4xx keep their status and OpenAI-shaped message, 5xx become 502, and
 * a provider that lacks the endpoint (404 not about a model, 405, 501) is a 404 naming it.
 */
async function relayError(providers: ProvidersService, upstream: UpstreamResponse, resolved: ResolvedModel, endpoint: Endpoint): Promise<never> {
  const status = upstream.statusCode;
  const name = resolved.provider.name;
  const text = (await readBody(upstream.body, 1024 * 1024).catch(() => Buffer.alloc(0))).toString('utf8');
  // Scrubbed after decoding, then cut: a cut first could leave part of the key.
  const upstreamText = scrubText(upstreamMessage(text), providers.apiKey(resolved.provider)).slice(0, 2000);
  if (status === 405 || status === 501 || (status === 404 && !/model/i.test(upstreamText))) {
    throw new AppError('unsupported_endpoint', `Provider ${name} does not serve /v1${endpoint} (it answered ${status}).`);
  }
  if (status >= 500 || status < 400) throw upstreamUnavailable(`Upstream provider ${name} answered ${status}.`);
  // The app's token was fine; it is svc's key for this provider that was refused. A 401 here
  // would read to the app's client as its own credentials failing.
  if (status === 401 || status === 403) {
    throw new AppError('upstream_rejected', `The upstream model server refused svc's credentials for provider ${name} (${status}).`);
  }
  throw new AppError('upstream_rejected', upstreamText || `Upstream provider ${name} answered ${status}.`, { status, type: status === 404 ? 'not_found_error' : 'invalid_request_error' });
}

/** Passes an event stream on line by line; an upstream failure ends it with an error event. */
async function relayStream(
  deps: ForwardDeps,
  ctx: AppContext,
  upstream: UpstreamResponse,
  headers: Record<string, string>,
  { endpoint, resolved, hideUsage, requestBytes }: { endpoint: Endpoint; resolved: ResolvedModel; hideUsage: boolean; requestBytes: number },
): Promise<void> {
  const name = resolved.provider.name;
  const lines = new LineRelay(scrubKey(deps.providers, resolved), STREAM_LINE_LIMIT);
  const relay = new UsageTap(lines, hideUsage);
  headers['X-Accel-Buffering'] = 'no';
  const res = takeResponse(ctx, upstream.statusCode, headers);
  // The headers go at once, so the app sees the answer start as the upstream does.
  res.flushHeaders();
  await pumpStream(res, upstream.body, relay, (why) => {
    const [message, code] =
      why === 'too_long'
        ? [`Upstream provider ${name} sent an event line over ${STREAM_LINE_LIMIT} bytes.`, 'upstream_unavailable']
        : why === 'timeout'
          ? [`Upstream provider ${name} stopped sending for ${resolved.provider.timeout_ms} ms.`, 'upstream_timeout']
          : [`Upstream provider ${name} broke off the stream.`, 'upstream_unavailable'];
    deps.logger.warn({ requestId: ctx.state.requestId, provider: name, code }, 'upstream stream broke off');
    return lines.abandon() + streamErrorEvent(endpoint, message, code);
  });
  // A stream that ended without its usage (the app hung up first, or the upstream sends none)
  // counts an estimate, marked as one: otherwise leaving before the usage would spend for free.
  if (ctx.state.activity) Object.assign(ctx.state.activity, relay.tokens ?? { ...relay.estimate(requestBytes), tokens_estimated: true });
}

/** What relaying a whole answer needs to know of the call. */
interface WholeAnswerCall {
  endpoint: Endpoint;
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
  // An answer that reports no usage counts an estimate, marked as one, as a stream does: else an
  // upstream that leaves usage out would spend a tokens-a-day limit for free.
  if (ctx.state.activity) Object.assign(ctx.state.activity, usageInAnswer(buf) ?? { ...answerEstimate(call.endpoint, call.requestBytes, buf.length), tokens_estimated: true });
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
