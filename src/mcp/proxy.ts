import { StringDecoder } from 'node:string_decoder';
import { AppError } from '../errors.js';
import { readRaw } from '../proxy/body.js';
import type { ActivityNote, AppContext } from '../http/context.js';
import { MIN_SCRUBBED_KEY_LENGTH, scrubJsonText } from '../proxy/scrub.js';
import type { OpenStreams } from '../http/open-streams.js';
import { abortOnClientGone, abortUpstream, callUpstream, type ClientGone, readBody } from '../upstream/client.js';
import { pumpStream, type StreamTransform, takeResponse } from '../upstream/pump.js';
import type { McpInstanceRecord } from '../store/schema.js';
import { toolAllowed } from './tools.js';

export const MCP_PROXY_BODY_LIMIT = 4 * 1024 * 1024;
/** How long an established GET stream may go without a byte (servers may have nothing to say for hours). */
const GET_STREAM_QUIET_MS = 24 * 60 * 60 * 1000;
/** The most of a non-streamed MCP answer svc reads before relaying it. */
const MCP_ANSWER_LIMIT = 32 * 1024 * 1024;

/**
 * The proxy forwards only what it checked, and it checks UTF-8 JSON: a body in another charset
 * (UTF-7, UTF-16...) could spell `tools/call` in a way svc does not see and an upstream does.
 */
function requireJsonUtf8(contentType: string): void {
  const [type, ...params] = contentType.split(';').map((p) => p.trim().toLowerCase());
  const charset = params.find((p) => p.startsWith('charset='))?.slice('charset='.length).replace(/^"|"$/g, '');
  if (type !== 'application/json' || (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8')) {
    throw new AppError('unsupported_media_type', 'The MCP endpoint takes Content-Type: application/json in UTF-8.');
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });
function decodeUtf8(body: Buffer): string {
  try {
    return utf8.decode(body);
  } catch {
    throw new AppError('invalid_body', 'The MCP request body is not valid UTF-8.');
  }
}

/** The parts of an instance header value worth scrubbing: the whole value and its token after a scheme. */
function secretParts(value: string): string[] {
  const parts = [value, value.replace(/^[A-Za-z]+\s+/, '')];
  return [...new Set(parts)].filter((p) => p.length >= MIN_SCRUBBED_KEY_LENGTH);
}

/** Request headers an MCP client sends that the server must see; nothing else of the app's goes up. */
const FORWARDED_REQUEST_HEADERS = ['content-type', 'accept', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id', 'mcp-method', 'mcp-name'];

/** An `Mcp-Name` header value as sent: plain, or RFC 2047-style `=?base64?...?=` for what HTTP cannot carry. */
function decodeMcpName(value: string): string {
  const m = /^=\?base64\?([A-Za-z0-9+/=]*)\?=$/i.exec(value);
  return m ? Buffer.from(m[1], 'base64').toString('utf8') : value;
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
  if (name && m?.method === 'tools/call' && decodeMcpName(name) !== m.params?.name) return 'The Mcp-Name header does not match the tool named in the body.';
  return null;
}
const FORWARDED_RESPONSE_HEADERS = ['content-type', 'mcp-session-id', 'mcp-protocol-version', 'cache-control', 'allow'];

/**
 * What the activity records of an MCP call: its method, and the tool of a tools/call. The stateless
 * era names both in headers (checked against the body when the body is read); otherwise the body
 * says, and only the first message of a batch is named.
 */
function noteMcpCall(note: ActivityNote, ctx: AppContext, text: string | undefined): void {
  const method = ctx.get('mcp-method');
  if (method) {
    note.mcp_method = method;
    const name = ctx.get('mcp-name');
    if (name && method === 'tools/call') note.tool = decodeMcpName(name);
    return;
  }
  if (text === undefined || text.length > 1024 * 1024) return;
  try {
    const parsed = JSON.parse(text) as JsonRpc | JsonRpc[];
    const first = Array.isArray(parsed) ? parsed[0] : parsed;
    if (typeof first?.method === 'string') note.mcp_method = first.method;
    if (first?.method === 'tools/call' && typeof first.params?.name === 'string') note.tool = first.params.name;
  } catch {
    /* not JSON: the upstream says so to the app */
  }
}

/** Whether a whole JSON-RPC answer is (or holds) an error; looked for only when the word is there. */
function answeredWithError(whole: Buffer): boolean {
  if (whole.indexOf('"error"') === -1) return false;
  try {
    const parsed = JSON.parse(whole.toString('utf8')) as { error?: unknown } | { error?: unknown }[];
    return (Array.isArray(parsed) ? parsed : [parsed]).some((m) => m && typeof m === 'object' && m.error !== undefined);
  } catch {
    return false;
  }
}

type JsonRpc = { jsonrpc?: string; id?: string | number | null; method?: string; params?: { name?: unknown }; result?: { tools?: { name?: unknown }[] } };

const rpcError = (id: JsonRpc['id'], message: string) => ({ jsonrpc: '2.0', id: id ?? null, error: { code: -32602, message } });

/** Drops the tools an allow-list hides from a tools/list result. */
function filterToolList(message: JsonRpc, instance: McpInstanceRecord, listIds: Set<unknown>): JsonRpc {
  if (!message || message.id === undefined || !listIds.has(message.id) || !Array.isArray(message.result?.tools)) return message;
  return { ...message, result: { ...message.result, tools: message.result!.tools!.filter((t) => typeof t?.name === 'string' && toolAllowed(instance, t.name)) } };
}

const EVENT_END = /\r?\n\r?\n/;

/**
 * Rewrites an SSE stream event by event, filtering tools/list results. Events are passed on as
 * soon as they are complete, so streaming is kept.
 */
/** An SSE event (or a run of text without an event's end) may be at most this large. */
const SSE_EVENT_LIMIT = 8 * 1024 * 1024;

/**
 * Passes an event stream on event by event, rewriting each event's data with `rewrite` (the
 * allow-list's filter of tools/list results). An event that never ends past SSE_EVENT_LIMIT
 * stops the stream rather than grow svc's memory.
 */
class SseEventFilter implements StreamTransform {
  private readonly decoder = new StringDecoder('utf8');
  private buffered = '';
  /** where in `buffered` an event's end may start: what is before it was searched already */
  private searchFrom = 0;
  private readonly eventEnd = new RegExp(EVENT_END.source, 'g');

  constructor(private readonly rewrite: (data: string) => string) {}

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
      if (data.length === 0) out += `${event}\n\n`;
      else out += `${fields.map((l) => `${l}\n`).join('')}data: ${this.rewrite(data.join('\n'))}\n\n`;
    }
    if (start > 0) this.buffered = this.buffered.slice(start);
    this.searchFrom = this.buffered.length;
    if (this.buffered.length > SSE_EVENT_LIMIT) throw new RangeError('event too long');
    return out || null;
  }

  end(): string | null {
    const rest = this.buffered + this.decoder.end();
    this.buffered = '';
    return rest || null;
  }
}

