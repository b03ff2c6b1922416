import type { StreamTransform } from '../upstream/pump.js';

/** Token counts as OpenAI-compatible servers report them: chat and completions, embeddings, and the Responses API. */
export interface Tokens {
  tokens_in?: number;
  tokens_out?: number;
}

function tokensOf(usage: unknown): Tokens | null {
  if (!usage || typeof usage !== 'object') return null;
  const u = usage as Record<string, unknown>;
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : undefined);
  const tokensIn = num(u.prompt_tokens) ?? num(u.input_tokens);
  const tokensOut = num(u.completion_tokens) ?? num(u.output_tokens);
  if (tokensIn === undefined && tokensOut === undefined) return null;
  return { ...(tokensIn !== undefined ? { tokens_in: tokensIn } : {}), ...(tokensOut !== undefined ? { tokens_out: tokensOut } : {}) };
}

/**
 * The usage of a whole (non-streamed) answer. It is the last `"usage"` key of the body (the
 * answer's own: any text that spells the key inside a string has its quotes escaped), so only the
 * bytes after it are looked at, never the whole answer parsed.
 */
const USAGE_KEY = Buffer.from('"usage"');

export function usageInAnswer(body: Buffer): Tokens | null {
  // a Buffer needle: a string one would be encoded again on every call
  const at = body.lastIndexOf(USAGE_KEY);
  if (at === -1) return null;
  const tail = body.subarray(at, at + 4096).toString('utf8');
  const open = tail.indexOf('{');
  if (open === -1) return null;
  let depth = 0;
  for (let i = open; i < tail.length; i++) {
    if (tail[i] === '{') depth++;
    else if (tail[i] === '}' && --depth === 0) {
      try {
        return tokensOf(JSON.parse(tail.slice(open, i + 1)));
      } catch {
        return null;
      }
    }
  }
  return null;
}

/**
 * Reads the usage out of an event stream as it passes (whole lines come in: the relay before it
 * cuts at newlines). When svc asked the upstream for usage on the app's behalf (`hide`), the app
 * gets exactly the stream it asked for: the usage chunk is removed, and so is the `"usage":null`
 * every other chunk then carries. Lines without the word pass untouched, so this costs one byte
 * search per chunk.
 */
export class UsageTap implements StreamTransform {
  /** what was read; null while no usage has come (a stream cut off before it counts as unknown) */
  tokens: Tokens | null = null;

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

  private look(out: Buffer | string | null): Buffer | string | null {
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
    const found = tokensOf(event.usage) ?? tokensOf(response?.usage);
    if (found) this.tokens = found;
    if (!this.hide || !('usage' in event)) return line;
    if (found && Array.isArray(event.choices) && event.choices.length === 0) return null;
    delete event.usage;
    return `data: ${JSON.stringify(event)}${line.endsWith('\r') ? '\r' : ''}`;
  }
}
