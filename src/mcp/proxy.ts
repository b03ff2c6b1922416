import { StringDecoder } from 'node:string_decoder';
import { AppError, notFound } from '../errors.js';
import { readRaw } from '../upstream/body.js';
import { type ActivityNote, afterAnswer, type AppContext } from '../http/context.js';
import { mediaTypeOf } from '../upstream/media-type.js';
import { credentialSecrets, scrubJsonTextOfAll, scrubTextOfAll } from '../upstream/scrub.js';
import type { OpenStreams } from '../http/open-streams.js';
import { LookalikeKeys } from '../http/lookalike-keys.js';
import { abortOnClientGone, abortUpstream, type ClientGone, readBody } from '../upstream/client.js';
import { pumpStream, type StreamTransform, takeResponse } from '../upstream/pump.js';
import type { McpInstanceRecord } from '../store/schema.js';
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { type HeldOutcome, sentAsShown } from './held-calls.js';
import type { ToolGate } from './gate.js';
import { toolNameFault } from './policies.js';
import type { McpTransport } from './transport/types.js';
import { isDatedVersion } from './protocol-versions.js';
import { decodeUtf8, nestedTooDeep, NOT_JSON, parseJson, requireJsonUtf8, tooDeep } from './request-body.js';

export const MCP_PROXY_BODY_LIMIT = 4 * 1024 * 1024;
/** The most of a non-streamed MCP answer svc reads before relaying it. */
const MCP_ANSWER_LIMIT = 32 * 1024 * 1024;

/** Request headers an MCP client sends that the server must see; nothing else of the app's goes up. */
const FORWARDED_REQUEST_HEADERS = ['content-type', 'accept', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id', 'mcp-method', 'mcp-name'];

const BASE64_NAME = /^=\?base64\?([A-Za-z0-9+/=]*)\?=$/i;
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * An `Mcp-Name` header value as sent: plain, or RFC 2047-style `=?base64?...?=` for what HTTP
 * cannot carry; null when the base64 is not canonical or its bytes are not UTF-8 (a lenient
 * decoder turns those into some name, and a server or gateway decoding it its own way another).
 */
function decodeMcpName(value: string): string | null {
  const m = BASE64_NAME.exec(value);
  if (!m) return value;
  const bytes = Buffer.from(m[1], 'base64');
  if (bytes.toString('base64') !== m[1]) return null;
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return null;
  }
}

/** The `Mcp-Name` svc sends upstream for the tool it checked: plain where a header carries it as it is. */
function encodeMcpName(name: string): string {
  return /^[\x21-\x7e]+$/.test(name) && !BASE64_NAME.test(name) ? name : `=?base64?${Buffer.from(name, 'utf8').toString('base64')}?=`;
}

/**
 * MCP 2026-07-28 mirrors the body's method (and a tool's name) into `Mcp-Method` and `Mcp-Name`
 * headers, which servers and gateways may route on. Where svc checked the body, the headers must
 * say the same, or the upstream could be told another story than the one svc allowed.
 */
function headersDisagree(ctx: AppContext, messages: JsonRpc[]): string | null {
  const method = ctx.get('mcp-method');
  const name = ctx.get('mcp-name');
  if (!method && !name) return null;
  if (messages.length !== 1) return 'Mcp-Method and Mcp-Name go with a single JSON-RPC message, not a batch.';
  const [m] = messages;
  if (method && method !== m?.method) return 'The Mcp-Method header does not match the method of the body.';
  // svc's allow-list is about tools, so the tool name is what must agree
  if (name && decodeMcpName(name) === null) return 'The Mcp-Name header is not plain text or valid base64 of UTF-8.';
  if (name && m?.method === 'tools/call' && decodeMcpName(name) !== m.params?.name) return 'The Mcp-Name header does not match the tool named in the body.';
  return null;
}
/**
 * An answer's Content-Type as it goes on (mediaTypeOf), remembered: a server answers with one or
 * two values, and taking each apart again is most of what relaying its headers costs. Bounded, as
 * the values are the servers' to choose.
 */
