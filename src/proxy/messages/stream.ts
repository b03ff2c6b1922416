/**
 * A chat completion stream turned into Anthropic's event stream, as the upstream's chunks come
 * (docs/api.md, /v1/messages). Anthropic's order is kept: message_start; each content block's
 * content_block_start, deltas and content_block_stop, one block open at a time with increasing
 * indexes; message_delta with the stop reason and usage; message_stop.
 *
 * Chat streams interleave what Anthropic sends block after block: parallel tool calls (several
 * `index`es) and text beside them. A block stays open while its pieces come; a piece of another
 * stream closes it and opens that one, unless the open block is a tool call whose JSON arguments
 * are not yet whole. Then the other stream's pieces wait, and go out as one delta when their block
 * opens, so each tool's input_json_delta pieces join to its whole arguments. In the usual stream
 * (a tool call's pieces one after the other) nothing waits and every piece goes out as it comes.
 */
import { errorEvent } from './errors.js';
import { matchedStop, newId, type StopReason, stopReasonOf } from './from-chat.js';

/** A text or tool-call stream of the upstream's, and its block while it is open. */
interface Piece {
  tool: boolean;
  /** the block's index once opened; -1 before */
  index: number;
  id: string;
  name: string;
  /** pieces that came while another block could not close */
  waiting: string;
  queued: boolean;
  /** a tool's block was opened and closed: it cannot take more */
  closed: boolean;
  // a scan of the tool's arguments, to tell when the JSON is whole (no allocation)
  depth: number;
  began: boolean;
  inString: boolean;
  escaped: boolean;
}

const newPiece = (tool: boolean): Piece => ({ tool, index: -1, id: '', name: '', waiting: '', queued: false, closed: false, depth: 0, began: false, inString: false, escaped: false });

export interface StreamOptions {
  /** the model as the app named it */
  model: string;
  /** the message id; a new `msg_...` when absent */
  id?: string;
  stopSequences?: readonly string[];
  /** what message_start says of the input before the upstream's usage comes (svc's estimate, or 0) */
  inputTokens?: number;
}

/** How much of the answer may wait behind a tool call whose arguments are not whole (UTF-16 units). */
export const WAIT_LIMIT = 1024 * 1024;

export const PING_EVENT = 'event: ping\ndata: {"type":"ping"}\n\n';
const MESSAGE_STOP = 'event: message_stop\ndata: {"type":"message_stop"}\n\n';

/**
 * The translator of one stream. `push` takes whole lines of the upstream's event stream (as many
 * as came) and answers the events to send ('' for none); `end` what is left when the upstream
 * ended. `ping()` is an event the caller may send while the upstream is quiet.
 */
export class MessagesStream {
  /** the upstream's usage, once it came; null before (the caller estimates) */
  tokens: { tokens_in: number; tokens_out: number } | null = null;
  /** the deltas sent: about a token each, for an estimate of a stream that ended without usage */
  deltas = 0;
  /** message_stop or an error was sent: nothing more goes out */
  done = false;
  private started = false;
  private readonly startEvent: string;
  private nextIndex = 0;
  private open: Piece | null = null;
  private readonly text = newPiece(false);
  private readonly tools: Piece[] = [];
  private readonly queue: Piece[] = [];
  private finish: unknown = undefined;
  private stopSequence: string | null = null;
  private sawTool = false;
  private out = '';

  constructor(private readonly opts: StreamOptions) {
    const message = { id: opts.id ?? newId('msg_'), type: 'message', role: 'assistant', model: opts.model, content: [], stop_reason: null, stop_sequence: null };
    const usage = `"usage":{"input_tokens":${Math.max(0, Math.floor(opts.inputTokens ?? 0))},"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}`;
    this.startEvent = `event: message_start\ndata: {"type":"message_start","message":${JSON.stringify(message).slice(0, -1)},${usage}}}\n\n`;
  }

  ping(): string {
    return this.done ? '' : this.begin() + PING_EVENT;
  }

  /** message_start, the first time; '' after (the caller may send it before the upstream answers). */
  begin(): string {
    if (this.started) return '';
    this.started = true;
    return this.startEvent;
  }

  /** Whole lines of the upstream's event stream: data lines are read, the rest (comments, event names) skipped. */
  push(lines: string): string {
    this.out = this.begin();
    let at = 0;
    while (at < lines.length && !this.done) {
      let nl = lines.indexOf('\n', at);
      if (nl === -1) nl = lines.length;
      if (lines.startsWith('data:', at)) this.dataLine(lines.slice(at + (lines.charCodeAt(at + 5) === 32 ? 6 : 5), lines.charCodeAt(nl - 1) === 13 ? nl - 1 : nl));
      at = nl + 1;
    }
    const out = this.out;
    this.out = '';
    return out;
  }

