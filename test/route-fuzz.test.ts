/**
 * Every operation of the daemon's own OpenAPI document, walked with a fixed set of hostile
 * variants: path ids that are malformed or name another kind of record, queries of the wrong type
 * or size, bodies that are not JSON, JSON of the wrong type, fields missing, mistyped, huge, deeply
 * nested or out of range, the wrong Content-Type, and each kind of credential (none, a session, an
 * API key, a bogus one). Whatever comes in, the answer comes within its timeout, is never a 5xx, is
 * the catalogue's error shape when it is a 4xx, and carries none of the secrets planted in the
 * daemon (a provider's API key, an MCP instance's header, passwords, API keys). The browser pages
 * under /ui take hostile query strings without a 5xx too.
 *
 * The variants are listed, not drawn at random, so every run sends the same requests in the same
 * order. bad-input.test.ts draws random malformed input against the route table; this file reads
 * the OpenAPI document instead, so an operation added there is fuzzed here with no change.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../src/errors.js';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, createBody, userApi } from './helpers/http.js';
import { startMcpServer } from './helpers/mcp-servers.js';
import { startUpstream } from './helpers/upstream.js';

const PROVIDER_KEY = 'sk-fuzz-provider-3f9c1e7a5b20d846';
const MCP_SECRET = 'mcp-fuzz-header-8d2b6f0e4c1a9735';
const VICTIM_PASSWORD = 'pw-fz-victim-secret-5521';
const TIMEOUT_MS = 5_000;
/** A record id of the right form that names nothing. */
const NO_SUCH_ID = '00000000-0000-4000-8000-000000000000';

type Json = any;

type Cred = 'none' | 'adminSession' | 'userSession' | 'adminKey' | 'userKey' | 'bogusBearer' | 'bogusCookie' | 'sessionAndKey' | 'basicAuth';
const ALL_CREDS: Cred[] = ['none', 'adminSession', 'userSession', 'adminKey', 'userKey', 'bogusBearer', 'bogusCookie', 'sessionAndKey', 'basicAuth'];

interface Operation {
  operationId: string;
  method: string;
  template: string;
  auth: 'none' | 'session' | 'bearer' | 'either';
  pathParams: string[];
  query: { name: string; required: boolean; schema: Json }[];
  bodySchema?: Json;
}

interface Probe {
  op: string;
  variant: string;
  method: string;
  path: string;
  cred: Cred;
  body?: string | Buffer;
  contentType?: string | null;
  headers?: Record<string, string>;
  /** the browser pages answer HTML: only the status and secrets are checked */
  page?: boolean;
  /** the MCP proxy relays the MCP server's own answers (JSON-RPC errors) as they come */
  relay?: boolean;
}

let d: TestDaemon;
let upstream: Awaited<ReturnType<typeof startUpstream>>;
let mcp: Awaited<ReturnType<typeof startMcpServer>>;
let doc: Json;
const credHeaders = {} as Record<Cred, Record<string, string>>;
const secrets: string[] = [];
const findings: string[] = [];
const stats = { requests: 0, byStatus: new Map<number, number>(), slowestMs: 0, slowest: '' };

/** Real records, by the kind of id a path parameter takes. */
const ids: Record<string, string> = {};

// ---------------------------------------------------------------------------------------------
// Sending and checking one request.

const describeProbe = (p: Probe) =>
  `${p.op} [${p.variant}] ${p.method} ${p.path.slice(0, 160)}${p.path.length > 160 ? '…' : ''} as ${p.cred}` +
  (p.body === undefined ? '' : ` body=${JSON.stringify(String(p.body).slice(0, 120))}${String(p.body).length > 120 ? '…' : ''}`);

const ANTHROPIC_TYPES = ['invalid_request_error', 'authentication_error', 'permission_error', 'not_found_error', 'request_too_large', 'rate_limit_error', 'api_error', 'overloaded_error'];

/** What is wrong with a 4xx body of Anthropic's Messages paths, in Anthropic's shape; undefined when nothing. */
function anthropicShapeProblem(body: Json): string | undefined {
  if (Object.keys(body).join() !== 'type,error' || body.type !== 'error') return `top-level keys ${Object.keys(body).join(',')}`;
  const e = body.error;
  if (e === null || typeof e !== 'object' || Object.keys(e).join() !== 'type,message' || typeof e.message !== 'string') return 'error is not {type, message}';
  return ANTHROPIC_TYPES.includes(e.type) ? undefined : `type ${e.type} is not Anthropic's`;
}

