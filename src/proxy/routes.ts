import { z } from 'zod';
import { AppError } from '../errors.js';
import type { AppContext, AppDeps } from '../http/context.js';
import { type AnyRouteDef, defineRoute } from '../http/route.js';
import { parseOrThrow } from '../http/validate.js';
import type { ModelCatalog, ResolvedModel } from '../models/catalog.js';
import type { ProvidersService } from '../providers/service.js';
import { readJson } from './body.js';
import { abortOnClientGone, callUpstream, readBody, type UpstreamResponse, upstreamUnavailable, upstreamUrl } from './upstream.js';

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
const modelList = z.object({
  object: z.literal('list'),
  data: z.array(z.object({ id: z.string(), object: z.literal('model'), created: z.number(), owned_by: z.string() })),
});
const passthrough = z.looseObject({}).describe('The upstream OpenAI-format response, passed through');

const modelNotFound = (model: string) =>
  new AppError(404, 'not_found_error', 'model_not_found', `The model ${JSON.stringify(model.slice(0, 200))} does not exist here.`, { param: 'model' });

/**
 * The OpenAI-compatible endpoints (CONTRACT §8). Bodies are read raw and parsed once; responses
 * are piped from the upstream without parsing, so a stream reaches the app chunk by chunk.
 */
export function proxyRoutes(deps: AppDeps, providers: ProvidersService, catalog: ModelCatalog): AnyRouteDef[] {
  const scrub = (text: string, key: string | null) => (key ? text.split(key).join('[redacted]') : text);

  /** Relays an upstream error: 4xx keep their status and OpenAI-shaped message, 5xx become 502. */
  async function relayError(upstream: UpstreamResponse, resolved: ResolvedModel): Promise<void> {
    const status = upstream.statusCode;
    const text = scrub((await readBody(upstream.body, 1024 * 1024).catch(() => Buffer.alloc(0))).toString('utf8'), providers.apiKey(resolved.provider));
    if (status >= 500 || status < 400) throw upstreamUnavailable(`The upstream model server answered ${status}.`);
    // The app's token was fine; it is svc's key for this provider that was refused. A 401 here
    // would read to the app's client as its own credentials failing.
    if (status === 401 || status === 403) {
      throw new AppError(502, 'upstream_error', 'upstream_rejected', `The upstream model server refused svc's credentials for provider ${resolved.provider.name} (${status}).`);
    }
    let upstreamMessage = text.slice(0, 2000);
    try {
      const parsed = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
      const m = typeof parsed.error === 'string' ? parsed.error : (parsed.error?.message ?? parsed.message);
      if (typeof m === 'string') upstreamMessage = m.slice(0, 2000);
    } catch {
      /* not JSON: keep the text */
    }
    throw new AppError(status, status === 404 ? 'not_found_error' : 'invalid_request_error', 'upstream_rejected', upstreamMessage || `The upstream model server answered ${status}.`);
  }

  /**
   * `raw` is the app's body as it came; it goes upstream untouched (no re-serialisation) unless
   * the model id must change or an alias adds defaults.
   */
  async function forward(ctx: AppContext, path: '/chat/completions' | '/embeddings', raw: string, body: Record<string, unknown>, stream: boolean): Promise<void> {
    const resolved = catalog.resolve(String(body.model));
    if (!resolved) throw modelNotFound(String(body.model));
    const outgoing =
      !resolved.defaults && resolved.upstreamModel === body.model
        ? raw
        : JSON.stringify(resolved.defaults ? { ...resolved.defaults, ...body, model: resolved.upstreamModel } : { ...body, model: resolved.upstreamModel });
    const abort = abortOnClientGone(ctx.res);
    const upstream = await callUpstream({
      url: upstreamUrl(resolved.provider.base_url, path),
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        Accept: stream ? 'text/event-stream' : 'application/json',
        ...providers.upstreamHeaders(resolved.provider),
      },
      body: outgoing,
      timeoutMs: resolved.provider.timeout_ms,
      signal: abort,
    });
    if (upstream.statusCode >= 300) return relayError(upstream, resolved);

    const res = ctx.res;
    ctx.respond = false;
    const contentType = String(upstream.headers['content-type'] ?? (stream ? 'text/event-stream' : 'application/json'));
    const headers: Record<string, string> = {
      'Content-Type': contentType,
      'Cache-Control': 'no-store',
      'X-Content-Type-Options': 'nosniff',
    };
    if (ctx.response.get('Access-Control-Allow-Origin')) headers['Access-Control-Allow-Origin'] = '*';
    const length = Number(upstream.headers['content-length']);
    if (!stream && Number.isFinite(length) && length <= 4 * 1024 * 1024) {
      // A whole small answer: headers and body leave in one write.
      const buf = await readBody(upstream.body, length + 1);
      headers['Content-Length'] = String(buf.length);
      res.writeHead(upstream.statusCode, headers);
      // a string body leaves with the headers in one write (a Buffer would take a writev)
      res.end(buf.toString('latin1'), 'latin1');
      return;
    }
    if (stream) headers['X-Accel-Buffering'] = 'no';
    res.writeHead(upstream.statusCode, headers);
    // A stream's headers go at once, so the app sees the answer start as the upstream does.
    if (stream) res.flushHeaders();
    const answer = upstream.body;
    await new Promise<void>((resolve) => {
      let ended = false;
      answer.on('data', (chunk: Buffer) => {
        if (!res.write(chunk)) {
          answer.pause();
          res.once('drain', () => answer.resume());
        }
      });
      answer.once('end', () => {
        ended = true;
        res.end();
        resolve();
      });
      answer.once('error', () => {
        // The upstream broke off or stalled: say so in the stream's own format, then end it.
        if (!res.writableEnded && !abort.aborted) {
          deps.logger.warn({ requestId: ctx.state.requestId, provider: resolved.provider.name }, 'upstream stream broke off');
          if (stream) res.write(`data: ${JSON.stringify({ error: { message: 'The upstream model server broke off the stream.', type: 'upstream_error', code: 'upstream_unavailable' } })}\n\n`);
          res.end();
        }
        resolve();
      });
      res.once('close', () => {
        if (!ended) answer.destroy();
        resolve();
      });
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
      responses: { 200: { description: 'OpenAI model list', schema: modelList } },
      errors: [401, 403],
      handler: () => ({
        object: 'list' as const,
        data: catalog.listPublic().map((m) => ({ id: m.id, object: 'model' as const, created: m.created, owned_by: m.owned_by })),
      }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/chat/completions',
      operationId: 'createChatCompletion',
      summary: 'Chat completion, streamed (SSE) or not, passed through to the provider',
      tags: ['openai'],
      auth: 'bearer',
      rawBody: true,
      body: chatCompletionBody,
      responses: {
        200: { description: 'OpenAI chat completion, or text/event-stream chunks when stream is true', schema: passthrough },
      },
      errors: [400, 401, 403, 404, 413],
      async handler(ctx) {
        const { raw, json } = await readJson(ctx.req, PROXY_BODY_LIMIT);
        const body = parseOrThrow(chatCompletionBody, json, 'body');
        await forward(ctx, '/chat/completions', raw, body, body.stream === true);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/v1/embeddings',
      operationId: 'createEmbeddings',
      summary: 'Text embeddings, passed through to the provider',
      tags: ['openai'],
      auth: 'bearer',
      rawBody: true,
      body: embeddingsBody,
      responses: { 200: { description: 'OpenAI embeddings response', schema: passthrough } },
      errors: [400, 401, 403, 404, 413],
      async handler(ctx) {
        const { raw, json } = await readJson(ctx.req, PROXY_BODY_LIMIT);
        const body = parseOrThrow(embeddingsBody, json, 'body');
        await forward(ctx, '/embeddings', raw, body, false);
      },
    }),
  ];
}