const mediaTypes = new Map<string, string>();
export function relayedMediaType(value: string): string {
  let relayed = mediaTypes.get(value);
  if (relayed === undefined) {
    relayed = mediaTypeOf(value);
    if (mediaTypes.size >= 100) mediaTypes.clear();
    mediaTypes.set(value, relayed);
  }
  return relayed;
}

const FORWARDED_RESPONSE_HEADERS = ['content-type', 'mcp-session-id', 'mcp-protocol-version', 'cache-control', 'allow'];

/**
 * What the activity records of an MCP call: its method, and the tool of a tools/call. The stateless
 * era names both in headers (checked against the body when the body is read); otherwise the body
 * says. This names the first message of a batch; the others are noted once the batch is taken
 * (`takeBatch`).
 */
function noteMcpCall(note: ActivityNote, ctx: AppContext, parsed: unknown): void {
  const method = ctx.get('mcp-method');
  if (method) {
    note.mcp_method = method;
    const name = ctx.get('mcp-name');
    if (name && method === 'tools/call') note.tool = decodeMcpName(name) ?? undefined;
    return;
  }
  // not JSON: the upstream says so to the app
  if (parsed === undefined || parsed === NOT_JSON) return;
  const first = (Array.isArray(parsed) ? parsed[0] : parsed) as JsonRpc | null | undefined;
  if (typeof first?.method === 'string') note.mcp_method = first.method;
  if (first?.method === 'tools/call' && typeof first.params?.name === 'string') note.tool = first.params.name;
}

/** The largest body the activity's note reads the method and tool of. */
const NOTED_BODY_LIMIT = 1024 * 1024;

/** The most messages svc takes in one JSON-RPC batch, as the MCP SDK's server does. */
const BATCH_LIMIT = 100;
/** The first protocol version without JSON-RPC batches. */
const NO_BATCHES_FROM = '2025-06-18';

/** The event of one message of a batch: its method, and a tools/call's tool. */
const batchEvent = (m: JsonRpc) => ({
  ...(typeof m?.method === 'string' ? { mcp_method: m.method } : {}),
  ...(m?.method === 'tools/call' && typeof m.params?.name === 'string' ? { tool: m.params.name } : {}),
});

/**
 * A JSON-RPC batch is as many calls as it has messages. MCP had batches up to 2025-03-26 and
 * dropped them in 2025-06-18, so where the request's `MCP-Protocol-Version` is that or later (or
 * not a version svc can place) the batch is refused. svc goes by the header as the server does: a
 * request without one is of 2025-03-26, where batches are allowed. A batch that is taken counts
 * each message after the first against the grant's calls a minute (the first was counted with the
 * request), and each is an event of its own in the activity.
 */
async function takeBatch(ctx: AppContext, messages: JsonRpc[]): Promise<void> {
  const version = ctx.get('mcp-protocol-version');
  if (version && !(isDatedVersion(version) && version < NO_BATCHES_FROM)) {
    throw new AppError('invalid_body', `MCP ${JSON.stringify(version.slice(0, 40))} has no JSON-RPC batches (MCP dropped them in ${NO_BATCHES_FROM}); send each message as a request of its own.`);
  }
  if (messages.length > BATCH_LIMIT) throw new AppError('invalid_body', `A JSON-RPC batch may hold at most ${BATCH_LIMIT} messages; this one holds ${messages.length}.`);
  // what svc does not read as a message (an array in the array, say) a lenient server might
  if (messages.some((m) => !m || typeof m !== 'object' || Array.isArray(m))) throw new AppError('invalid_body', 'Each member of a JSON-RPC batch is a message object.');
  if (messages.some((m) => m.method === 'initialize')) throw new AppError('invalid_body', 'initialize goes as a request of its own, never in a JSON-RPC batch.');
  const note = ctx.state.activity;
  if (note) note.more = messages.slice(1).map(batchEvent);
  if (messages.length > 1) await ctx.state.takeCalls?.(messages.length - 1);
}

/** The key looked for, as bytes once (a string needle is encoded again at every search). */
const ERROR_KEY = Buffer.from('"error"', 'utf8');