/** What is wrong with a 4xx body, measured against the catalogue (src/errors.ts); undefined when nothing. */
function shapeProblem(status: number, body: Json, path = ''): string | undefined {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return 'not a JSON object';
  if (/^\/v1\/messages(\/|\?|$)/.test(path)) return anthropicShapeProblem(body);
  if (Object.keys(body).join() !== 'error') return `top-level keys ${Object.keys(body).join(',')}`;
  const e = body.error;
  if (e === null || typeof e !== 'object') return 'error is not an object';
  if (typeof e.message !== 'string' || typeof e.type !== 'string' || typeof e.code !== 'string') return 'message, type or code missing';
  if (e.param !== undefined && typeof e.param !== 'string') return 'param is not a string';
  const extra = Object.keys(e).filter((k) => !['message', 'type', 'code', 'param'].includes(k));
  if (extra.length > 0) return `extra error keys ${extra.join(',')}`;
  const entry = (ERROR_CODES as Record<string, { status: number | 'upstream'; type: string }>)[e.code];
  if (!entry) return `code ${e.code} is not in the catalogue`;
  if (entry.status === 'upstream') return undefined;
  if (entry.type !== e.type) return `type ${e.type} is not ${entry.type} for ${e.code}`;
  if (entry.status !== status) return `status ${status} is not ${entry.status} for ${e.code}`;
  return undefined;
}

async function send(p: Probe): Promise<void> {
  const headers: Record<string, string> = { ...credHeaders[p.cred], ...p.headers };
  if (p.contentType !== null && (p.contentType !== undefined || p.body !== undefined)) headers['Content-Type'] = p.contentType ?? 'application/json';
  const what = describeProbe(p);
  const started = performance.now();
  stats.requests++;
  let res: Response;
  let text = '';
  try {
    // fetch labels a string body text/plain: bytes go with no Content-Type at all
    const body = p.body === undefined ? undefined : typeof p.body === 'string' && p.contentType !== null ? p.body : new Uint8Array(Buffer.from(p.body));
    res = await fetch(`${d.url}${p.path}`, { method: p.method, headers, body, redirect: 'manual', signal: AbortSignal.timeout(TIMEOUT_MS) });
    // a stream (the MCP GET, an SSE completion) is judged by its head: its end is the client's to choose
    if ((res.headers.get('content-type') ?? '').includes('text/event-stream')) await res.body?.cancel();
    else text = await res.text();
  } catch (err) {
    findings.push(`${what} -> no answer within ${TIMEOUT_MS} ms (${(err as Error).name}: ${(err as Error).message})`);
    return;
  }
  const ms = performance.now() - started;
  if (ms > stats.slowestMs) Object.assign(stats, { slowestMs: ms, slowest: what });
  stats.byStatus.set(res.status, (stats.byStatus.get(res.status) ?? 0) + 1);
  const got = `${res.status} ${text.slice(0, 200)}`;
  if (res.status >= 500) findings.push(`${what} -> ${got}`);
  if (!p.page && res.status >= 400 && res.status < 500) {
    let body: Json;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    const relayed = p.relay && body?.jsonrpc === '2.0' && typeof body?.error?.code === 'number';
    const problem = relayed ? undefined : shapeProblem(res.status, body, p.path);
    if (problem) findings.push(`${what} -> ${got} (error shape: ${problem})`);
  }
  const everything = `${text}\n${[...res.headers].map(([k, v]) => `${k}: ${v}`).join('\n')}`;
  for (const secret of secrets) if (everything.includes(secret)) findings.push(`${what} -> answer holds a planted secret (${secret.slice(0, 6)}…)`);
}

// ---------------------------------------------------------------------------------------------
// The operations, from the OpenAPI document.

function resolve(schema: Json): Json {
  let s = schema;
  while (s?.$ref) s = doc.components.schemas[String(s.$ref).split('/').pop()!];
  return s;
}

function operations(): Operation[] {
  const out: Operation[] = [];
  for (const [template, methods] of Object.entries<Json>(doc.paths)) {
    for (const [method, op] of Object.entries<Json>(methods)) {
      if (!op?.operationId) continue;
      const security: Json[] = op.security ?? [];
      const kinds = new Set(security.flatMap((s) => Object.keys(s)));
      const auth = kinds.has('session') && kinds.has('bearer') ? 'either' : kinds.has('session') ? 'session' : kinds.has('bearer') ? 'bearer' : 'none';
      const params: Json[] = op.parameters ?? [];
      out.push({
        operationId: op.operationId,
        method: method.toUpperCase(),
        template,
        auth,
        pathParams: params.filter((x) => x.in === 'path').map((x) => x.name),
        query: params.filter((x) => x.in === 'query').map((x) => ({ name: x.name, required: Boolean(x.required), schema: resolve(x.schema) })),
        bodySchema: op.requestBody ? resolve(op.requestBody.content?.['application/json']?.schema) : undefined,
      });
    }
  }
  return out;
}

/** Calls that change or end something without a body: they only ever get ids that name nothing of their kind. */
const DESTRUCTIVE = new Set(['logout', 'removeUser', 'denyAccessRequest', 'revokeAccessRequest', 'revokeApiKey', 'removeMcpInstance', 'removeOAuthClient', 'removeProvider', 'removeModelAlias', 'denyHeldCall', 'mcpProxyDelete']);