/**
 * The Streamable HTTP proxy of one instance: a transparent HTTP proxy (sessions, SSE, the GET
 * stream and DELETE pass through as they are) that reads JSON-RPC only where the allow-list
 * needs it: tools/call requests are refused before they go upstream, and tools/list results are
 * filtered. The app's Authorization header and cookies never go upstream; the instance's do.
 */
export async function proxyMcp(ctx: AppContext, instance: McpInstanceRecord, instanceHeaders: Record<string, string>, timeoutMs: number, streams: OpenStreams): Promise<void> {
  const method = ctx.method;
  if (method !== 'GET' && method !== 'POST' && method !== 'DELETE') {
    throw new AppError('method_not_allowed', 'The MCP endpoint takes GET, POST and DELETE.', { headers: { Allow: 'GET, POST, DELETE' } });
  }
  if (method === 'POST') requireJsonUtf8(ctx.get('content-type'));
  const body = method === 'POST' ? await readRaw(ctx.req, MCP_PROXY_BODY_LIMIT) : undefined;
  const text = body ? decodeUtf8(body) : undefined;
  const filtering = instance.allow_tools !== null;
  const listIds = new Set<unknown>();
  const note = ctx.state.activity;
  if (note) noteMcpCall(note, ctx, text);

  if (text !== undefined && filtering) {
    let parsed: JsonRpc | JsonRpc[];
    try {
      parsed = JSON.parse(text) as JsonRpc | JsonRpc[];
    } catch {
      throw new AppError('invalid_body', 'The MCP request body is not valid JSON.');
    }
    const messages = Array.isArray(parsed) ? parsed : [parsed];
    const disagreement = headersDisagree(ctx, messages);
    if (disagreement) throw new AppError('header_mismatch', disagreement);
    const refused = messages.filter((m) => m?.method === 'tools/call' && !(typeof m.params?.name === 'string' && toolAllowed(instance, m.params.name)));
    if (refused.length > 0) {
      // Refused before anything goes upstream, answered the way an MCP server answers an unknown tool.
      const errors = refused.map((m) => rpcError(m.id, `Tool ${JSON.stringify(String(m.params?.name ?? '')).slice(0, 140)} is not allowed on this instance`));
      ctx.status = 200;
      ctx.type = 'application/json';
      ctx.body = Array.isArray(parsed) ? errors : errors[0];
      if (note) note.refused = 'tool_not_allowed';
      return;
    }
    for (const m of messages) if (m?.method === 'tools/list' && m.id !== undefined) listIds.add(m.id);
  }

  const headers: Record<string, string> = {};
  for (const name of FORWARDED_REQUEST_HEADERS) {
    const value = ctx.get(name);
    if (value) headers[name] = value;
  }
  // The upstream reads the body exactly as svc did: UTF-8 JSON, whatever charset the app named.
  if (text !== undefined) headers['content-type'] = 'application/json';
  Object.assign(headers, instanceHeaders);
  const secrets = Object.values(instanceHeaders).flatMap(secretParts);

  const abort = abortOnClientGone(ctx.res);
  // The GET stream ends when svc stops: its upstream call is aborted, and the pump ends the answer.
  const release = ctx.state.stream ? streams.hold(() => abortUpstream(abort)) : undefined;
  try {
    await relayUpstream(ctx, instance, { method, headers, text, listIds, secrets, timeoutMs, abort });
  } finally {
    release?.();
  }
}