/** Whether a whole JSON-RPC answer is (or holds) an error; looked for only when the word is there. */
function answeredWithError(whole: Buffer): boolean {
  if (whole.indexOf(ERROR_KEY) === -1) return false;
  try {
    const parsed = JSON.parse(whole.toString('utf8')) as { error?: unknown } | { error?: unknown }[];
    return (Array.isArray(parsed) ? parsed : [parsed]).some((m) => m && typeof m === 'object' && m.error !== undefined);
  } catch {
    return false;
  }
}

type JsonRpc = {
  jsonrpc?: string;
  id?: string | number | null;
  method?: string;
  params?: { name?: unknown; arguments?: unknown; _meta?: { progressToken?: unknown } };
  result?: { tools?: { name?: unknown }[] };
};

/** The keys svc reads in a JSON-RPC message, and in its params (a tools/call's name and arguments). */
const ENVELOPE_KEYS = ['jsonrpc', 'id', 'method', 'params', 'result', 'error'];
const PARAMS_KEYS = ['name', 'arguments', '_meta'];
const ENVELOPE = new LookalikeKeys(ENVELOPE_KEYS);
const PARAMS = new LookalikeKeys(PARAMS_KEYS);

/**
 * A parser that matches keys without regard to case (Go's encoding/json, .NET's web defaults)
 * reads `"Method"` as `method` and `"Name"` as `name`, the last one winning: a body svc reads as
 * a ping, or as a call of an allowed tool (or with the arguments the person was shown), would be
 * another call to such a server. svc refuses such a body rather than guess which one it reaches.
 */
function lookalikeKeys(messages: JsonRpc[]): string | null {
  for (const m of messages) {
    const found = ENVELOPE.find(m) ?? PARAMS.find(m?.params);
    if (found) return `The MCP request body has the key ${JSON.stringify(found.key.slice(0, 40))}, which some servers read as "${found.as}"; JSON-RPC keys are exact.`;
  }
  return null;
}

const rpcError = (id: JsonRpc['id'], message: string) => ({ jsonrpc: '2.0', id: id ?? null, error: { code: -32602, message } });

/**
 * Drops the tools this grant may not see from anything shaped like a tools/list result. It goes by
 * shape, not by the id of a request svc saw, because the GET stream and a stream resumed with
 * Last-Event-ID carry answers to requests of earlier HTTP requests.
 */
function filterToolList(message: JsonRpc | JsonRpc[], visible: (tool: string) => boolean): JsonRpc | JsonRpc[] {
  if (Array.isArray(message)) return message.map((m) => filterToolList(m, visible) as JsonRpc);
  if (!message || typeof message !== 'object' || !Array.isArray(message.result?.tools)) return message;
  return { ...message, result: { ...message.result, tools: message.result!.tools!.filter((t) => typeof t?.name === 'string' && visible(t.name)) } };
}

/** A JSON text with its tools/list results filtered; as it came when it holds none (or is not JSON). */
function filterToolListText(text: string, visible: (tool: string) => boolean): string {
  if (!text.includes('"tools"')) return text;
  try {
    return JSON.stringify(filterToolList(JSON.parse(text) as JsonRpc | JsonRpc[], visible));
  } catch {
    return text;
  }
}

const EVENT_END = /\r?\n\r?\n/;

/** An SSE event (or a run of text without an event's end) may be at most this large. */
const SSE_EVENT_LIMIT = 8 * 1024 * 1024;

/**
 * What an answer of an instance's server goes through before the app sees it: tools/list results
 * filtered to what the grant may see, and the instance's credentials scrubbed in every spelling
 * (a server may quote them back, in an error or in a tool's result alike).
 */
interface AnswerRewrite {
  visible: ((tool: string) => boolean) | null;
  secrets: string[];
  /** the id the app is given for an event's id (a stream's events only; session-ids.ts) */
  eventId?: ((serverEventId: string) => string) | null;
}

