/**
 * Keeps a provider's API key out of what svc relays from that provider. An upstream may echo the
 * key in an error, and JSON lets it spell the key many ways (`\/` for a slash, `\u0073` for an
 * "s", any mix of them), so matching the raw bytes is not enough: the pattern matches every JSON
 * spelling of each character, and JSON bodies are scrubbed in their decoded strings.
 */
export const REDACTED = '[redacted]';

/** Keys shorter than this are placeholders ("ollama", "none"), not secrets worth rewriting answers for. */
export const MIN_SCRUBBED_KEY_LENGTH = 8;

const patterns = new Map<string, RegExp>();

const hexIgnoringCase = (unit: number) =>
  unit
    .toString(16)
    .padStart(4, '0')
    .replace(/[a-f]/g, (c) => `[${c}${c.toUpperCase()}]`);

/** A global pattern matching the key with every character raw or JSON-escaped (`\uXXXX`, `\/`, `\"`, `\\`). */
export function keyPattern(key: string): RegExp {
  let re = patterns.get(key);
  if (re) return re;
  let source = '';
  for (const ch of key) {
    const alternatives = [ch.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&')];
    let escaped = '';
    for (let i = 0; i < ch.length; i++) escaped += `\\\\u${hexIgnoringCase(ch.charCodeAt(i))}`;
    alternatives.push(escaped);
    if (ch === '/') alternatives.push('\\\\/');
    if (ch === '"') alternatives.push('\\\\"');
    if (ch === '\\') alternatives.push('\\\\\\\\');
    source += `(?:${alternatives.join('|')})`;
  }
  re = new RegExp(source, 'g');
  if (patterns.size >= 64) patterns.clear();
  patterns.set(key, re);
  return re;
}

/** The longest text one occurrence of the key can take (every character as `\uXXXX`). */
export const maxSpelledLength = (key: string) => key.length * 6;

/** Text with every spelling of the key replaced. */
export function scrubText(text: string, key: string | null): string {
  if (!key) return text;
  const re = keyPattern(key);
  return text.search(re) === -1 ? text : text.replace(re, REDACTED);
}

/** Replaces the key in every string (and property name) of a parsed JSON value, without recursion. */
function scrubValue(root: unknown, key: string): unknown {
  const fix = (s: string) => scrubText(s, key);
  if (typeof root === 'string') return fix(root);
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const node = stack.pop();
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const v = node[i];
        if (typeof v === 'string') node[i] = fix(v);
        else if (v && typeof v === 'object') stack.push(v);
      }
    } else if (node && typeof node === 'object') {
      const obj = node as Record<string, unknown>;
      for (const k of Object.keys(obj)) {
        let v = obj[k];
        if (typeof v === 'string') v = obj[k] = fix(v);
        else if (v && typeof v === 'object') stack.push(v);
        const clean = fix(k);
        if (clean !== k) {
          delete obj[k];
          obj[clean] = v;
        }
      }
    }
  }
  return root;
}

/**
 * A body that is (probably) JSON, with the key removed in every spelling. When the key is not
 * there in any form the text comes back unchanged (the common case costs one regex search).
 * Otherwise JSON is decoded, scrubbed and written again, so the result stays valid JSON; text that
 * is not JSON is scrubbed as it stands.
 */
export function scrubJsonText(text: string, key: string | null): string {
  if (!key || text.search(keyPattern(key)) === -1) return text;
  try {
    return JSON.stringify(scrubValue(JSON.parse(text), key));
  } catch {
    return text.replace(keyPattern(key), REDACTED);
  }
}

/**
 * What to scrub for credential header values (an MCP instance's): each whole value, and its token
 * after a scheme (`Bearer abc...`), those long enough to be secrets.
 */
export function credentialSecrets(values: string[]): string[] {
  const parts = values.flatMap((value) => [value, value.replace(/^[A-Za-z]+\s+/, '')]);
  return [...new Set(parts)].filter((p) => p.length >= MIN_SCRUBBED_KEY_LENGTH);
}

/** scrubJsonText for each of several secrets. */
export function scrubJsonTextOfAll(text: string, secrets: string[]): string {
  let clean = text;
  for (const secret of secrets) clean = scrubJsonText(clean, secret);
  return clean;
}

/** Text (not JSON: the rest of a stream) with every spelling of each secret replaced. */
export function scrubTextOfAll(text: string, secrets: string[]): string {
  let clean = text;
  for (const secret of secrets) clean = scrubText(clean, secret);
  return clean;
}

/** Scrubs complete lines of an event stream: `data:` payloads as JSON, other lines as text. */
function scrubLines(text: string, key: string): string {
  if (text.search(keyPattern(key)) === -1) return text;
  return text
    .split('\n')
    .map((line) => {
      if (!line.startsWith('data:')) return scrubText(line, key);
      const payload = line.slice(line.startsWith('data: ') ? 6 : 5);
      const cr = payload.endsWith('\r') ? '\r' : '';
      return `data: ${scrubJsonText(cr ? payload.slice(0, -1) : payload, key)}${cr}`;
    })
    .join('\n');
}

/**
 * An upstream event stream cut into whole lines. An incomplete last line is held back until its
 * newline arrives (an app cannot use half an event anyway), so a key split across network chunks
 * is seen whole: neither the key nor any JSON spelling of it can hold a newline. Without a key to
 * scrub, chunks pass as Buffers, untouched.
 */
export class LineRelay {
  /** the incomplete last line, as the chunks it came in (joined once its newline arrives) */
  private pending: Buffer[] = [];
  private pendingLength = 0;
  /** the last two bytes sent, to know whether an event is open when the stream breaks */
  private tail = '\n\n';

  constructor(
    private readonly key: string | null,
    private readonly maxLine: number,
  ) {}

  /** What may be sent now; throws RangeError when one line grows past maxLine. */
  push(chunk: Buffer): Buffer | string | null {
    const newline = chunk.lastIndexOf(10);
    if (newline === -1) {
      this.pending.push(chunk);
      this.pendingLength += chunk.length;
      if (this.pendingLength > this.maxLine) throw new RangeError('line too long');
      return null;
    }
    const cut = newline + 1;
    const complete = this.pending.length > 0 ? Buffer.concat([...this.pending, chunk.subarray(0, cut)]) : chunk.subarray(0, cut);
    this.pending = cut < chunk.length ? [chunk.subarray(cut)] : [];
    this.pendingLength = chunk.length - cut;
    return this.emit(complete);
  }

  /** The rest at the end of the stream. */
  end(): Buffer | string | null {
    const rest = this.pending.length > 0 ? Buffer.concat(this.pending) : null;
    this.pending = [];
    this.pendingLength = 0;
    return rest ? this.emit(rest) : null;
  }

  /** Drops an incomplete line (the stream broke) and answers what closes the open event, if any. */
  abandon(): string {
    this.pending = [];
    this.pendingLength = 0;
    return this.tail.endsWith('\n\n') ? '' : this.tail.endsWith('\n') ? '\n' : '\n\n';
  }

  private emit(buf: Buffer): Buffer | string {
    let out: Buffer | string = buf;
    if (this.key) {
      const text = buf.toString('utf8');
      const clean = scrubLines(text, this.key);
      if (clean !== text) out = clean;
    }
    this.tail = (this.tail + (typeof out === 'string' ? out.slice(-2) : out.subarray(-2).toString('latin1'))).slice(-2);
    return out;
  }
}
