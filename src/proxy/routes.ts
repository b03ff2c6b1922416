import { z } from 'zod';
import { AppError, invalidBody } from '../errors.js';
import type { Middleware } from 'koa';
import type { AppContext, AppDeps, AppState } from '../http/context.js';
import { type AnyRouteDef, defineRoute } from '../http/route.js';
import { parseOrThrow } from '../http/validate.js';
import type { ModelCatalog, ResolvedModel } from '../models/catalog.js';
import type { ProvidersService } from '../providers/service.js';
import { readJson } from '../upstream/body.js';
import { LineRelay, MIN_SCRUBBED_KEY_LENGTH, scrubJsonText, scrubText } from '../upstream/scrub.js';
import { abortOnClientGone, callUpstream, readBody, type UpstreamResponse, upstreamUnavailable, upstreamUrl } from '../upstream/client.js';
import { pumpStream, takeResponse } from '../upstream/pump.js';
import { UsageTap, usageInAnswer } from '../activity/usage.js';

export const PROXY_BODY_LIMIT = 8 * 1024 * 1024;

const message = z.looseObject({ role: z.string().min(1).max(64) });
export const chatCompletionBody = z
  .looseObject({
    model: z.string().min(1).max(200),
    messages: z.array(message).min(1).max(10_000),
    stream: z.boolean().optional(),
  })
  .meta({ id: 'ChatCompletionRequest', description: 'OpenAI chat completion request; fields svc does not know are passed through untouched' });
export const embeddingsBody = z
  .looseObject({
    model: z.string().min(1).max(200),
    input: z.union([z.string(), z.array(z.string()), z.array(z.number()), z.array(z.array(z.number()))]),
  })
  .meta({ id: 'EmbeddingsRequest', description: 'OpenAI embeddings request; other fields pass through' });
export const completionsBody = z
  .looseObject({
    model: z.string().min(1).max(200),
    prompt: z.union([z.string(), z.array(z.string()), z.array(z.number()), z.array(z.array(z.number()))]),
    stream: z.boolean().optional(),
  })
  .meta({ id: 'CompletionRequest', description: 'OpenAI (legacy) text completion request; other fields pass through' });
export const responsesBody = z
  .looseObject({
    model: z.string().min(1).max(200).describe('Required here (svc routes by it), unlike OpenAI where a stored prompt may name it'),
    input: z.union([z.string(), z.array(z.unknown()).max(10_000)]).optional(),
    stream: z.boolean().optional(),
  })
  .meta({ id: 'ResponseRequest', description: 'OpenAI Responses API request; other fields pass through' });
const modelObject = z
  .object({ id: z.string(), object: z.literal('model'), created: z.number(), owned_by: z.string() })
  .meta({ id: 'Model', description: 'OpenAI model object' });
const modelList = z.object({ object: z.literal('list'), data: z.array(modelObject) });
const modelParams = z.object({ id: z.string().min(1).max(400).describe('A model id as listed, or `<provider>/<model>`; may contain slashes') });
const passthrough = z.looseObject({}).describe('The upstream OpenAI-format response, passed through');

const modelNotFound = (model: string) =>
  new AppError('model_not_found', `The model ${JSON.stringify(model.slice(0, 200))} does not exist here.`, { param: 'model' });
const clientClosed = () => new AppError('client_closed', 'The client went away.');

/**
 * The last stop of the data plane: a /v1 path no route serves (moderations, images, audio, a
 * stored response by id) is an OpenAI-shaped 404 that names it, so an app's client shows what is
 * missing rather than a bare "Not found". A served path asked with another method is left to the
 * router's 405.
 */
export function unservedEndpoint(served: (path: string) => boolean): Middleware<AppState> {
  return function unservedEndpoint(ctx) {
    if (served(ctx.path)) return;
    const asked = `${ctx.method} ${ctx.path.slice(0, 200)}`;
    throw new AppError(
      'unsupported_endpoint',
      `svc does not serve ${asked}. It proxies GET /v1/models, POST /v1/chat/completions, /v1/completions, /v1/embeddings and /v1/responses (creating a response, not reading a stored one back).`,
    );
  };
}