/** A whole JSON answer (or one event's data) as the app may see it. */
function rewriteJsonText(text: string, { visible, secrets }: AnswerRewrite): string {
  const filtered = visible ? filterToolListText(text, visible) : text;
  return secrets.length ? scrubJsonTextOfAll(filtered, secrets) : filtered;
}

const rewritesNothing = (rewrite: AnswerRewrite) => !rewrite.visible && rewrite.secrets.length === 0;
/** The filter an event stream goes through, or none when nothing in it changes. */
const sseFilter = (rewrite: AnswerRewrite) => (rewritesNothing(rewrite) && !rewrite.eventId ? null : new SseEventFilter(rewrite));
const isIdLine = (line: string) => line.startsWith('id:');

/** A whole answer as the app may see it: the bytes as they came when nothing in them changes. */
function rewrittenAnswer(whole: Buffer, rewrite: AnswerRewrite): Buffer | string {
  if (rewritesNothing(rewrite)) return whole;
  const text = whole.toString('utf8');
  const rewritten = rewriteJsonText(text, rewrite);
  return rewritten === text ? whole : rewritten;
}

/**
 * Passes an event stream on event by event, each event's data rewritten (rewriteJsonText) and its
 * other lines scrubbed, as soon as the event is complete, so streaming is kept. An event that
 * never ends past SSE_EVENT_LIMIT stops the stream rather than grow svc's memory.
 */
class SseEventFilter implements StreamTransform {
  private readonly decoder = new StringDecoder('utf8');
  private buffered = '';
  /** where in `buffered` an event's end may start: what is before it was searched already */
  private searchFrom = 0;
  private readonly eventEnd = new RegExp(EVENT_END.source, 'g');

  constructor(private readonly rewrite: AnswerRewrite) {}

  private scrub(text: string): string {
    return this.rewrite.secrets.length ? scrubTextOfAll(text, this.rewrite.secrets) : text;
  }

  /** A line of an event other than its data: scrubbed, and an event's id bound to the grant (scrubbed first). */
  private field(line: string): string {
    const { eventId } = this.rewrite;
    if (!eventId || !isIdLine(line)) return this.scrub(line);
    const id = this.scrub(line.slice(3).replace(/^ /, ''));
    // an empty id resets the client's last event id: it stays empty
    return id ? `id: ${eventId(id)}` : 'id:';
  }

  push(chunk: Buffer): string | null {
    this.buffered += this.decoder.write(chunk);
    let out = '';
    // An event's end is at most 4 characters; search only the new text (and 3 before it), so a
    // long event costs its length once, not once per chunk.
    this.eventEnd.lastIndex = Math.max(0, this.searchFrom - 3);
    let start = 0;
    for (let m = this.eventEnd.exec(this.buffered); m; m = this.eventEnd.exec(this.buffered)) {
      const event = this.buffered.slice(start, m.index);
      start = m.index + m[0].length;
      const lines = event.split(/\r?\n/);
      const fields = lines.filter((l) => !l.startsWith('data:'));
      const data = lines.filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, ''));
      if (data.length === 0) out += this.rewrite.eventId && lines.some(isIdLine) ? `${lines.map((l) => this.field(l)).join('\n')}\n\n` : `${this.scrub(event)}\n\n`;
      else {
        // data of several lines goes on as as many data lines (one line with a newline would end it early)
        const dataLines = rewriteJsonText(data.join('\n'), this.rewrite).split('\n');
        out += `${fields.map((l) => `${this.field(l)}\n`).join('')}${dataLines.map((l) => `data: ${l}\n`).join('')}\n`;
      }
    }
    if (start > 0) this.buffered = this.buffered.slice(start);
    this.searchFrom = this.buffered.length;
    if (this.buffered.length > SSE_EVENT_LIMIT) throw new RangeError('event too long');
    return out || null;
  }

  end(): string | null {
    const rest = this.buffered + this.decoder.end();
    this.buffered = '';
    return rest ? this.scrub(rest) : null;
  }
}