type RelayInput = { method: string; headers: Record<string, string>; text?: string; listIds: Set<unknown>; secrets: string[]; timeoutMs: number; abort: ClientGone };

/** The upstream call of one proxied request, and its answer relayed to the app (filtered, scrubbed, streamed). */
async function relayUpstream(ctx: AppContext, instance: McpInstanceRecord, { method, headers, text, listIds, secrets, timeoutMs, abort }: RelayInput): Promise<void> {
  const upstream = await callUpstream({
    url: new URL(instance.url),
    method: method as 'GET' | 'POST',
    headers,
    body: text,
    name: `MCP server of instance ${instance.name.slice(0, 60)}`,
    // every answer must start in time; only an established GET stream may then stay quiet for long
    timeoutMs,
    ...(method === 'GET' ? { bodyTimeoutMs: GET_STREAM_QUIET_MS, stream: true } : {}),
    signal: abort,
  });

  const contentType = String(upstream.headers['content-type'] ?? '');
  const answer = upstream.body;
  const streaming = contentType.startsWith('text/event-stream');
  if (upstream.statusCode === 401 || upstream.statusCode === 403) {
    // The MCP server refused the instance's own credentials, not the app's token: a 401 passed on
    // would make the app drop a good token, and its text may quote the credential.
    answer.on('error', () => undefined);
    answer.destroy();
    throw new AppError('upstream_rejected', `The MCP server refused svc's credentials for this instance (${upstream.statusCode}); its owner must fix them.`);
  }
  // Anything but a stream is read whole (bounded) before svc answers, so an upstream that stalls
  // or breaks off is a 504/502 in the contract's shape, never silence or half a body.
  const whole = streaming ? undefined : await readBody(answer, MCP_ANSWER_LIMIT, `MCP server of instance ${instance.name.slice(0, 60)}`);

  const out: Record<string, string> = { 'X-Content-Type-Options': 'nosniff' };
  for (const name of FORWARDED_RESPONSE_HEADERS) {
    const value = upstream.headers[name];
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  if (whole) {
    let reply: string | Buffer = whole;
    if (listIds.size > 0 && contentType.startsWith('application/json')) {
      try {
        const parsed = JSON.parse(whole.toString('utf8')) as JsonRpc | JsonRpc[];
        reply = JSON.stringify(Array.isArray(parsed) ? parsed.map((m) => filterToolList(m, instance, listIds)) : filterToolList(parsed, instance, listIds));
      } catch {
        /* not JSON-RPC: pass on as it came */
      }
    }
    // An error answer may quote the instance's credential back: scrubbed in every JSON spelling.
    if (upstream.statusCode >= 400 && secrets.length > 0) {
      let scrubbed = reply.toString();
      for (const secret of secrets) scrubbed = scrubJsonText(scrubbed, secret);
      reply = scrubbed;
    }
    out['content-length'] = String(Buffer.byteLength(reply));
    if (ctx.state.activity && answeredWithError(whole)) ctx.state.activity.failed = true;
    takeResponse(ctx, upstream.statusCode, out).end(reply);
    return;
  }

  const res = takeResponse(ctx, upstream.statusCode, out);
  res.flushHeaders();
  const filter =
    listIds.size > 0
      ? new SseEventFilter((data) => {
          try {
            return JSON.stringify(filterToolList(JSON.parse(data) as JsonRpc, instance, listIds));
          } catch {
            return data;
          }
        })
      : null;
  // An MCP stream has no error event of its own: a broken upstream ends it, as a closed connection would.
  await pumpStream(res, answer, filter, () => null);
}