type Endpoint = '/chat/completions' | '/embeddings' | '/completions' | '/responses';

/** A non-streamed upstream answer is read whole, at most this much, before anything is sent. */
export const UPSTREAM_ANSWER_LIMIT = 64 * 1024 * 1024;
/** One line of an upstream event stream may be at most this long. */
const STREAM_LINE_LIMIT = 32 * 1024 * 1024;
/** How deep a body svc will re-serialise (alias or `<provider>/<model>` ids); deeper is a 400. */
export const MAX_REWRITE_DEPTH = 1000;

/** Whether a parsed JSON value nests deeper than `limit` (without recursion, so any depth is safe). */
function deeperThan(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (depth > limit) return true;
    for (const v of Object.values(node as object)) if (v !== null && typeof v === 'object') stack.push([v, depth + 1]);
  }
  return false;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
/** Whether the app itself asked for a stream's usage (`stream_options.include_usage`). */
const usageAsked = (body: Record<string, unknown>) => isObject(body.stream_options) && body.stream_options.include_usage === true;

/** The message of an upstream error body: OpenAI's `error.message`, or `error`, `message`, `detail`; else the text. */
function upstreamMessage(text: string): string {
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown; detail?: unknown } | null;
    if (parsed && typeof parsed === 'object') {
      const m = typeof parsed.error === 'string' ? parsed.error : (parsed.error?.message ?? parsed.message ?? parsed.detail);
      if (typeof m === 'string') return m;
    }
  } catch {
    /* not JSON: the text itself */
  }
  return text;
}

/**
 * OpenAI's embeddings API answers base64 (little-endian float32) when asked; the official client
 * asks by default. An upstream that ignores it sends float arrays, which svc encodes as asked.
 */
function floatsToBase64(answer: unknown): boolean {
  const data = (answer as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) return false;
  let changed = false;
  for (const item of data) {
    const vector = (item as { embedding?: unknown } | null)?.embedding;
    if (!Array.isArray(vector) || !vector.every((x) => typeof x === 'number')) continue;
    const buf = Buffer.allocUnsafe(vector.length * 4);
    vector.forEach((x: number, i) => buf.writeFloatLE(x, i * 4));
    (item as { embedding: unknown }).embedding = buf.toString('base64');
    changed = true;
  }
  return changed;
}

/** The event that ends a stream the upstream broke: the Responses API's `error` event, else `data: {"error":...}`. */
function streamErrorEvent(endpoint: Endpoint, message: string, code: string): string {
  const error = { message, type: 'upstream_error', code };
  if (endpoint === '/responses') return `event: error\ndata: ${JSON.stringify({ type: 'error', sequence_number: 0, code, message, param: null, error })}\n\n`;
  return `data: ${JSON.stringify({ error })}\n\n`;
}

/**
 * The OpenAI-compatible endpoints (decisions: The OpenAI proxy). Bodies are read raw and parsed once. A stream is
 * passed on line by line as it arrives; any other answer is read whole (bounded) before the first
 * byte goes to the app, so an upstream that stalls or breaks off gives a 504/502, never silence
 * or a truncated 200. The provider's key is scrubbed from everything relayed (see scrub.ts).
 */
