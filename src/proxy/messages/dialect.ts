/**
 * The Messages API over svc's one forward (src/proxy/forward.ts): what differs from the OpenAI
 * endpoints, as two dialects. A provider that speaks only chat completions gets the call
 * translated (to-chat.ts, from-chat.ts, stream.ts); one added with `--api messages` gets it
 * passed through to its own /messages. Either way the app sees Anthropic's format, and the
 * forward's grant checks, limits, activity and key scrubbing are the same as chat's.
 */
import { invalidBody } from '../../errors.js';
import { tokensOf, tokensOfBytes, UsageTap } from '../../activity/usage.js';
import type { ResolvedModel } from '../../models/catalog.js';
import { upstreamUnavailable } from '../../upstream/client.js';
import type { LineRelay } from '../../upstream/scrub.js';
import { deeperThan } from '../answers.js';
import { type Dialect, MAX_REWRITE_DEPTH, outgoingBody, type StreamRelay } from '../forward.js';
import { anthropicErrorType, errorEvent } from './errors.js';
import { fromChat, MalformedAnswerError } from './from-chat.js';
import type { MessagesRequest } from './schemas.js';
import { MessagesStream, MessagesTransform } from './stream.js';
import { toChat, UntranslatableError } from './to-chat.js';

/** The Anthropic error type of a stream that broke: a silent upstream is overloaded, a broken one an api_error. */
const breakType = (code: 'upstream_unavailable' | 'upstream_timeout') => anthropicErrorType(code === 'upstream_timeout' ? 504 : 502, code);

/** Whether a provider serves the Messages API itself (`svc providers add --api messages`). */
export const speaksMessages = (resolved: ResolvedModel) => resolved.provider.api === 'messages';

/** A Messages call onto a provider's /chat/completions: the request, the answer and the stream translated. */
export const translatedMessages: Dialect = {
  endpoint: '/messages',
  upstreamPath: () => '/chat/completions',
  outgoing(raw, body, resolved) {
    if (deeperThan(body, MAX_REWRITE_DEPTH, raw)) throw invalidBody(`The request body nests deeper than ${MAX_REWRITE_DEPTH} levels, too deep for svc to translate.`);
    let chat;
    try {
      chat = toChat(body as MessagesRequest, resolved.upstreamModel);
    } catch (err) {
      if (err instanceof UntranslatableError) throw invalidBody(err.message);
      throw err;
    }
    // an alias's defaults are chat fields; the app's translated request wins over them
    return { text: JSON.stringify(resolved.defaults ? { ...resolved.defaults, ...chat } : chat), askedUsage: false };
  },
  headers: (providers, resolved) => providers.upstreamHeaders(resolved.provider),
  streamRelay(lines, _asked, body, requestBytes) {
    const req = body as MessagesRequest;
    const translator = new MessagesStream({ model: req.model, stopSequences: req.stop_sequences, inputTokens: tokensOfBytes(requestBytes) });
    const transform = new MessagesTransform(lines, translator);
    return {
      push: (chunk) => transform.push(chunk),
      end: () => transform.end(),
      // a stream cut before the upstream's usage counts svc's estimate: its input, a token a delta
      counted: () => translator.tokens ?? { tokens_in: tokensOfBytes(requestBytes), tokens_out: translator.deltas, tokens_estimated: true },
      broke(_why, message, code) {
        lines.abandon();
        return translator.fail(breakType(code), message);
      },
      start: () => translator.begin(),
      ping: () => translator.ping(),
    };
  },
  answer(whole, body, name) {
    const req = body as MessagesRequest;
    let parsed: unknown;
    try {
      parsed = JSON.parse(whole);
    } catch {
      throw upstreamUnavailable(`Upstream ${name} sent an incomplete or malformed answer.`);
    }
    try {
      const message = fromChat(parsed, { model: req.model, stopSequences: req.stop_sequences });
      // the usage read from the answer already parsed, not looked for again in its bytes
      return { text: JSON.stringify(message), tokens: tokensOf((parsed as { usage?: unknown }).usage) };
    } catch (err) {
      if (err instanceof MalformedAnswerError) throw upstreamUnavailable(`Upstream ${name} answered something that is not a chat completion.`);
      throw err;
    }
  },
};

/**
 * The headers of the app's that mean something to a provider serving the Messages API: its
 * version (svc names one when the app does not) and its betas. Never the app's credential.
 */
function anthropicHeaders(ctx: { get(name: string): string }): { version: string | undefined; beta: Record<string, string> } {
  const version = ctx.get('anthropic-version').slice(0, 100) || undefined;
  const beta = ctx.get('anthropic-beta').slice(0, 2000);
  return { version, beta: beta ? { 'anthropic-beta': beta } : {} };
}

/** The relay of a passed-through Messages stream: as it came, its usage read from message_start and message_delta both. */
function passedStream(lines: LineRelay): StreamRelay {
  const tap = new UsageTap(lines, false);
  return {
    push: (chunk) => tap.push(chunk),
    end: () => tap.end(),
    counted: (requestBytes) => (tap.tokens && tap.tokens.tokens_in !== undefined && tap.tokens.tokens_out !== undefined ? tap.tokens : { ...tap.estimate(requestBytes), ...tap.tokens, tokens_estimated: true }),
    broke: (_why, message, code) => lines.abandon() + errorEvent(breakType(code), message),
    start: () => '',
  };
}

/** A Messages call passed through to a provider that serves the Messages API: the body as it came (model id rewritten), its key where the provider wants it. */
export const passedMessages: Dialect = {
  endpoint: '/messages',
  upstreamPath: () => '/messages',
  outgoing: (raw, body, resolved) => ({ text: outgoingBody(raw, body, resolved, false), askedUsage: false }),
  headers(providers, resolved, ctx) {
    const { version, beta } = anthropicHeaders(ctx);
    return { ...providers.messagesHeaders(resolved.provider, version), ...beta };
  },
  streamRelay: (lines) => passedStream(lines),
};

/** count_tokens passed through to the provider's own /messages/count_tokens: it spends nothing. */
export const passedCountTokens: Dialect = {
  ...passedMessages,
  upstreamPath: () => '/messages/count_tokens',
  spends: false,
};
