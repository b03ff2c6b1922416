import { z } from 'zod';
import { AppError, invalidBody } from '../errors.js';
import type { Middleware } from 'koa';
import type { AppContext, AppDeps, AppState, ErrorShape } from '../http/context.js';
import { type AnyRouteDef, defineRoute } from '../http/route.js';
import { LookalikeKeys } from '../http/lookalike-keys.js';
import { repeatedKey } from '../http/repeated-keys.js';
import { compiledSchema, parseOrThrow } from '../http/validate.js';
import type { ModelCatalog } from '../models/catalog.js';
import type { ProvidersService } from '../providers/service.js';
import { readJson } from '../upstream/body.js';
import { type Endpoint, modelNotFound } from './answers.js';
import { createForwarder, type Forward, openAiDialect, resolveModel } from './forward.js';
import { anthropicErrorBody, anthropicErrorType, countTokens, countTokensRequest, messagesRequest } from './messages/index.js';
import { passedCountTokens, passedMessages, speaksMessages, translatedMessages } from './messages/dialect.js';

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

/**
 * The last stop of the data plane: a /v1 path no route serves (moderations, images, audio, a
 * stored response by id) is the 404 OpenAI answers for a URL it does not know (invalid_request_error,
 * "Invalid URL (POST /v1/...)"), with svc's code and what it does serve, so an app's client shows
 * what is missing rather than a bare "Not found". A served path asked with another method is left to the
 * router's 405.
 */
export function unservedEndpoint(served: (path: string) => boolean): Middleware<AppState> {
  return function unservedEndpoint(ctx) {
    if (served(ctx.path)) return;
    const asked = `${ctx.method} ${ctx.path.slice(0, 200)}`;
    throw new AppError(
      'unsupported_endpoint',
      `Invalid URL (${asked}): svc does not serve it. It proxies GET /v1/models, POST /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses (creating a response, not reading a stored one back), and Anthropic's POST /v1/messages and /v1/messages/count_tokens.`,
    );
  };
}

/** Anthropic's body for an error of svc's: its type said in Anthropic's words, the status kept. */
const anthropicError = (error: AppError) => anthropicErrorBody(anthropicErrorType(error.status, error.code), error.expose ? error.message : 'Internal error');

/**
 * The Messages paths answer errors in Anthropic's shape, and carry the request id under
 * Anthropic's header name (`request-id`) beside svc's `x-request-id`; set as soon as the request
 * has its id, so a refusal before the handler (a 401, a 429) is in that shape too.
 */
export const messagesErrorShape: ErrorShape = function messagesErrorShape(ctx) {
  if (ctx.path === '/v1/messages' || ctx.path.startsWith('/v1/messages/')) {
    ctx.state.errorBody = anthropicError;
    ctx.set('request-id', ctx.state.requestId);
  }
};

/**
 * The OpenAI-compatible endpoints (decisions: The OpenAI proxy): the model list from the catalog,
 * and the calls that are forwarded to the model's provider (see forward.ts). Bodies are read raw
 * and parsed once.
 */
export function proxyRoutes(deps: AppDeps, providers: ProvidersService, catalog: ModelCatalog): AnyRouteDef[] {
  const forward = createForwarder({ logger: deps.logger, providers, catalog, pingMs: deps.config.messagesPingMs });
  return [...modelRoutes(catalog), ...forwardedRoutes(forward), ...messagesRoutes(forward, catalog)];
}

/** GET /v1/models and /v1/models/{id}: what apps may name as a model. */
function modelRoutes(catalog: ModelCatalog): AnyRouteDef[] {
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
  ];
}

