import type { StreamTransform } from '../upstream/pump.js';

/** Token counts as OpenAI-compatible servers report them: chat and completions, embeddings, and the Responses API. */
export interface Tokens {
  tokens_in?: number;
  tokens_out?: number;
}

/** The token counts of a parsed `usage` object (chat's names or the Messages API's); null when it has none. */
export function tokensOf(usage: unknown): Tokens | null {
  if (!usage || typeof usage !== 'object') return null;
  const u = usage as Record<string, unknown>;
  const tokensIn = count(u.prompt_tokens) ?? count(u.input_tokens);
  const tokensOut = count(u.completion_tokens) ?? count(u.output_tokens);
  if (tokensIn === undefined && tokensOut === undefined) return null;
  // a count not given stays absent (not undefined): the counts found are merged over others
  const tokens: Tokens = {};
  if (tokensIn !== undefined) tokens.tokens_in = tokensIn;
  if (tokensOut !== undefined) tokens.tokens_out = tokensOut;
  return tokens;
}

/** A token count as a usage object gives it: a whole number of at least 0, else none. */
const count = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : undefined);

/** svc's estimate of the tokens in so many bytes of a request: one per 4 bytes. */
export const tokensOfBytes = (bytes: number): number => Math.ceil(bytes / 4);

/**
 * The usage of a whole (non-streamed) answer: its top-level `"usage"` key. Answers put it at or
 * near the end, but not always last: OpenAI's Responses API echoes the request's `user` and
 * `metadata` after it, so the last `"usage"` in the bytes may be the app's own (`metadata:
 * {"usage": "x"}`), which would leave the call uncounted. The key is found by walking back from
 * the end, whole strings at a time, so only the bytes after it are looked at, never the whole
 * answer parsed.
 */
export function usageInAnswer(body: Buffer): Tokens | null {
  let at = topLevelUsage(body);
  if (at === FAR) {
    // usage far from the end (an answer that puts it first): its last spelling, found natively
    const key = body.lastIndexOf(USAGE_KEY);
    at = key === -1 ? -1 : body.indexOf(0x7b, key);
  }
  return at === -1 ? null : parsedUsage(body, at, objectEnd(body, at));
}

/** The tokens of the JSON object at body[start..end] (end its closing brace; -1: none found). */
function parsedUsage(body: Buffer, start: number, end: number): Tokens | null {
  if (end === -1) return null;
  try {
    return tokensOf(JSON.parse(body.toString('utf8', start, end + 1)));
  } catch {
    return null;
  }
}

/**
 * The brace that closes the object opening at `start`, by counting braces over the bytes (within
 * 4 KiB: a usage object is a few counts); -1 when it does not close there. Bytes, not a decoded
 * copy: a brace is one byte in UTF-8, and no byte of another character is one.
 */
function objectEnd(body: Buffer, start: number): number {
  let depth = 0;
  const stop = Math.min(body.length, start + 4096);
  for (let i = start; i < stop; i++) {
    if (body[i] === 0x7b) depth++;
    else if (body[i] === 0x7d && --depth === 0) return i;
  }
  return -1;
}

/**
 * Reads the usage out of an event stream as it passes (whole lines come in: the relay before it
 * cuts at newlines). When svc asked the upstream for usage on the app's behalf (`hide`), the app
 * gets exactly the stream it asked for: the usage chunk is removed, and so is the `"usage":null`
 * every other chunk then carries. Lines without the word pass untouched, so this costs one byte
 * search per chunk.
 */
export class UsageTap implements StreamTransform {
  /** what was read; null while no usage has come */
  tokens: Tokens | null = null;
  /** the data lines passed on: a streamed chunk is about a token, for estimate() */
  private dataLines = 0;

  constructor(
    private readonly inner: StreamTransform,
    private readonly hide: boolean,
  ) {}

  push(chunk: Buffer): Buffer | string | null {
    return this.look(this.inner.push(chunk));
  }

  end(): Buffer | string | null {
    return this.look(this.inner.end());
  }

  /**
   * The tokens of a stream that ended without its usage (the app hung up first, or the upstream
   * reports none), estimated: a token a data line passed on (servers stream about one each), and
   * one per 4 bytes of the request for what went in. Counted all the same, so that hanging up
   * before the usage comes is no way round a tokens-a-day limit.
   */
  estimate(requestBytes: number): Tokens {
    return { tokens_in: tokensOfBytes(requestBytes), tokens_out: this.dataLines };
  }