/** The kind of record a path parameter names, by where it sits. */
function paramKind(template: string, name: string): string {
  if (name === 'username') return 'user';
  if (name === 'client_id') return 'client';
  if (name === 'tool_name') return 'tool';
  if (name === 'name') return 'provider';
  if (/\/access-requests\//.test(template)) return 'accessRequest';
  if (/\/keys\//.test(template)) return 'key';
  if (/\/mcps\//.test(template)) return 'mcp';
  if (/\/calls\//.test(template)) return 'heldCall';
  if (/\/models\/files\/pull\//.test(template)) return 'pull';
  if (/^\/svc\/v1\/models\//.test(template)) return 'alias';
  if (/^\/v1\/models\//.test(template)) return 'model';
  return 'other';
}

/** The id a well-formed call would use; for destructive calls, one that names nothing. */
function goodId(op: Operation, name: string): string {
  const kind = paramKind(op.template, name);
  if (DESTRUCTIVE.has(op.operationId)) return kind === 'user' || kind === 'provider' ? 'fz-nobody' : kind === 'tool' ? 'echo' : NO_SUCH_ID;
  return ids[kind] ?? NO_SUCH_ID;
}

function fillPath(op: Operation, values: Record<string, string> = {}): string {
  return op.template.replace(/\{([^}]+)\}/g, (_, name: string) => values[name] ?? encodeURIComponent(goodId(op, name)));
}

/** A query string with the required parameters well formed. */
function goodQuery(op: Operation, without?: string): string {
  const parts = op.query.filter((q) => q.required && q.name !== without).map((q) => `${q.name}=${encodeURIComponent(exampleOf(q.schema, q.name))}`);
  return parts.length > 0 ? `?${parts.join('&')}` : '';
}

/** The credential a call of this kind is meant to carry (`either` alternates). */
const rightCred = (op: Operation, n = 0): Cred =>
  op.auth === 'none' ? 'none' : op.auth === 'session' ? 'adminSession' : op.auth === 'bearer' ? 'adminKey' : n % 2 === 0 ? 'adminSession' : 'adminKey';

// ---------------------------------------------------------------------------------------------
// Bodies.

/** A value a schema takes, for operations that have no hand-written body below. */
function exampleOf(schema: Json, name = ''): Json {
  const s = resolve(schema) ?? {};
  if (s.default !== undefined) return s.default;
  if (s.enum) return s.enum[0];
  if (s.anyOf) return exampleOf(s.anyOf[0], name);
  switch (s.type) {
    case 'object': {
      const out: Record<string, Json> = {};
      for (const key of s.required ?? []) out[key] = exampleOf(s.properties?.[key], key);
      return out;
    }
    case 'array':
      return Array.from({ length: s.minItems ?? 0 }, () => exampleOf(s.items));
    case 'integer':
    case 'number':
      return s.minimum ?? 1;
    case 'boolean':
      return true;
    case 'string':
      if (s.format === 'uri') return upstream.url;
      if (name === 'app_client_id') return 'demo-app';
      return 'fz';
    default:
      return 'fz';
  }
}

/** Bodies a call would take, by operationId: what each hostile variant starts from. */
function baseBodies(): Record<string, Json> {
  return {
    login: { username: 'fz-nobody', password: 'not-the-password' },
    createUser: { username: 'fz-made', role: 'user', password: 'a-long-password' },
    setUserRole: { role: 'user' },
    setUserPassword: { password: VICTIM_PASSWORD },
    createAccessRequest: createBody({ requested: { version: '1', mcp_servers: [{ url: mcp.url }] } }),
    approveAccessRequest: { approved_role: 'scope_user_user', approved: { version: '1', mcp_servers: [{ url: mcp.url, instance_ids: [ids.mcp] }] }, limits: { requests_per_minute: 100 } },
    createApiKey: { name: 'fz key', role: 'scope_user_user', mcp_servers: [{ url: mcp.url, instance_ids: [ids.mcp] }], expires_in: 3600 },
    createMcpInstance: { name: 'fz made', url: mcp.url, headers: [{ name: 'X-Fz', value: 'v' }], allow_tools: ['echo'], enabled: true },
    updateMcpInstance: { name: 'fz renamed', enabled: true, allow_tools: null },
    createOAuthClient: { name: 'fz client', description: 'd', redirect_uris: ['http://127.0.0.1:9/cb'], public: true },
    executeAppMcpTool: { params: { message: 'hi' } },
    approveHeldCall: { remember_minutes: 5 },
    setGrantTools: { [ids.mcp]: { default: 'allow' } },
    createProvider: { name: 'fz-made', base_url: upstream.url, api_key: 'sk-fz-made', models: ['m1'], timeout_ms: 1000 },
    putModelAlias: { provider: 'local', model: 'fake-model', defaults: { temperature: 0.5 } },
    pullModelFile: { url: `${upstream.url}/no-such-file.gguf`, filename: 'fz.gguf', sha256: 'a'.repeat(64) },
    createChatCompletion: { model: 'fake-model', messages: [{ role: 'user', content: 'hi' }], stream: false },
    createEmbeddings: { model: 'embed-model', input: ['a', 'b'] },
    createCompletion: { model: 'fake-model', prompt: 'hi', stream: false },
    createResponse: { model: 'fake-model', input: 'hi', stream: false },
    setGrantLimits: { requests_per_minute: 1000, tokens_per_day: null },
    mcpProxyPost: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
  };
}

type PathKey = (string | number)[];
/** Every path into a JSON value, outermost first. */
function pathsOf(value: Json, prefix: PathKey = []): PathKey[] {
  if (value === null || typeof value !== 'object') return [];
  const entries: [string | number, Json][] = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
  return entries.flatMap(([k, v]) => [[...prefix, k], ...pathsOf(v, [...prefix, k])]);
}
const getAt = (value: Json, p: PathKey) => p.reduce((v, k) => v?.[k], value);

/** The value with the one at `p` replaced (or, with `undefined`, removed). */
function setAt(base: Json, p: PathKey, replacement: Json | undefined): Json {
  const clone = structuredClone(base);
  const parent = getAt(clone, p.slice(0, -1));
  const last = p[p.length - 1];
  if (replacement === undefined) {
    if (Array.isArray(parent)) parent.splice(last as number, 1);
    else delete parent[last];
  } else parent[last] = replacement;
  return clone;
}

/** A value of another JSON type than `v`. */
function wrongType(v: Json): Json {
  if (typeof v === 'string') return 12345;
  if (typeof v === 'number') return 'twelve';
  if (typeof v === 'boolean') return 'yes';
  if (v === null) return { null: true };
  if (Array.isArray(v)) return { not: 'an array' };
  return ['not', 'an', 'object'];
}

const DEPTH = 10_000;
const deepArray = `${'['.repeat(DEPTH)}${']'.repeat(DEPTH)}`;
const deepObject = `${'{"a":'.repeat(DEPTH)}1${'}'.repeat(DEPTH)}`;
const HUGE = 'x'.repeat(100_000);

/** JSON text with the value at `p` replaced by raw JSON text (numbers JSON.stringify cannot write, deep nesting). */
function withRaw(base: Json, p: PathKey, raw: string): string {
  const marker = '__fz_raw_marker__';
  return JSON.stringify(setAt(base, p, marker)).replace(`"${marker}"`, raw);
}

interface BodyVariant {
  variant: string;
  body: string | Buffer;
  contentType?: string | null;
}

/** The hostile bodies for one operation, from its base body and its schema. */
function bodyVariants(base: Json, schema: Json | undefined): BodyVariant[] {
  const text = JSON.stringify(base);
  const out: BodyVariant[] = [
    { variant: 'not JSON: cut short', body: text.slice(0, Math.max(1, text.length - 3)) },
    { variant: 'not JSON: words', body: 'hello there' },
    { variant: 'not JSON: single quotes', body: "{'a': 1}" },
    { variant: 'not JSON: trailing comma', body: '{"a":1,}' },
    { variant: 'not JSON: two documents', body: `${text}${text}` },
    { variant: 'not JSON: empty', body: '' },
    { variant: 'not JSON: broken UTF-8', body: Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xc3, 0x28, 0xff, 0xfe]), Buffer.from('"}')]) },
    { variant: 'root: array', body: JSON.stringify([base]) },
    { variant: 'root: empty array', body: '[]' },
    { variant: 'root: string', body: '"a string"' },
    { variant: 'root: number', body: '42' },
    { variant: 'root: null', body: 'null' },
    { variant: 'root: true', body: 'true' },
    { variant: 'root: empty object', body: '{}' },
    { variant: 'deep nesting: arrays', body: deepArray },
    { variant: 'deep nesting: objects', body: deepObject },
    { variant: 'unknown field', body: JSON.stringify({ ...base, fz_unknown_field: 1 }) },
    { variant: 'prototype keys', body: `{"__proto__":{"role":"admin","polluted":1},"constructor":{"prototype":{"polluted":1}},${text.slice(1)}` },
    { variant: 'over the body limit', body: JSON.stringify({ ...base, fz_padding: 'x'.repeat(1_100_000) }) },
    { variant: 'content-type: none', body: text, contentType: null },
    { variant: 'content-type: text/plain', body: text, contentType: 'text/plain' },
    { variant: 'content-type: form', body: 'a=1&b=2', contentType: 'application/x-www-form-urlencoded' },
    { variant: 'content-type: multipart', body: '--x\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--x--\r\n', contentType: 'multipart/form-data; boundary=x' },
    { variant: 'content-type: json in UTF-16', body: Buffer.from(text, 'utf16le'), contentType: 'application/json; charset=utf-16le' },
    { variant: 'content-type: bogus charset', body: text, contentType: 'application/json; charset=bogus' },
    { variant: 'content-type: xml', body: '<a>1</a>', contentType: 'application/xml' },
  ];
  if (base === null || typeof base !== 'object') return out;
  for (const p of pathsOf(base)) {
    const at = p.join('.');
    const v = getAt(base, p);
    out.push({ variant: `missing ${at}`, body: JSON.stringify(setAt(base, p, undefined)) });
    out.push({ variant: `wrong type ${at}`, body: JSON.stringify(setAt(base, p, wrongType(v))) });
    out.push({ variant: `deep nesting in ${at}`, body: withRaw(base, p, deepObject) });
    if (typeof v === 'string') {
      out.push({ variant: `100k string ${at}`, body: JSON.stringify(setAt(base, p, HUGE)) });
      // the fake upstream refuses this model with a message that quotes the provider's key
      if (at === 'model') out.push({ variant: 'a model whose upstream refuses, quoting its key', body: JSON.stringify(setAt(base, p, 'fail400')) });
      out.push({ variant: `control characters ${at}`, body: JSON.stringify(setAt(base, p, `${v}\u0000\r\n\u202e\ud800`)) });
    }
    if (typeof v === 'number' || typeof v === 'boolean' || v === null) {
      for (const raw of ['-1', '0', '1.5', '1e309', '-1e309', '123456789012345678901234567890', '9007199254740993', '-0']) out.push({ variant: `number ${raw} at ${at}`, body: withRaw(base, p, raw) });
    }
  }
  // optional fields the base leaves out, each of a wrong type and out of range
  for (const [key, prop] of Object.entries<Json>(resolve(schema)?.properties ?? {})) {
    if (key in base) continue;
    const example = exampleOf(prop, key);
    out.push({ variant: `added ${key} of the wrong type`, body: JSON.stringify({ ...base, [key]: wrongType(example) }) });
    out.push({ variant: `added ${key} = 1e309`, body: withRaw({ ...base, [key]: 0 }, [key], '1e309') });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Path and query values.

/** Malformed ids, and ids of three records of other kinds (which three turns with `turn`). */
function hostileIds(kind: string, turn: number): [string, string][] {
  const list: [string, string][] = [
    ['empty', ''],
    ['a space', '%20'],
    ['NUL', '%00'],
    ['NUL after an id', `${NO_SUCH_ID}%00`],
    ['dot-dot slash', '..%2F..%2Fdb.json'],
    ['encoded dot-dot', '%2e%2e'],
    ['backslashes', '..%5C..%5Cmaster.key'],
    ['bad escape', '%zz'],
    ['lone surrogate bytes', '%ED%A0%80'],
    ['overlong UTF-8', '%C0%AE%C0%AE'],
    ['unicode', encodeURIComponent('é🤖\u202eabc')],
    ['5k characters', 'a'.repeat(5_000)],
    ['20k characters', 'a'.repeat(20_000)],
    ['__proto__', '__proto__'],
    ['a uuid of nothing', NO_SUCH_ID],
  ];
  const others = Object.entries(ids).filter(([otherKind]) => otherKind !== kind);
  for (let i = 0; i < 3; i++) {
    const [otherKind, id] = others[(turn + i) % others.length];
    list.push([`a ${otherKind} id`, encodeURIComponent(id)]);
  }
  return list;
}

/** Query values of the wrong type or size for a parameter of this schema. */
function hostileQueryValues(schema: Json): [string, string][] {
  const s = resolve(schema) ?? {};
  const list: [string, string][] = [
    ['empty', ''],
    ['NUL', '%00'],
    ['bad escape', '%zz'],
    ['unicode', encodeURIComponent('é🤖')],
    ['20k characters', 'q'.repeat(20_000)],
    ['5k characters', 'q'.repeat(5_000)],
  ];
  if (s.type === 'integer' || s.type === 'number') {
    for (const v of ['abc', '-1', '1.5', '1e309', '123456789012345678901234567890', 'NaN', 'Infinity', '0x10', ' 5', '0']) list.push([`number ${v}`, encodeURIComponent(v)]);
  } else {
    list.push(['a number', '12345'], ['not in the enum', 'fz-not-a-value']);
  }
  return list;
}

// ---------------------------------------------------------------------------------------------
// The walk.

function probesFor(op: Operation, turn: number): Probe[] {
  const probes: Probe[] = [];
  const bodies = baseBodies();
  const base = bodies[op.operationId] ?? (op.bodySchema ? exampleOf(op.bodySchema) : undefined);
  const takesBody = op.method !== 'GET';
  const goodPath = fillPath(op) + goodQuery(op);
  const baseText = base === undefined ? undefined : JSON.stringify(base);
  let n = 0;
  // an MCP client accepts both answers a Streamable HTTP server may give
  const headers = op.template.endsWith('/mcp') ? { Accept: 'application/json, text/event-stream' } : undefined;
  const probe = (variant: string, path: string, extra: Partial<Probe> = {}) =>
    probes.push({ op: op.operationId, variant, method: op.method, path, cred: rightCred(op, n++), body: takesBody ? baseText : undefined, headers, relay: Boolean(headers), ...extra });

  // path ids: malformed, or naming a record of another kind
  for (const [i, name] of op.pathParams.entries()) {
    for (const [variant, value] of hostileIds(paramKind(op.template, name), turn + i)) {
      probe(`path ${name}: ${variant}`, fillPath(op, { [name]: value }) + goodQuery(op));
    }
  }
  // query values: each parameter wrong, duplicated, as an array, and unknown ones
  for (const q of op.query) {
    const rest = goodQuery(op, q.name);
    const join = (s: string) => `${fillPath(op)}${rest ? `${rest}&` : '?'}${s}`;
    for (const [variant, value] of hostileQueryValues(q.schema)) probe(`query ${q.name}: ${variant}`, join(`${q.name}=${value}`));
    probe(`query ${q.name}: twice`, join(`${q.name}=${encodeURIComponent(exampleOf(q.schema, q.name))}&${q.name}=other`));
    probe(`query ${q.name}: array syntax`, join(`${q.name}[]=a&${q.name}[x]=b`));
    if (q.required) probe(`query ${q.name}: missing`, `${fillPath(op)}${rest}`);
  }
  probe('query: unknown and prototype keys', `${goodPath}${goodPath.includes('?') ? '&' : '?'}fz=1&__proto__[polluted]=1&constructor[prototype][polluted]=1`);
  probe('query: broken escapes', `${goodPath}${goodPath.includes('?') ? '&' : '?'}%zz=%zz&&&==&`);
  // bodies (GET carries none)
  if (takesBody) {
    for (const v of bodyVariants(base ?? { a: 1 }, op.bodySchema)) probe(`body: ${v.variant}`, goodPath, { body: v.body, contentType: v.contentType });
  }
  // each credential, and the wrong kind, on a well-formed call; none, a forged one and the other
  // kind also on bad bodies
  for (const cred of ALL_CREDS) {
    if (op.operationId === 'logout' && (cred === 'adminSession' || cred === 'sessionAndKey')) continue; // would end the walk's own session
    probe(`credential ${cred}`, goodPath, { cred });
  }
  const wrongKind: Cred = op.auth === 'session' ? 'adminKey' : op.auth === 'bearer' ? 'adminSession' : 'bogusCookie';
  for (const cred of takesBody ? (['none', 'bogusBearer', wrongKind] as Cred[]) : []) {
    probe(`credential ${cred}, body not JSON`, goodPath, { cred, body: '{"a":' });
    probe(`credential ${cred}, deep body`, goodPath, { cred, body: deepArray });
  }
  return probes;
}

const UI_PAGES = ['/ui', '/ui/login', '/ui/login-link', '/ui/apps', '/ui/calls', '/ui/calls/list', '/ui/grants/tools', '/ui/apps/access-requests/review', '/ui/apps/access-requests/review/done', '/ui/logout'];
const UI_PARAMS = ['id', 'next', 'token', 'status', 'grant', 'after', 'request', 'instance'];

function uiProbes(): Probe[] {
  const values: [string, string][] = [
    ['NUL', '%00'],
    ['bad escape', '%zz'],
    ['lone surrogate bytes', '%ED%A0%80'],
    ['5k characters', 'a'.repeat(5_000)],
    ['off-site', encodeURIComponent('//evil.example/')],
    ['script', encodeURIComponent('"><script>alert(1)</script>')],
    ['a number', '-1e309'],
    ['an access request id', ids.accessRequest],
    ['an mcp id', ids.mcp],
  ];
  const probes: Probe[] = [];
  for (const page of UI_PAGES) {
    for (const cred of ['none', 'userSession', 'adminSession'] as Cred[]) {
      if (page === '/ui/logout' && cred !== 'none') continue; // would end the walk's own session
      // each value under a parameter that turns from page to page and credential to credential
      values.forEach(([variant, value], i) => {
        const param = UI_PARAMS[(i + probes.length) % UI_PARAMS.length];
        probes.push({ op: page, variant: `${param}: ${variant}`, method: 'GET', path: `${page}?${param}=${value}`, cred, page: true });
      });
      for (const q of ['id=a&id=b', 'id[]=a', '__proto__[polluted]=1', '%zz=%zz&&&==&']) probes.push({ op: page, variant: q, method: 'GET', path: `${page}?${q}`, cred, page: true });
    }
  }
  return probes;
}

// ---------------------------------------------------------------------------------------------

describe('every OpenAPI operation against hostile input', () => {
  let ops: Operation[] = [];

  beforeAll(async () => {
    [upstream, mcp] = await Promise.all([startUpstream({ apiKey: PROVIDER_KEY }), startMcpServer({ stateful: false })]);
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, rateLimitPoll: 0 } });
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    const user = await userApi(d.url, admin, 'fz-user', 'user');
    const victim = await admin.post('/svc/v1/users', { username: 'fz-victim', role: 'user', password: VICTIM_PASSWORD });
    expect(victim.status, victim.text).toBe(201);

    const instance = await admin.post('/svc/v1/mcps', { name: 'fz tools', url: mcp.url, headers: [{ name: 'X-Api-Key', value: MCP_SECRET }] });
    expect(instance.status, instance.text).toBe(201);
    ids.mcp = instance.body.instance.id;
    const provider = await admin.post('/svc/v1/providers', { name: 'local', base_url: upstream.url, api_key: PROVIDER_KEY, timeout_ms: 2000 });
    expect(provider.status, provider.text).toBe(201);
    const adminKey = await admin.post('/svc/v1/keys', { name: 'fz admin key', role: 'scope_user_power_user', mcp_servers: [{ url: mcp.url, instance_ids: [ids.mcp] }] });
    expect(adminKey.status, adminKey.text).toBe(201);
    const userKey = await user.post('/svc/v1/keys', { name: 'fz user key' });
    expect(userKey.status, userKey.text).toBe(201);
    ids.key = adminKey.body.id;
    const client = await admin.post('/admin/v1/clients', { name: 'fz app', redirect_uris: ['http://127.0.0.1:9/cb'] });
    expect(client.status, client.text).toBe(201);
    ids.client = client.body.client_id ?? client.body.client?.client_id;
    const alias = await admin.put('/svc/v1/models/fz-alias', { provider: 'local', model: 'fake-model' });
    expect(alias.status, alias.text).toBe(200);

    const app = new Api(d.url);
    const ask = async () => {
      const res = await app.post('/svc/v1/apps/request-access', createBody({ requested: { version: '1', mcp_servers: [{ url: mcp.url }] } }));
      expect(res.status, res.text).toBe(201);
      return res.body.id as string;
    };
    const approved = await ask();
    const approve = await admin.put(`/svc/v1/access-requests/${approved}/approve`, { approved_role: 'scope_user_user', approved: { version: '1', mcp_servers: [{ url: mcp.url, instance_ids: [ids.mcp] }] } });
    expect(approve.status, approve.text).toBe(200);
    Object.assign(ids, { accessRequest: approved, draft: await ask(), user: 'fz-victim', provider: 'local', alias: 'fz-alias', model: 'fake-model', tool: 'echo' });

    const fakeKey = `svc_${'A'.repeat(43)}`;
    Object.assign(credHeaders, {
      none: {},
      adminSession: { Cookie: admin.cookieHeader },
      userSession: { Cookie: user.cookieHeader },
      adminKey: { Authorization: `Bearer ${adminKey.body.key}` },
      userKey: { Authorization: `Bearer ${userKey.body.key}` },
      bogusBearer: { Authorization: `Bearer ${fakeKey}` },
      bogusCookie: { Cookie: 'svc_session=forged; svc_session.sig=forged' },
      sessionAndKey: { Cookie: admin.cookieHeader, Authorization: `Bearer ${userKey.body.key}` },
      basicAuth: { Authorization: `Basic ${Buffer.from(`admin:${d.adminPassword}`).toString('base64')}` },
    } satisfies Record<Cred, Record<string, string>>);
    secrets.push(PROVIDER_KEY, MCP_SECRET, VICTIM_PASSWORD, d.adminPassword, 'pw-fz-user-12345', adminKey.body.key, userKey.body.key);
    if (client.body.client_secret) secrets.push(client.body.client_secret);

    doc = (await admin.get('/svc/v1/openapi.json')).body;
    ops = operations();
  });

  afterAll(async () => {
    await d?.stop();
    await upstream?.close();
    await mcp?.close();
  });

  // What the walk found, each on its own.

  it('refuses a value nested 10k levels deep where svc keeps or re-sends it: a 400, not a 500, 502 or 503', async () => {
    const deep = `${'{"a":'.repeat(DEPTH)}1${'}'.repeat(DEPTH)}`;
    const calls: [string, string, string, Record<string, string>][] = [
      ['POST', `/svc/v1/apps/mcps/${ids.mcp}/mcp`, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":${deep}}`, { ...credHeaders.adminKey, Accept: 'application/json, text/event-stream' }],
      ['POST', `/svc/v1/apps/mcps/${ids.mcp}/tools/echo/execute`, `{"params":{"message":${deep}}}`, credHeaders.adminKey],
      ['PUT', '/svc/v1/models/fz-alias', `{"provider":"local","model":"fake-model","defaults":{"temperature":${deep}}}`, credHeaders.adminSession],
    ];
    for (const [method, path, body, headers] of calls) {
      const res = await fetch(`${d.url}${path}`, { method, body, headers: { ...headers, 'Content-Type': 'application/json' }, signal: AbortSignal.timeout(TIMEOUT_MS) });
      const answer = await res.json();
      expect([res.status, answer.error?.code], `${method} ${path}: ${JSON.stringify(answer)}`).toEqual([400, 'invalid_body']);
    }
    expect(d.logs.filter((l) => /request failed|store write failed/.test(l))).toEqual([]);
    // nesting a tool or a model would plausibly take still passes
    const nested = JSON.parse(`${'{"a":'.repeat(30)}1${'}'.repeat(30)}`);
    const ok = await fetch(`${d.url}/svc/v1/models/fz-alias`, { method: 'PUT', body: JSON.stringify({ provider: 'local', model: 'fake-model', defaults: { metadata: nested } }), headers: { ...credHeaders.adminSession, 'Content-Type': 'application/json' } });
    expect(ok.status, await ok.text()).toBe(200);
  });

  it('answers a URL or headers over the HTTP parser\'s limit with a 431 in the error shape, not a bare status line', async () => {
    const tooLong: [string, Record<string, string>][] = [
      [`/svc/v1/mcps/${'a'.repeat(20_000)}`, credHeaders.adminSession],
      [`/svc/v1/access-requests?status=${'q'.repeat(20_000)}`, credHeaders.adminSession],
      ['/svc/v1/auth/me', { Cookie: `svc_session=${'c'.repeat(20_000)}` }],
    ];
    for (const [path, headers] of tooLong) {
      const res = await fetch(`${d.url}${path}`, { headers, signal: AbortSignal.timeout(TIMEOUT_MS) });
      const text = await res.text();
      expect(res.status).toBe(431);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(shapeProblem(res.status, JSON.parse(text || 'null')), text).toBeUndefined();
    }
    // the daemon still answers on a new connection
    expect((await fetch(`${d.url}/svc/v1/health`)).status).toBe(200);
  });

  it('refuses an OAuth client\'s redirect URI with control, whitespace or invisible characters, as an app\'s redirect_url is refused', async () => {
    for (const uri of ['http://127.0.0.1:9/cb\u0000', 'http://127.0.0.1:9/c\tb', 'http://127.0.0.1:9/cb\r\n', 'http://127.0.0.1:9/\u202ebc', 'http://127.0.0.1:9/c b', 'http://127.0.0.1:9/cb\ud800']) {
      const res = await fetch(`${d.url}/admin/v1/clients`, {
        method: 'POST',
        body: JSON.stringify({ name: 'fz odd redirect', redirect_uris: [uri] }),
        headers: { ...credHeaders.adminSession, 'Content-Type': 'application/json' },
      });
      const answer = await res.json();
      expect([res.status, answer.error?.code, answer.error?.param], `${JSON.stringify(uri)}: ${JSON.stringify(answer)}`).toEqual([400, 'invalid_body', 'redirect_uris.0']);
    }
  });

  it('answers every variant of every operation within its timeout, with no 5xx, in the error shape, with no secret', { timeout: 150_000 }, async () => {
    expect(ops.length).toBeGreaterThan(50);
    const started = performance.now();
    for (const [turn, op] of ops.entries()) for (const p of probesFor(op, turn)) await send(p);
    for (const p of uiProbes()) await send(p);
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    console.info(
      `route-fuzz: ${ops.length} operations, ${stats.requests} requests in ${seconds} s; by status ${JSON.stringify(Object.fromEntries([...stats.byStatus].sort((a, b) => a[0] - b[0])))}; slowest ${stats.slowestMs.toFixed(0)} ms: ${stats.slowest.slice(0, 160)}`,
    );
    expect(findings).toEqual([]);
    expect(stats.requests).toBeLessThan(5_000);
    // the walk reached the validators and the handlers, not only the authenticators
    for (const status of [200, 400, 401, 403, 404, 413]) expect(stats.byStatus.get(status) ?? 0, `status ${status}`).toBeGreaterThan(0);
    // and the daemon is still whole: the walk's own session and key still work
    expect((await fetch(`${d.url}/svc/v1/auth/me`, { headers: credHeaders.adminSession })).status).toBe(200);
    expect((await fetch(`${d.url}/v1/models`, { headers: credHeaders.adminKey })).status).toBe(200);
    expect(d.logs.filter((l) => l.includes('"request failed"'))).toEqual([]);
    expect(Object.keys(Object.prototype)).toEqual([]);
  });
});