/**
 * The Streamable HTTP proxy of one instance: a transparent HTTP proxy (sessions, SSE, the GET
 * stream and DELETE pass through as they are) that reads the JSON-RPC it must: each tools/call
 * gets the grant's choice for its tool (refused, held for the person, or sent), and tools/list
 * results are filtered when the grant has tools it may not see. The app's Authorization header
 * and cookies never go upstream; the instance's do.
 */
const readBodies = new WeakMap<AppContext, Buffer>();
/** The app's request body, read from the socket once: a call tried again (after a refresh) sends what was read. */
export async function requestBodyOnce(ctx: AppContext): Promise<Buffer> {
  const kept = readBodies.get(ctx);
  if (kept) return kept;
  const body = await readRaw(ctx.req, MCP_PROXY_BODY_LIMIT);
  readBodies.set(ctx, body);
  return body;
}

export async function proxyMcp(ctx: AppContext, instance: McpInstanceRecord, transport: McpTransport, instanceHeaders: Record<string, string>, timeoutMs: number, streams: OpenStreams, gate: ToolGate): Promise<void> {
  const method = ctx.method;
  if (method !== 'GET' && method !== 'POST' && method !== 'DELETE') {
    throw new AppError('method_not_allowed', 'The MCP endpoint takes GET, POST and DELETE.', { headers: { Allow: 'GET, POST, DELETE' } });
  }
  // A session another grant began is not this one's to use (its stream is that app's): unknown
  // here, as an MCP server answers a session it does not know, so a client starts its own.
  const appSession = ctx.get('mcp-session-id');
  const serverSession = appSession ? gate.sessionForServer(appSession) : undefined;
  if (serverSession === null) throw notFound('No such MCP session for this app; start a new one (initialize).');
  // The same for an event of a stream, named to resume it: another grant's would replay its stream.
  const appEvent = ctx.get('last-event-id');
  const serverEvent = appEvent ? gate.eventForServer(appEvent) : undefined;
  if (serverEvent === null) throw notFound('No such event of an MCP stream for this app; listen again without Last-Event-ID.');
  if (method === 'POST') requireJsonUtf8(ctx.get('content-type'));
  const body = method === 'POST' ? await requestBodyOnce(ctx) : undefined;
  let text = body ? decodeUtf8(body) : undefined;
  // parsed once, for the activity's note and for every check below
  const json = text === undefined ? undefined : parseJson(text);
  const note = ctx.state.activity;
  if (note) noteMcpCall(note, ctx, text !== undefined && text.length <= NOTED_BODY_LIMIT ? json : undefined);
  let held: JsonRpc | undefined;
  /** the tool of a single tools/call, as svc checked it: what its Mcp-Name header says upstream */
  let checkedName: string | undefined;

  // Every body is read: any tool may be one the person chose to deny, or to be asked about.
  if (text !== undefined) {
    if (json === NOT_JSON) throw new AppError('invalid_body', 'The MCP request body is not valid JSON.');
    const parsed = json as JsonRpc | JsonRpc[];
    // it is sent on re-serialized (below), which a value nested thousands deep would not survive
    if (nestedTooDeep(text, parsed)) throw tooDeep();
    const messages = Array.isArray(parsed) ? parsed : [parsed];
    const lookalike = lookalikeKeys(messages);
    if (lookalike) throw new AppError('invalid_body', lookalike);
    const disagreement = headersDisagree(ctx, messages);
    if (disagreement) throw new AppError('header_mismatch', disagreement);
    if (Array.isArray(parsed)) await takeBatch(ctx, messages);
    const only = messages.length === 1 ? messages[0] : undefined;
    if (only?.method === 'tools/call' && typeof only.params?.name === 'string') checkedName = only.params.name;
    const refused: { m: JsonRpc; why: string }[] = [];
    for (const m of messages) {
      if (m?.method !== 'tools/call') continue;
      const name = typeof m.params?.name === 'string' ? m.params.name : null;
      // the name as a refusal quotes it: only a refused call needs it
      const quoted = () => JSON.stringify(String(m.params?.name ?? '')).slice(0, 140);
      const fault = name === null ? null : toolNameFault(name);
      if (fault) {
        refused.push({ m, why: `Tool name ${quoted()} ${fault}; tool names are exact` });
        continue;
      }
      const choice = name === null ? 'deny' : await gate.choose(name);
      if (choice === 'deny') refused.push({ m, why: `Tool ${quoted()} is not allowed on this instance` });
      else if (choice === 'ask' && (messages.length > 1 || m.id === undefined || m.id === null)) {
        refused.push({ m, why: `Tool ${quoted()} needs the person's approval of each call: send it on its own, as a request with an id` });
      } else if (choice === 'ask') held = m;
    }
    if (refused.length > 0) {
      // Refused before anything goes upstream, answered the way an MCP server answers an unknown tool.
      const errors = refused.map(({ m, why }) => rpcError(m.id, why));
      ctx.status = 200;
      ctx.type = 'application/json';
      ctx.body = Array.isArray(parsed) ? errors : errors[0];
      if (note) note.refused = 'tool_not_allowed';
      return;
    }
    // What goes upstream is what svc read: every body is sent as svc parsed it, so a key given
    // twice (the last one wins here, the first in some parsers) cannot make a method svc read as
    // a ping, or a tool it checked, another at the server.
    text = JSON.stringify(parsed);
  }

  const headers: Record<string, string> = {};
  for (const name of FORWARDED_REQUEST_HEADERS) {
    const value = ctx.get(name);
    if (value) headers[name] = value;
  }
  // The name as svc checked it, in one encoding, rather than the app's spelling of it (a server or
  // gateway that routes on the header then reads the tool svc allowed).
  if (headers['mcp-name'] && checkedName !== undefined) headers['mcp-name'] = encodeMcpName(checkedName);
  if (serverSession) headers['mcp-session-id'] = serverSession;
  if (serverEvent) headers['last-event-id'] = serverEvent;
  // The upstream reads the body exactly as svc did: UTF-8 JSON, whatever charset the app named.
  if (text !== undefined) headers['content-type'] = 'application/json';
  Object.assign(headers, instanceHeaders);
  const headerValues = Object.values(instanceHeaders);
  const secrets = headerValues.length > 0 ? credentialSecrets(headerValues) : NO_SECRETS;
  const input: RelayInput = { transport, method, headers, text, visible: gate.visible, secrets, timeoutMs, abort: abortOnClientGone(ctx.res), sessionForApp: (id) => gate.sessionForApp(id), eventForApp: (id) => gate.eventForApp(id) };

  if (held) return relayHeld(ctx, instance, held, gate, input);
  // The GET stream ends when svc stops: its upstream call is aborted, and the pump ends the answer.
  const release = ctx.state.stream ? streams.hold(() => abortUpstream(input.abort)) : undefined;
  try {
    await relayUpstream(ctx, instance, input);
  } catch (err) {
    release?.();
    throw err;
  }
  if (release) afterAnswer(ctx, release);
}