  /** One parsed chunk (what a data line holds). */
  chunk(chunk: unknown): string {
    this.out = this.begin();
    this.take(chunk);
    const out = this.out;
    this.out = '';
    return out;
  }

  /** The upstream ended (with `[DONE]` or without): open blocks close and the message ends. */
  end(): string {
    this.out = this.begin();
    this.finishMessage();
    const out = this.out;
    this.out = '';
    return out;
  }

  /** An error event (the stream broke off, stalled, or sent garbage); nothing goes out after it. */
  fail(type: Parameters<typeof errorEvent>[0], message: string): string {
    if (this.done) return '';
    this.done = true;
    return this.begin() + errorEvent(type, message);
  }

  private dataLine(payload: string): void {
    if (payload === '[DONE]') return this.finishMessage();
    let chunk: unknown;
    try {
      chunk = JSON.parse(payload);
    } catch {
      this.out += this.fail('api_error', 'The upstream sent a stream event that is not JSON.');
      return;
    }
    this.take(chunk);
  }

  private take(chunk: unknown): void {
    if (this.done || chunk === null || typeof chunk !== 'object') return;
    const c = chunk as { choices?: unknown; usage?: unknown; error?: unknown };
    if (c.error !== undefined && c.error !== null && !Array.isArray(c.choices)) {
      const message = (c.error as { message?: unknown }).message;
      this.out += this.fail('api_error', typeof message === 'string' ? message.slice(0, 2000) : 'The upstream failed mid-stream.');
      return;
    }
    const choice = Array.isArray(c.choices) ? (c.choices[0] as Record<string, unknown> | undefined) : undefined;
    if (choice && typeof choice === 'object') this.choice(choice);
    if (c.usage && typeof c.usage === 'object') {
      const u = c.usage as { prompt_tokens?: unknown; completion_tokens?: unknown };
      const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0);
      this.tokens = { tokens_in: n(u.prompt_tokens), tokens_out: n(u.completion_tokens) };
    }
    // the usage chunk follows the finish (include_usage), or comes with it: then the message ends
    if (this.finish !== undefined && this.tokens !== null) this.finishMessage();
  }

  private choice(choice: Record<string, unknown>): void {
    const delta = choice.delta as { content?: unknown; tool_calls?: unknown } | undefined;
    if (delta && typeof delta === 'object') {
      if (typeof delta.content === 'string' && delta.content !== '') this.offer(this.text, delta.content);
      if (Array.isArray(delta.tool_calls)) for (const call of delta.tool_calls) this.toolPiece(call);
    }
    if (choice.finish_reason !== undefined && choice.finish_reason !== null) {
      this.finish = choice.finish_reason;
      this.stopSequence = matchedStop(choice, this.opts.stopSequences);
      this.flushBlocks();
    }
  }

  private toolPiece(call: unknown): void {
    if (!call || typeof call !== 'object') return;
    const c = call as { index?: unknown; id?: unknown; function?: { name?: unknown; arguments?: unknown } };
    const at = typeof c.index === 'number' && Number.isInteger(c.index) && c.index >= 0 && c.index < 4096 ? c.index : 0;
    let piece = this.tools[at];
    if (piece === undefined) piece = this.tools[at] = newPiece(true);
    if (typeof c.id === 'string' && c.id !== '' && piece.index === -1) piece.id = c.id;
    const name = c.function?.name;
    if (typeof name === 'string' && name !== '' && piece.index === -1) piece.name = name;
    const args = c.function?.arguments;
    this.sawTool = true;
    this.offer(piece, typeof args === 'string' ? args : '');
  }

  /** A piece of text or arguments: sent in the open block, or that block closes for it, or it waits. */
  private offer(p: Piece, text: string): void {
    if (p.closed) return; // arguments after a tool's whole JSON: nowhere to go
    if (p.tool) scan(p, text);
    if (this.open === p) return this.delta(p, text);
    if (!p.queued) {
      p.queued = true;
      this.queue.push(p);
    }
    p.waiting += text;
    // a tool call whose JSON never closes cannot hold the rest of the answer without bound: past
    // the limit it is closed as it stands (its later pieces are dropped) and what waits goes out
    if (p.waiting.length > WAIT_LIMIT && this.open !== null && !closable(this.open)) this.closeOpen();
    this.advance();
  }

  /**
   * Opens what waits, in the order it came, while the open block may close. A tool call waits for
   * its name, which content_block_start must carry (servers send it with the call's first piece).
   */
  private advance(): void {
    while (this.queue.length > 0 && (this.open === null || closable(this.open)) && (!this.queue[0].tool || this.queue[0].name !== '')) {
      this.closeOpen();
      this.openBlock(this.queue.shift()!);
    }
  }

  private openBlock(p: Piece): void {
    p.queued = false;
    p.index = this.nextIndex++;
    this.open = p;
    if (p.tool) {
      if (p.id === '') p.id = newId('toolu_');
      this.out += `event: content_block_start\ndata: {"type":"content_block_start","index":${p.index},"content_block":{"type":"tool_use","id":${JSON.stringify(p.id)},"name":${JSON.stringify(p.name)},"input":{}}}\n\n`;
    } else {
      this.out += `event: content_block_start\ndata: {"type":"content_block_start","index":${p.index},"content_block":{"type":"text","text":""}}\n\n`;
    }
    if (p.waiting !== '') {
      const waiting = p.waiting;
      p.waiting = '';
      this.delta(p, waiting);
    }
  }

  private delta(p: Piece, text: string): void {
    if (text === '') return;
    this.deltas++;
    this.out += p.tool
      ? `event: content_block_delta\ndata: {"type":"content_block_delta","index":${p.index},"delta":{"type":"input_json_delta","partial_json":${JSON.stringify(text)}}}\n\n`
      : `event: content_block_delta\ndata: {"type":"content_block_delta","index":${p.index},"delta":{"type":"text_delta","text":${JSON.stringify(text)}}}\n\n`;
  }

  private closeOpen(): void {
    const p = this.open;
    if (p === null) return;
    this.out += `event: content_block_stop\ndata: {"type":"content_block_stop","index":${p.index}}\n\n`;
    if (p.tool) p.closed = true;
    this.open = null;
  }

  /** Every block closes, what waits opening and closing in turn. */
  private flushBlocks(): void {
    this.closeOpen();
    while (this.queue.length > 0) {
      this.openBlock(this.queue.shift()!);
      this.closeOpen();
    }
  }

  private finishMessage(): void {
    if (this.done) return;
    this.flushBlocks();
    const stop: StopReason = stopReasonOf(this.finish, this.stopSequence, this.sawTool && this.finish !== 'length');
    const sequence = stop === 'stop_sequence' ? JSON.stringify(this.stopSequence) : 'null';
    const usage = this.tokens ? `{"input_tokens":${this.tokens.tokens_in},"output_tokens":${this.tokens.tokens_out}}` : `{"output_tokens":${this.deltas}}`;
    this.out += `event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"${stop}","stop_sequence":${sequence}},"usage":${usage}}\n\n${MESSAGE_STOP}`;
    this.done = true;
  }
}