  private look(out: Buffer | string | null): Buffer | string | null {
    if (out !== null) this.dataLines += countDataLines(out);
    if (out === null || out.indexOf('"usage"') === -1) return out;
    const lines = out.toString().split('\n');
    const kept: string[] = [];
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      if (!line.startsWith('data:') || !line.includes('"usage"')) {
        kept.push(line);
        continue;
      }
      const result = this.readLine(line);
      if (result === null) {
        // the chunk was only usage: it goes, with the blank line that ended its event
        if (lines[i + 1] === '' || lines[i + 1] === '\r') i++;
        continue;
      }
      kept.push(result);
    }
    return kept.join('\n');
  }

  /** The line to send on, or null to drop it. */
  private readLine(line: string): string | null {
    // the common case when hiding: a content chunk whose usage is null, taken out as text
    if (this.hide && line.includes('"usage":null')) {
      const cut = line.replace(',"usage":null', '').replace('"usage":null,', '');
      if (!cut.includes('"usage"')) return cut;
    }
    const payload = line.slice(line.startsWith('data: ') ? 6 : 5).trimEnd();
    let event: Record<string, unknown>;
    try {
      event = JSON.parse(payload) as Record<string, unknown>;
    } catch {
      return line;
    }
    const response = event.response as Record<string, unknown> | undefined;
    const message = event.message as Record<string, unknown> | undefined;
    const found = tokensOf(event.usage) ?? tokensOf(response?.usage) ?? tokensOf(message?.usage);
    // Anthropic's stream tells the input in message_start and the output in message_delta: each
    // count found is kept beside the others, not in place of them
    if (found) this.tokens = { ...this.tokens, ...found };
    if (!this.hide || !('usage' in event)) return line;
    if (found && Array.isArray(event.choices) && event.choices.length === 0) return null;
    delete event.usage;
    return `data: ${JSON.stringify(event)}${line.endsWith('\r') ? '\r' : ''}`;
  }
}

/** How many lines of `out` (whole lines of an event stream) are data lines, `data: [DONE]` aside. */
function countDataLines(out: Buffer | string): number {
  let n = out.indexOf('data:') === 0 ? 1 : 0;
  for (let at = out.indexOf('\ndata:'); at !== -1; at = out.indexOf('\ndata:', at + 6)) n++;
  return n - (out.indexOf('data: [DONE]') !== -1 ? 1 : 0);
}

const QUOTE = 0x22;
/**
 * How far back from the end the top-level usage is looked for. Byte by byte, a walk costs about
 * 2 ms a MiB; servers put usage at or near the end, so this is reached only by an answer that
 * puts it first (topLevelUsage answers FAR), and then its last spelling is taken, as found.
 */
const WALK_LIMIT = 1024 * 1024;
const FAR = -2;
const USAGE_KEY = Buffer.from('"usage"');
const BACKSLASH = 0x5c;

/** Whether body[start..start+6] is the string `"usage"` (its quotes included). */
const isUsageKey = (body: Buffer, start: number) =>
  body[start + 1] === 0x75 && body[start + 2] === 0x73 && body[start + 3] === 0x61 && body[start + 4] === 0x67 && body[start + 5] === 0x65;

/** Where the object under the top-level `"usage"` key of a JSON object starts, walking back from its end; -1 when it has none, FAR past WALK_LIMIT. */
function topLevelUsage(body: Buffer): number {
  let depth = 0;
  const stop = body.length - WALK_LIMIT;
  for (let i = body.length - 1; i >= 0; i--) {
    if (i < stop) return FAR;
    const c = body[i];
    if (c === 0x7d || c === 0x5d) depth++; // } ]
    else if (c === 0x7b || c === 0x5b) depth--; // { [
    else if (c === QUOTE) {
      const start = openingQuote(body, i);
      if (start === -1) return -1;
      // at the top level, the key (a colon follows, not so a value "usage"), then its object
      const colon = depth === 1 && i - start === 6 && isUsageKey(body, start) ? skipSpace(body, i + 1) : -1;
      if (colon !== -1 && body[colon] === 0x3a) {
        const value = skipSpace(body, colon + 1);
        return body[value] === 0x7b ? value : -1;
      }
      i = start;
    }
  }
  return -1;
}

/** The quote that opens the JSON string closed at `end`: the nearest one before it not escaped. */
function openingQuote(body: Buffer, end: number): number {
  // (a negative offset would count from the end)
  for (let at = end > 0 ? body.lastIndexOf(QUOTE, end - 1) : -1; at !== -1; at = at > 0 ? body.lastIndexOf(QUOTE, at - 1) : -1) {
    let slashes = 0;
    while (at - slashes - 1 >= 0 && body[at - slashes - 1] === BACKSLASH) slashes++;
    if (slashes % 2 === 0) return at;
  }
  return -1;
}

/** The first byte from `at` that is not JSON whitespace. */
function skipSpace(body: Buffer, at: number): number {
  let i = at;
  while (i < body.length && (body[i] === 0x20 || body[i] === 0x0a || body[i] === 0x0d || body[i] === 0x09)) i++;
  return i;
}