/** The secrets of an instance without headers: none, the same empty list for every call. */
const NO_SECRETS: string[] = [];

type RelayInput = {
  /** how the request reaches the instance's server (transport/) */
  transport: McpTransport;
  method: string;
  headers: Record<string, string>;
  text?: string;
  /** which tools a tools/list answer may show; null: answers pass untouched */
  visible: ((tool: string) => boolean) | null;
  secrets: string[];
  timeoutMs: number;
  abort: ClientGone;
  /** the id the app is given for a session the server named in its answer (none: the header is dropped) */
  sessionForApp?: (serverSessionId: string) => string;
  /** the id the app is given for an event of a stream the server sends (none: it goes on as it came) */
  eventForApp?: (serverEventId: string) => string;
};

/** How often a held call that streams tells the app it still waits. */
const HELD_PROGRESS_MS = 10_000;

/** What the app is told when a held call does not run: a tool result, so the model reads why. */
function notRun(id: JsonRpc['id'], text: string) {
  return { jsonrpc: '2.0', id: id ?? null, result: { content: [{ type: 'text', text }], isError: true } };
}

export const HELD_TEXTS: Record<Exclude<HeldOutcome, 'approved'>, string> = {
  denied: 'The person declined this tool call. It did not run.',
  expired: 'Nobody answered the request to run this tool call in time. It did not run.',
  failed: 'This tool call could not wait for the person any longer (svc stopped, the grant ended, or the instance or the tool was turned off). It did not run.',
};