/** Whether a block may close now: text always, a tool call once its JSON arguments are whole. */
const closable = (p: Piece) => !p.tool || (p.began && p.depth === 0 && !p.inString);

/** Follows a tool's arguments far enough to tell when the JSON value is whole: nesting and strings. */
function scan(p: Piece, text: string): void {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (p.inString) {
      if (p.escaped) p.escaped = false;
      else if (c === 92) p.escaped = true;
      else if (c === 34) p.inString = false;
    } else if (c === 34) p.inString = true;
    else if (c === 123 || c === 91) {
      p.depth++;
      p.began = true;
    } else if (c === 125 || c === 93) p.depth--;
  }
}

/** What the stream pump takes (src/upstream/pump.ts): a chunk in, what to send now out. */
interface LineTransform {
  push(chunk: Buffer): Buffer | string | null;
  end(): Buffer | string | null;
}

/**
 * The translator as the stream pump's transform: `lines` cuts the upstream's bytes into whole
 * lines (and scrubs the provider's key from them, before anything is decoded and re-encoded),
 * `translator` turns them into events. A break is the caller's to end, with `translator.fail`.
 */
export class MessagesTransform implements LineTransform {
  constructor(
    private readonly lines: LineTransform,
    readonly translator: MessagesStream,
  ) {}

  push(chunk: Buffer): string | null {
    const whole = this.lines.push(chunk);
    const out = whole === null ? '' : this.translator.push(typeof whole === 'string' ? whole : whole.toString('utf8'));
    return out === '' ? null : out;
  }

  end(): string | null {
    const rest = this.lines.end();
    const out = (rest === null ? '' : this.translator.push(typeof rest === 'string' ? rest : rest.toString('utf8'))) + this.translator.end();
    return out === '' ? null : out;
  }
}