/** The POSTs that go to the provider of the model they name. */
function forwardedRoutes(forward: Forward): AnyRouteDef[] {
  return [
    passThrough(forward, {
      endpoint: '/chat/completions',
      operationId: 'createChatCompletion',
      summary: 'Chat completion, streamed (SSE) or not, passed through to the provider',
      body: chatCompletionBody,
      answers: 'OpenAI chat completion, or text/event-stream chunks when stream is true',
    }),
    passThrough(forward, {
      endpoint: '/embeddings',
      operationId: 'createEmbeddings',
      summary: 'Text embeddings, passed through to the provider',
      body: embeddingsBody,
      answers: 'OpenAI embeddings response',
    }),
    passThrough(forward, {
      endpoint: '/completions',
      operationId: 'createCompletion',
      summary: 'Text completion (legacy), streamed (SSE) or not, passed through to the provider',
      body: completionsBody,
      answers: 'OpenAI text completion, or text/event-stream chunks when stream is true',
    }),
    passThrough(forward, {
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

/**
 * The keys svc reads in a /v1 body (to route, record, stream, count and reserve tokens), and in
 * its `stream_options`. An upstream that matches keys without regard to case (Go's
 * encoding/json, as in Ollama's OpenAI layer) would read `"Stream": true` as a stream svc never
 * asked usage of, or `"Model"` as another model than the one svc routed and recorded: such a body
 * is refused, naming the key, rather than guessed at. Top-level keys only (and the one object
 * svc reads inside), looked up in sets built once.
 */
const BODY_KEYS = new LookalikeKeys(['model', 'messages', 'prompt', 'input', 'stream', 'stream_options', 'max_tokens', 'max_completion_tokens', 'max_output_tokens', 'n', 'encoding_format']);
const STREAM_OPTION_KEYS = new LookalikeKeys(['include_usage']);

/**
 * Refuses a body an upstream could read otherwise than svc did: a key that a lenient upstream
 * would read as one svc reads, though it is not that key, or a key given twice (JSON.parse keeps
 * the last, some parsers the first). The body goes upstream as its text, so either would let the
 * upstream act on a model, stream or token cap svc never checked.
 */
function refuseAmbiguousKeys(body: Record<string, unknown>, raw: string): void {
  const found = BODY_KEYS.find(body) ?? STREAM_OPTION_KEYS.find(body.stream_options);
  if (found) {
    throw invalidBody(`The request body has the key ${JSON.stringify(found.key.slice(0, 40))}, which some servers read as "${found.as}"; write it "${found.as}" (keys are exact).`, found.key.slice(0, 40));
  }
  const twice = repeatedKey(raw, 'stream_options');
  if (twice !== undefined) {
    throw invalidBody(`The request body has the key ${JSON.stringify(twice.slice(0, 40))} twice; servers differ on which one they read, so give it once.`, twice.slice(0, 40));
  }
}

/** What one forwarded endpoint declares: its path, its OpenAPI naming and its body's schema. */
interface ForwardedEndpoint<B> {
  endpoint: Endpoint;
  operationId: string;
  summary: string;
  description?: string;
  body: B;
  answers: string;
}

/** A POST that goes to the provider as it came (after the model checks), streamed when the body asks. */
function passThrough<B extends z.ZodType<Record<string, unknown>>>(forward: Forward, def: ForwardedEndpoint<B>) {
  const dialect = openAiDialect(def.endpoint);
  const bodySchema = compiledSchema(def.body);
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
    errors: [400, 401, 403, 404, 413, 429, 502, 504],
    async handler(ctx) {
      const { raw, json } = await readJson(ctx.req, PROXY_BODY_LIMIT);
      const body = parseOrThrow(bodySchema, json, 'body');
      refuseAmbiguousKeys(body, raw);
      // embeddings never stream; the others do when the body asks
      await forward(ctx, dialect, raw, body, def.endpoint !== '/embeddings' && (body as { stream?: unknown }).stream === true);
    },
  });
}


const anthropicMessage = z.looseObject({ type: z.literal('message') }).describe("Anthropic's Message, or text/event-stream events (message_start ... message_stop) when stream is true");
const tokenCount = z.object({ input_tokens: z.number().int() }).meta({ id: 'MessagesTokenCount', description: "The provider's own count where it serves the Messages API, else svc's estimate" });

/** A Messages path's body: read raw (bounded), parsed once against its schema, refused when it has a lookalike key. */
async function readMessagesBody<S extends z.ZodType<Record<string, unknown>>>(ctx: AppContext, schema: S): Promise<{ raw: string; body: z.infer<S> }> {
  const { raw, json } = await readJson(ctx.req, PROXY_BODY_LIMIT);
  const body = parseOrThrow(schema, json, 'body');
  refuseAmbiguousKeys(body, raw);
  return { raw, body };
}

/**
 * Anthropic's Messages API (docs/api.md, /v1/messages): on the same grants, limits, activity and
 * forward as chat. A provider that serves the Messages API gets the call passed through; any
 * other gets it translated onto its /chat/completions. Any query (Claude Code's `?beta=true`) is
 * accepted and ignored.
 */
function messagesRoutes(forward: Forward, catalog: ModelCatalog): AnyRouteDef[] {
  const messagesBody = compiledSchema(messagesRequest);
  const countTokensBody = compiledSchema(countTokensRequest);
  return [
    defineRoute({
      method: 'post',
      path: '/v1/messages',
      operationId: 'createMessage',
      summary: "Anthropic Messages API call, streamed (SSE events) or not: translated onto the provider's chat completions, or passed through to one that serves /messages",
      tags: ['anthropic'],
      auth: 'bearer',
      plane: 'data',
      rawBody: true,
      body: messagesRequest,
      responses: { 200: { description: 'Anthropic Message, or its event stream', schema: anthropicMessage } },
      errors: [400, 401, 403, 404, 413, 429, 502, 504],
      async handler(ctx) {
        const { raw, body } = await readMessagesBody(ctx, messagesBody);
        await forward(ctx, (resolved) => (speaksMessages(resolved) ? passedMessages : translatedMessages), raw, body, body.stream === true);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/v1/messages/count_tokens',
      operationId: 'countMessageTokens',
      summary: "The input tokens of a Messages request: the provider's own count where it serves the Messages API, else svc's estimate",
      description: "svc's estimate is a token per 4 bytes of the text the model reads and a flat count per image, not a tokenizer's count.",
      tags: ['anthropic'],
      auth: 'bearer',
      plane: 'data',
      rawBody: true,
      body: countTokensRequest,
      responses: { 200: { description: 'The count', schema: tokenCount } },
      errors: [400, 401, 403, 404, 413, 429, 502, 504],
      async handler(ctx) {
        const { raw, body } = await readMessagesBody(ctx, countTokensBody);
        if (ctx.state.activity) ctx.state.activity.model = body.model;
        const resolved = await resolveModel(catalog, body);
        if (speaksMessages(resolved)) return forward(ctx, passedCountTokens, raw, body, false);
        return countTokens(body);
      },
    }),
  ];
}