/**
 * A tools/call of an `ask` tool: held until the person decides, then sent upstream exactly as it
 * was shown (once), or answered with a result that says why it did not run. A request that
 * carries a progress token and accepts a stream is answered as one at once, with progress
 * notifications while it waits, so an app's own timeout can keep resetting.
 */
async function relayHeld(ctx: AppContext, instance: McpInstanceRecord, m: JsonRpc, gate: ToolGate, input: RelayInput): Promise<void> {
  const note = ctx.state.activity;
  const tool = String(m.params!.name);
  const { call, outcome } = await gate.hold(tool, m.params?.arguments ?? {}, 'mcp');
  const token = m.params?._meta?.progressToken;
  const streaming = (typeof token === 'string' || typeof token === 'number') && /text\/event-stream/i.test(ctx.get('accept'));
  const res = ctx.res;
  const appGone = () => gate.fail(call.id, 'the app went away');
  res.once('close', appGone);
  let sse: ServerResponse | null = null;
  let ticker: NodeJS.Timeout | undefined;
  if (streaming) {
    sse = takeResponse(ctx, 200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'X-Content-Type-Options': 'nosniff' });
    sse.flushHeaders();
    let progress = 0;
    const tell = () => {
      const message = { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: token, progress: progress++, message: `Waiting for the person to approve ${tool.slice(0, 100)}` } };
      sse!.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
    };
    tell();
    ticker = setInterval(tell, HELD_PROGRESS_MS);
  }
  const answer = (value: unknown) => {
    if (sse) {
      if (!sse.writableEnded && !sse.destroyed) sse.end(`event: message\ndata: ${JSON.stringify(value)}\n\n`);
      return;
    }
    ctx.status = 200;
    ctx.type = 'application/json';
    ctx.body = value;
  };
  let result: HeldOutcome;
  try {
    result = await outcome;
  } finally {
    clearInterval(ticker);
    res.off('close', appGone);
  }
  if (result === 'approved') {
    const whyNot = res.destroyed ? 'the app went away' : await gate.whyNotNow(tool);
    if (whyNot) {
      gate.fail(call.id, whyNot);
      if (note) note.refused = 'call_failed';
      return answer(notRun(m.id, HELD_TEXTS.failed));
    }
    // exactly the call that was shown, once: nothing the app put beside it
    return relayUpstream(ctx, instance, { ...input, text: JSON.stringify(sentAsShown(m.id, tool, call.arguments, m.params?._meta)) }, sse ?? undefined);
  }
  if (note) note.refused = result === 'denied' ? 'call_denied' : result === 'expired' ? 'call_expired' : 'call_failed';
  if (res.destroyed) return;
  answer(notRun(m.id, HELD_TEXTS[result]));
}

/**
 * The upstream call of one proxied request, and its answer relayed to the app (filtered, scrubbed,
 * streamed). `into`: a stream svc already answers with (a held call's), which the upstream's answer
 * then ends.
 */