export function proxyRoutes(deps: AppDeps, providers: ProvidersService, catalog: ModelCatalog): AnyRouteDef[] {
  /** The key to scrub from successful answers (short placeholders are left alone, see scrub.ts). */
  const scrubKey = (resolved: ResolvedModel) => {
    const key = providers.apiKey(resolved.provider);
    return key && key.length >= MIN_SCRUBBED_KEY_LENGTH ? key : null;
  };

  /**
   * Relays an upstream error: 4xx keep their status and OpenAI-shaped message, 5xx become 502, and
   * a provider that lacks the endpoint (404 not about a model, 405, 501) is a 404 naming it.
   */
  async function relayError(upstream: UpstreamResponse, resolved: ResolvedModel, endpoint: Endpoint): Promise<never> {
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
  async function relayStream(ctx: AppContext, upstream: UpstreamResponse, headers: Record<string, string>, endpoint: Endpoint, resolved: ResolvedModel, hideUsage: boolean): Promise<void> {
    const name = resolved.provider.name;
    const lines = new LineRelay(scrubKey(resolved), STREAM_LINE_LIMIT);
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
    // a stream cut off before its usage came leaves the counts unknown, not zero
    if (relay.tokens && ctx.state.activity) Object.assign(ctx.state.activity, relay.tokens);
  }

  /**
   * `raw` is the app's body as it came; it goes upstream untouched (no re-serialisation) unless
   * the model id must change or an alias adds defaults.
   */
  async function forward(ctx: AppContext, endpoint: Endpoint, raw: string, body: Record<string, unknown>, stream: boolean): Promise<void> {
    if (ctx.state.activity) ctx.state.activity.model = String(body.model);
    const resolved = await catalog.resolve(String(body.model));
    if (!resolved) throw modelNotFound(String(body.model));
    // A stream tells its token counts only when asked; svc asks for the app that did not, and
    // takes the answer out again (UsageTap), so the activity counts what the app spent.
    const askUsage = stream && (endpoint === '/chat/completions' || endpoint === '/completions') && !usageAsked(body);
    let outgoing = raw;
    if (resolved.defaults || resolved.upstreamModel !== body.model || askUsage) {
      if (deeperThan(body, MAX_REWRITE_DEPTH)) {
        throw invalidBody(`The request body nests deeper than ${MAX_REWRITE_DEPTH} levels, too deep for svc to rewrite for this model id.`);
      }
      const rewritten: Record<string, unknown> = resolved.defaults ? { ...resolved.defaults, ...body, model: resolved.upstreamModel } : { ...body, model: resolved.upstreamModel };
      if (askUsage) rewritten.stream_options = { ...(isObject(rewritten.stream_options) ? rewritten.stream_options : {}), include_usage: true };
      outgoing = JSON.stringify(rewritten);
    }
    const name = `provider ${resolved.provider.name}`;
    const abort = abortOnClientGone(ctx.res);
    const upstream = await callUpstream({
      url: upstreamUrl(resolved.provider.base_url, endpoint),
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        Accept: stream ? 'text/event-stream' : 'application/json',
        ...providers.upstreamHeaders(resolved.provider),
      },
      body: outgoing,
      timeoutMs: resolved.provider.timeout_ms,
      signal: abort,
      name,
    });
    if (upstream.statusCode >= 300) return relayError(upstream, resolved, endpoint);

    const contentType = String(upstream.headers['content-type'] ?? (stream ? 'text/event-stream' : 'application/json'));
    const headers: Record<string, string> = {
      'Content-Type': contentType,
      'Cache-Control': 'no-store',
      'X-Content-Type-Options': 'nosniff',
    };
    if (stream && /^text\/event-stream/i.test(contentType)) return relayStream(ctx, upstream, headers, endpoint, resolved, askUsage);

    // Read it all before writing anything: a failure here is still a proper 502/504.
    let buf: Buffer;
    try {
      buf = await readBody(upstream.body, UPSTREAM_ANSWER_LIMIT, name);
    } catch (err) {
      throw abort.aborted ? clientClosed() : err;
    }
    const tokens = ctx.state.activity ? usageInAnswer(buf) : null;
    if (tokens) Object.assign(ctx.state.activity!, tokens);
    let text: string | null = null;
    // A body without Content-Length or chunked framing ends when the connection does, so a reset
    // looks like an end: check that JSON is whole rather than pass on half of it.
    const framed = upstream.headers['content-length'] !== undefined || /chunked/i.test(String(upstream.headers['transfer-encoding'] ?? ''));
    const wantsBase64 = endpoint === '/embeddings' && (body.encoding_format ?? resolved.defaults?.encoding_format) === 'base64';
    if (/[/+]json/i.test(contentType) && (!framed || wantsBase64)) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(buf.toString('utf8'));
      } catch {
        throw upstreamUnavailable(`Upstream ${name} sent an incomplete or malformed answer.`);
      }
      if (wantsBase64 && floatsToBase64(parsed)) text = JSON.stringify(parsed);
    }
    const key = scrubKey(resolved);
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

  /** A POST that goes to the provider as it came (after the model checks), streamed when the body asks. */
  function passThrough<B extends z.ZodType<Record<string, unknown>>>(def: {
    endpoint: Endpoint;
    operationId: string;
    summary: string;
    description?: string;
    body: B;
    answers: string;
  }) {
    return defineRoute({
      method: 'post',
      path: `/v1${def.endpoint}`,
      operationId: def.operationId,
      summary: def.summary,
      ...(def.description ? { description: def.description } : {}),
      tags: ['openai'],
      auth: 'bearer',
      plane: 'data',
      rawBody: true,
      body: def.body,
      responses: { 200: { description: def.answers, schema: passthrough } },
      errors: [400, 401, 403, 404, 413, 502, 504],
      async handler(ctx) {
        const { raw, json } = await readJson(ctx.req, PROXY_BODY_LIMIT);
        const body = parseOrThrow(def.body, json, 'body');
        // embeddings never stream; the others do when the body asks
        await forward(ctx, def.endpoint, raw, body, def.endpoint !== '/embeddings' && (body as { stream?: unknown }).stream === true);
      },
    });
  }

  return [
    defineRoute({
      method: 'get',
      path: '/v1/models',
      operationId: 'listModels',
      summary: 'Models available to apps (aliases and provider models)',
      tags: ['openai'],
      auth: 'bearer',
      plane: 'data',
      responses: { 200: { description: 'OpenAI model list', schema: modelList } },
      errors: [401, 403],
      handler: async () => ({
        object: 'list' as const,
        data: (await catalog.listPublic()).map((m) => ({ id: m.id, object: 'model' as const, created: m.created, owned_by: m.owned_by })),
      }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/models/{id}',
      // the id may hold slashes (`<provider>/<model>`, `org/model`), encoded or not
      mountPath: '/v1/models/*id',
      operationId: 'retrieveModel',
      summary: 'One model available to apps, by id',
      tags: ['openai'],
      auth: 'bearer',
      plane: 'data',
      params: modelParams,
      responses: { 200: { description: 'OpenAI model object', schema: modelObject } },
      errors: [401, 403, 404],
      handler: async (_ctx, { params }) => {
        const m = await catalog.describe(params.id);
        if (!m) throw modelNotFound(params.id);
        return { id: m.id, object: 'model' as const, created: m.created, owned_by: m.owned_by };
      },
    }),
    passThrough({
      endpoint: '/chat/completions',
      operationId: 'createChatCompletion',
      summary: 'Chat completion, streamed (SSE) or not, passed through to the provider',
      body: chatCompletionBody,
      answers: 'OpenAI chat completion, or text/event-stream chunks when stream is true',
    }),
    passThrough({
      endpoint: '/embeddings',
      operationId: 'createEmbeddings',
      summary: 'Text embeddings, passed through to the provider',
      body: embeddingsBody,
      answers: 'OpenAI embeddings response',
    }),
    passThrough({
      endpoint: '/completions',
      operationId: 'createCompletion',
      summary: 'Text completion (legacy), streamed (SSE) or not, passed through to the provider',
      body: completionsBody,
      answers: 'OpenAI text completion, or text/event-stream chunks when stream is true',
    }),
    passThrough({
      endpoint: '/responses',
      operationId: 'createResponse',
      summary: 'Responses API call, streamed (typed SSE events) or not, passed through to the provider',
      description:
        'Needs a provider that serves /responses; one that does not gives 404 unsupported_endpoint. Only the create call is proxied: ' +
        'retrieving, cancelling or deleting a stored response by id is not.',
      body: responsesBody,
      answers: 'OpenAI response object, or text/event-stream events (response.created, response.output_text.delta, ...) when stream is true',
    }),
  ];
}