async function relayUpstream(ctx: AppContext, instance: McpInstanceRecord, { transport, method, headers, text, visible, secrets, timeoutMs, abort, sessionForApp, eventForApp }: RelayInput, into?: ServerResponse): Promise<void> {
  const upstream = await transport.call({ method: method as 'GET' | 'POST' | 'DELETE', headers, text, timeoutMs, abort });

  const contentType = String(upstream.headers['content-type'] ?? '');
  const answer = upstream.body;
  const streaming = contentType.startsWith('text/event-stream');
  if (into) return relayInto(into, upstream.statusCode, contentType, answer, { visible, secrets, eventId: eventForApp }, text, instance);
  if (upstream.statusCode === 401 || upstream.statusCode === 403) {
    // The MCP server refused the instance's own credentials, not the app's token: a 401 passed on
    // would make the app drop a good token, and its text may quote the credential.
    answer.on('error', () => undefined);
    answer.destroy();
    throw new AppError('upstream_rejected', `The MCP server refused svc's credentials for this instance (${upstream.statusCode}); its owner must fix them.`, { cause: { upstreamStatus: upstream.statusCode } });
  }
  // Anything but a stream is read whole (bounded) before svc answers, so an upstream that stalls
  // or breaks off is a 504/502 in the contract's shape, never silence or half a body.
  const whole = streaming ? undefined : await readBody(answer, MCP_ANSWER_LIMIT, `MCP server of instance ${instance.name.slice(0, 60)}`);

  const out: Record<string, string> = { 'X-Content-Type-Options': 'nosniff' };
  for (const name of FORWARDED_RESPONSE_HEADERS) {
    const raw = upstream.headers[name];
    if (raw === undefined) continue;
    const joined = Array.isArray(raw) ? raw.join(', ') : raw;
    // the media type goes on as its type and charset only; nothing else of it is read by a client
    const value = name === 'content-type' ? relayedMediaType(joined) : joined;
    // A header that quotes the instance's credentials does not go on (it cannot be scrubbed in
    // place without changing what it says).
    if (value && !(secrets.length && scrubTextOfAll(value, secrets) !== value)) out[name] = value;
  }
  // the app never gets the server's own session id, only one bound to its grant
  if (out['mcp-session-id']) {
    if (sessionForApp) out['mcp-session-id'] = sessionForApp(out['mcp-session-id']);
    else delete out['mcp-session-id'];
  }
  if (whole) {
    // MCP servers answer a JSON-RPC error with 200: it counts as a failed call all the same.
    const failed = answeredWithError(whole);
    const reply = rewrittenAnswer(whole, { visible: contentType.startsWith('application/json') ? visible : null, secrets });
    out['content-length'] = String(Buffer.byteLength(reply));
    if (ctx.state.activity && failed) ctx.state.activity.failed = true;
    takeResponse(ctx, upstream.statusCode, out).end(reply);
    return;
  }

  const res = takeResponse(ctx, upstream.statusCode, out);
  res.flushHeaders();
  const filter = sseFilter({ visible, secrets, eventId: eventForApp });
  // An MCP stream has no error event of its own: a broken upstream ends it, as a closed connection would.
  const pumped = pumpStream(res, answer, filter, () => null);
  // The GET stream, open all day, runs on without the handlers that led to it: they finish now, and
  // what they do once the answer is over waits for the stream's end (afterAnswer).
  if (ctx.state.stream) ctx.state.streamEnded = pumped;
  else await pumped;
}

/** The upstream's answer to an approved held call, carried on the stream svc already answers with. */
async function relayInto(into: ServerResponse, status: number, contentType: string, answer: Readable, rewrite: AnswerRewrite, text: string | undefined, instance: McpInstanceRecord): Promise<void> {
  const id = (() => {
    try {
      return (JSON.parse(text ?? '') as JsonRpc).id ?? null;
    } catch {
      return null;
    }
  })();
  const fail = (message: string) => {
    answer.destroy();
    if (!into.writableEnded && !into.destroyed) into.end(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32603, message } })}\n\n`);
  };
  // svc's credentials refused, or an error answer: the app gets an error in the protocol's shape,
  // never the upstream's text (which may quote the instance's credential).
  if (status >= 400) return fail(`The MCP server of instance ${instance.name.slice(0, 60)} answered ${status}.`);
  if (contentType.startsWith('text/event-stream')) {
    await pumpStream(into, answer, sseFilter(rewrite), () => null);
    return;
  }
  let whole: Buffer;
  try {
    whole = await readBody(answer, MCP_ANSWER_LIMIT, `MCP server of instance ${instance.name.slice(0, 60)}`);
  } catch (err) {
    return fail((err as Error).message);
  }
  const data = rewrittenAnswer(whole, rewrite).toString().replace(/\r?\n/g, ' ');
  if (!into.writableEnded && !into.destroyed) into.end(`event: message\ndata: ${data}\n\n`);
}
