/**
 * Bad input, generated: thousands of malformed bodies, headers and paths against every endpoint
 * the daemon mounts, with and without an admin session. Whatever comes in, the daemon never
 * answers 5xx, every /svc/v1 error has the {error:{message,type,code}} shape, a rejected request
 * leaves the store exactly as it was, and the daemon keeps serving.
 *
 * Requests go one at a time so that each one's effect on the store is known exactly.
 */
import { storedOnDisk } from './helpers/store.js';
import http from 'node:http';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyRouteDef } from '../src/http/route.js';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, createBody, expectErrorShape, userApi } from './helpers/http.js';

const MCP_URL = 'http://127.0.0.1:9/mcp';

// ---------------------------------------------------------------------------------------------
// A raw HTTP client: node:http lets the tests send bytes, headers and paths fetch would refuse.

interface Req {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** whether the request carries the admin session */
  admin?: boolean;
}

interface Res {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json: any;
}

let agent: http.Agent;
let d: TestDaemon;

function send(req: Req): Promise<Res> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { Host: `127.0.0.1:${d.port}`, ...req.headers };
    // node:http frames a DELETE body only with an explicit Content-Length.
    if (req.body !== undefined) headers['Content-Length'] = String(Buffer.byteLength(req.body));
    const r = http.request({ agent, host: '127.0.0.1', port: d.port, method: req.method, path: req.path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try {
          json = text ? JSON.parse(text) : undefined;
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
    });
    r.setTimeout(20_000, () => r.destroy(new Error(`timeout: ${req.method} ${req.path.slice(0, 100)}`)));
    r.on('error', reject);
    r.end(req.body);
  });
}

// ---------------------------------------------------------------------------------------------
// The invariants, checked on every single request.

const collections = (db: any) => JSON.stringify([db.access_requests, db.users, db.mcp_instances]);
const memorySnapshot = () => collections({ access_requests: d.store.all('access_requests'), users: d.store.all('users'), mcp_instances: d.store.all('mcp_instances') });
const fileSnapshot = async () => collections(await storedOnDisk(d.dataDir));

const stats = { requests: 0, byStatus: new Map<number, number>(), acknowledgedWrites: [] as string[] };

const describeReq = (req: Req, res?: Res) => {
  const body = req.body === undefined ? '' : ` body=${JSON.stringify(String(req.body).slice(0, 160))}${String(req.body).length > 160 ? '…' : ''}`;
  const hdrs = req.headers ? ` headers=${JSON.stringify(req.headers).slice(0, 300)}` : '';
  const got = res ? ` -> ${res.status} ${res.text.slice(0, 300)}` : '';
  return `${req.method} ${req.path.slice(0, 200)}${req.admin ? ' (admin)' : ''}${hdrs}${body}${got}`;
};

/** decisions: Errors: every error from /svc/v1 and /v1 is JSON in the OpenAI shape. */
const isAnthropicError = (body: unknown): boolean => {
  const b = body as { type?: unknown; error?: { type?: unknown; message?: unknown } } | null;
  return b?.type === 'error' && typeof b.error?.type === 'string' && typeof b.error.message === 'string';
};
const ERROR_SHAPED = /^\/(svc\/)?v1(\/|$|\?)/;

let previous = '';
async function probe(req: Req): Promise<Res> {
  const before = memorySnapshot();
  const res = await send(req);
  stats.requests++;
  stats.byStatus.set(res.status, (stats.byStatus.get(res.status) ?? 0) + 1);
  const what = `${describeReq(req, res)} [previous: ${previous}]`;
  previous = describeReq(req, res).slice(0, 400);
  expect(res.status, what).toBeLessThan(500);
  if (ERROR_SHAPED.test(req.path) && res.status >= 400 && req.method !== 'HEAD') {
    // the Messages API paths answer in Anthropic's error shape, as its SDKs read it
    const anthropic = /^\/v1\/messages(\/|$|\?)/.test(req.path);
    expect(anthropic ? isAnthropicError(res.json) : expectErrorShape(res.json), `error shape: ${what}`).toBe(true);
  }
  const after = memorySnapshot();
  if (res.status >= 400) expect(after, `a rejected request changed the store: ${what}`).toBe(before);
  else if (after !== before) stats.acknowledgedWrites.push(what);
  return res;
}

const run = <T>(arb: fc.Arbitrary<T>, toReq: (v: T) => Req | Promise<Req>, numRuns: number) =>
  fc.assert(
    fc.asyncProperty(arb, async (v) => {
      await probe(await toReq(v));
    }),
    { numRuns },
  );

// ---------------------------------------------------------------------------------------------
// Generators.

/** Any UTF-16 code unit, lone surrogates included. */
const utf16Unit = fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c));
const utf16String = (maxLength = 40) => fc.string({ unit: utf16Unit, maxLength });

const SPECIAL_STRINGS = [
  '',
  ' ',
  '\u0000',
  '\ud800',
  '\udfff',
  'a\ud83eb',
  '\u202e\u2066evil',
  '\ufeff',
  '\r\n',
  'x\r\nSet-Cookie: evil=1',
  '<script>alert(1)</script>',
  `"'\``,
  '../../../../etc/passwd',
  '..\\..\\..\\windows\\win.ini',
  '%00',
  '%2e%2e%2f',
  '${jndi:ldap://127.0.0.1/x}',
  '{{7*7}}',
  'javascript:alert(1)',
  'file:///etc/passwd',
  'http://user:pass@127.0.0.1/',
  'http://127.0.0.1:9/mcp#frag',
  'ftp://127.0.0.1/',
  'http://',
  'http://[::1',
  'scope_user_admin',
  'scope_user_manager',
  'admin',
  'draft',
  'approved',
  '__proto__',
  'constructor',
  'prototype',
  'NaN',
  '1e309',
  '-0',
  'true',
  'null',
  '🤖'.repeat(64),
  'e\u0301'.repeat(100),
  'A'.repeat(256),
];

const hugeString = fc
  .tuple(fc.constantFrom(300, 5_000, 70_000, 300_000, 1_100_000), fc.constantFrom('x', 'é', '🤖', '\u0000', '"'))
  .map(([n, ch]) => ch.repeat(Math.ceil(n / ch.length)));

/** Deep nesting as a value (kept shallow enough for JSON.stringify in the test itself). */
const deepValue = fc
  .tuple(fc.integer({ min: 50, max: 1500 }), fc.boolean())
  .map(([depth, arrays]) => JSON.parse(arrays ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`));

const weirdValue: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: fc.jsonValue({ maxDepth: 3 }), weight: 4 },
  { arbitrary: fc.constantFrom<unknown>(...SPECIAL_STRINGS), weight: 3 },
  { arbitrary: utf16String(), weight: 2 },
  { arbitrary: fc.string({ unit: 'binary', maxLength: 30 }), weight: 1 },
  {
    arbitrary: fc.constantFrom<unknown>(null, true, false, 0, -1, 1.5, 1e308, -1e308, 2 ** 53 + 2, [], {}, [null], { '': '' }, ['1'], { version: '1' }),
    weight: 2,
  },
  { arbitrary: hugeString, weight: 1 },
  { arbitrary: deepValue, weight: 1 },
);

const POISON_KEYS = ['__proto__', 'constructor', 'prototype', '__defineGetter__', 'hasOwnProperty', 'toString', 'valueOf', 'isAdmin', 'role', 'status', 'user_id', 'owner_id', 'id'];
const extraKey = fc.oneof(fc.constantFrom(...POISON_KEYS), fc.string({ maxLength: 20 }));

/** Sets an own property, even one named __proto__ (plain assignment would set the prototype). */
function defineOwn(target: any, key: string | number, value: unknown): void {
  if (Array.isArray(target) && typeof key === 'number') target[key] = value;
  else Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

type PathKey = (string | number)[];
function pathsOf(value: unknown, prefix: PathKey = []): PathKey[] {
  if (value === null || typeof value !== 'object') return [];
  const entries: [string | number, unknown][] = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
  return entries.flatMap(([k, v]) => [[...prefix, k], ...pathsOf(v, [...prefix, k])]);
}
const getAt = (value: any, p: PathKey) => p.reduce((v, k) => v?.[k], value);

interface Mutation {
  kind: 'delete' | 'replace' | 'addKey' | 'wrap';
  pick: number;
  key: string;
  value: unknown;
}
const mutation: fc.Arbitrary<Mutation> = fc.record({
  kind: fc.constantFrom('delete', 'replace', 'replace', 'addKey', 'wrap'),
  pick: fc.nat(),
  key: extraKey,
  value: weirdValue,
});

/** A valid body with one thing wrong: a field gone, of the wrong type, wrapped, or an extra key. */
function mutate(base: unknown, m: Mutation): unknown {
  const clone = structuredClone(base);
  const all = pathsOf(clone);
  if (m.kind === 'addKey') {
    const objects = [[], ...all].filter((p) => {
      const v = getAt(clone, p);
      return v !== null && typeof v === 'object' && !Array.isArray(v);
    });
    if (objects.length === 0) return m.value;
    defineOwn(getAt(clone, objects[m.pick % objects.length]), m.key, m.value);
    return clone;
  }
  if (all.length === 0) return m.value;
  const p = all[m.pick % all.length];
  const parent = getAt(clone, p.slice(0, -1));
  const last = p[p.length - 1];
  if (m.kind === 'delete') {
    if (Array.isArray(parent)) parent.splice(last as number, 1);
    else delete parent[last];
  } else {
    defineOwn(parent, last, m.kind === 'wrap' ? [parent[last]] : m.value);
  }
  return clone;
}

/** Percent-encodes a path segment; a lone surrogate becomes its (invalid) 3-byte UTF-8 form. */
function encodeSegment(s: string): string {
  let out = '';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (cp >= 0xd800 && cp <= 0xdfff) {
      out += [0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f)].map((b) => `%${b.toString(16).toUpperCase()}`).join('');
    } else out += encodeURIComponent(ch);
  }
  return out;
}

const oddSegment: fc.Arbitrary<string> = fc.oneof(
  fc.uuid(),
  fc.constantFrom(
    '',
    '..',
    '.',
    '%2e%2e',
    '..%2f..%2f..%2fdb.json',
    '%2e%2e%2f%2e%2e%2fmaster.key',
    '..%5c..%5cdb.json',
    '%2F',
    '%00',
    '%',
    '%zz',
    '%E0%A4%A',
    '%C0%AE%C0%AE%C0%AF',
    '%252e%252e%252f',
    '%ED%A0%80',
    '%F4%90%80%80',
    '%FF%FE',
    'admin%00',
    '__proto__',
    'constructor',
    'prototype',
    'hasOwnProperty',
    'null',
    'undefined',
    '0',
    '-1',
    '1e999',
    'review',
    '%20',
    '~',
    'x;y=z',
    'x,y',
    "x'y",
    '*',
    '../..',
    '..%2f',
  ),
  utf16String().filter((s) => s.length > 0).map(encodeSegment),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }).map(encodeSegment),
  fc.integer({ min: 101, max: 6000 }).map((n) => 'a'.repeat(n)),
  fc.tuple(fc.uuid(), fc.constantFrom('%00', '%0a', '/..', '%2f..', 'x', '%20', '.json')).map(([u, s]) => u + s),
);

const oddQueryValue = fc.oneof(
  fc.constantFrom('', '%', '%zz', '%E0%A4%A', 'a%00b', '__proto__', 'draft', 'approved', 'demo-app', 'x&app_client_id=y', 'a'.repeat(5000)),
  utf16String().map(encodeSegment),
);
const oddQuery = fc.oneof(
  fc.constant(''),
  oddQueryValue.map((v) => `?app_client_id=${v}`),
  oddQueryValue.map((v) => `?status=${v}`),
  fc.constantFrom(
    '?',
    '?app_client_id=a&app_client_id=b',
    '?app_client_id[]=demo-app',
    '?app_client_id[__proto__]=x',
    '?__proto__[polluted]=1&app_client_id=demo-app',
    '?constructor[prototype][polluted]=1',
    '?status=draft&status=approved',
    '?status[]=draft',
    '?&&&==&',
    '?%zz=%zz',
    '?next=//evil.example',
  ),
  fc.tuple(oddQueryValue, oddQueryValue).map(([k, v]) => `?${k}=${v}`),
);

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'application/json; charset=latin1',
  'application/json; charset=bogus',
  'application/json;charset=UTF-16LE',
  'APPLICATION/JSON',
  'application/json, text/plain',
  'text/plain',
  'text/html',
  'application/x-www-form-urlencoded',
  'multipart/form-data',
  'multipart/form-data; boundary=----x',
  'application/xml',
  'application/vnd.api+json',
  'application/merge-patch+json',
  'application/csp-report',
  '*/*',
  ';;;',
  'application/',
];
const contentType = fc.oneof(fc.constantFrom(...CONTENT_TYPES), fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 40 }));

/** Header values node:http will put on the wire: tab, printable ASCII and latin1. */
const headerText = (maxLength = 80) =>
  fc.string({
    unit: fc.oneof(fc.integer({ min: 0x20, max: 0x7e }), fc.integer({ min: 0x80, max: 0xff }), fc.constant(0x09)).map((c) => String.fromCharCode(c)),
    maxLength,
  });

// ---------------------------------------------------------------------------------------------
// The endpoints, from the route definitions themselves.

interface Target {
  method: string;
  template: string;
  operationId: string;
  auth: string;
  body?: { safeParse: (v: unknown) => { success: boolean } };
  params: string[];
}

let targets: Target[] = [];
let adminCookie = '';
let realIds: Record<string, string[]> = {};
let baselineFile = '';
let baselineMemory = '';
const bases: Record<string, unknown> = {};

const isWrite = (t: Target) => t.method !== 'GET';
/** Non-GET routes that take no body: any call that authenticates and names a real record acts. */
const actsWithoutBody = (t: Target) => isWrite(t) && !t.body;

/** A path for the target: odd values always; real ids only where the call cannot act on them. */
function pathArb(t: Target, allowReal: boolean): fc.Arbitrary<string> {
  if (t.params.length === 0) return fc.constant(t.template);
  const value = (name: string) => {
    const real = realIds[name] ?? [];
    return allowReal && real.length > 0 ? fc.oneof(oddSegment, fc.constantFrom(...real)) : oddSegment;
  };
  return fc.tuple(...t.params.map(value)).map((vals) => {
    let i = 0;
    return t.template.replace(/\{[^}]+\}/g, () => vals[i++]);
  });
}

/** JSON bodies that the target's own schema refuses (so none of them can be acknowledged). */
function invalidJsonBody(t: Target): fc.Arbitrary<string> {
  const base = bases[t.operationId] ?? {};
  const value = fc.oneof(
    { arbitrary: fc.jsonValue({ maxDepth: 4 }), weight: 2 },
    { arbitrary: weirdValue, weight: 1 },
    { arbitrary: mutation.map((m) => mutate(base, m)), weight: 5 },
    { arbitrary: fc.tuple(mutation, mutation).map(([a, b]) => mutate(mutate(base, a), b)), weight: 2 },
  );
  return value
    .map((v) => JSON.stringify(v) ?? 'null')
    .filter((text) => {
      if (!t.body) return true;
      return !t.body.safeParse(JSON.parse(text)).success;
    });
}

/** Bodies that are not even JSON objects: deep nesting, broken UTF-8, truncated, encoded wrong. */
function rawBody(t: Target): fc.Arbitrary<{ body: Buffer | string; headers: Record<string, string> }> {
  const baseText = JSON.stringify(bases[t.operationId] ?? { a: 1 });
  const json = (body: Buffer | string) => ({ body, headers: { 'Content-Type': 'application/json' } });
  return fc.oneof(
    fc.constantFrom(1_000, 20_000, 200_000).chain((n) =>
      fc.constantFrom(
        json(`${'['.repeat(n)}${']'.repeat(n)}`),
        json(`${'{"a":'.repeat(n)}1${'}'.repeat(n)}`),
        json('['.repeat(n)),
        json(`{"requested":${'['.repeat(n)}${']'.repeat(n)}}`),
      ),
    ),
    fc.uint8Array({ maxLength: 300 }).map((bytes) => json(Buffer.from(bytes))),
    fc.uint8Array({ minLength: 1, maxLength: 40 }).map((bytes) =>
      json(Buffer.concat([Buffer.from('{"app_client_id":"'), Buffer.from(bytes), Buffer.from('","username":"'), Buffer.from([0xc3, 0x28, 0xff]), Buffer.from('"}')])),
    ),
    fc.integer({ min: 0, max: baseText.length - 1 }).map((k) => json(baseText.slice(0, k))),
    fc.constantFrom(
      json('"a string"'),
      json('1'),
      json('true'),
      json('null'),
      json('[]'),
      json(''),
      json('{'),
      json('{"a":1,}'),
      json("{'a':1}"),
      json('{"a":1}{"b":2}'),
      json('{"__proto__":{"polluted":1}}'),
      json('{"constructor":{"prototype":{"polluted":1}}}'),
      json(`{"__proto__":{"role":"admin"},${baseText.slice(1)}`),
      json(`\ufeff{"a":1}`),
      json('{"a":1e99999}'),
      json('{"a":"\\ud800"}'),
      json('{"a":"\\u0000"}'),
    ),
    fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'compress', 'bogus', 'gzip, gzip').chain((enc) =>
      fc.oneof(
        fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
        fc.constant(gzipSync(Buffer.from('{"not":"valid"}'))),
        fc.constant(gzipSync(Buffer.from(`${'['.repeat(10_000)}`))),
      ).map((body) => ({ body, headers: { 'Content-Type': 'application/json', 'Content-Encoding': enc } })),
    ),
    fc.tuple(contentType, invalidJsonBody(t)).map(([ct, body]) => ({ body, headers: { 'Content-Type': ct } })),
  );
}

// ---------------------------------------------------------------------------------------------

describe('bad input against every endpoint', () => {
  beforeAll(async () => {
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

    const admin = await new Api(d.url).login('admin', d.adminPassword);
    adminCookie = admin.cookieHeader;
    await userApi(d.url, admin, 'alice', 'power_user');
    const instance = await admin.post('/svc/v1/mcps', { name: 'files', url: MCP_URL, headers: [{ name: 'Authorization', value: 'Bearer fixture' }] });
    expect(instance.status).toBe(201);
    const instanceId = instance.body.instance.id as string;
    const app = new Api(d.url);
    const create = async () => {
      const res = await app.post('/svc/v1/apps/request-access', createBody({ requested: { version: '1', mcp_servers: [{ url: MCP_URL }] } }));
      expect(res.status).toBe(201);
      return res.body.id as string;
    };
    const draftId = await create();
    const approvedId = await create();
    const deniedId = await create();
    expect((await admin.put(`/svc/v1/access-requests/${approvedId}/approve`, { approved_role: 'scope_user_user', approved: { version: '1', mcp_servers: [{ url: MCP_URL, instance_ids: [instanceId] }] } })).status).toBe(200);
    expect((await admin.post(`/svc/v1/access-requests/${deniedId}/deny`)).status).toBe(200);
    realIds = { id: [draftId, approvedId, deniedId, instanceId], username: ['alice', 'admin'] };

    Object.assign(bases, {
      login: { username: 'admin', password: 'not-the-password' },
      createAccessRequest: createBody({ flow_type: 'redirect', redirect_url: 'https://app.example/cb', requested: { version: '1', mcp_servers: [{ url: MCP_URL }] } }),
      approveAccessRequest: { approved_role: 'scope_user_user', approved: { version: '1', mcp_servers: [{ url: MCP_URL, instance_ids: [instanceId] }] } },
      createUser: { username: 'mallory', role: 'user', password: 'a-long-password' },
      setUserRole: { role: 'user' },
      setUserPassword: { password: 'another-long-password' },
      createMcpInstance: { name: 'n', url: MCP_URL, headers: [{ name: 'Authorization', value: 'Bearer x' }], allow_tools: ['a'], enabled: true },
      updateMcpInstance: { name: 'n2', enabled: false, headers: [{ name: 'X-Key', value: 'v' }], allow_tools: null },
    });

    targets = (d.app.routes as AnyRouteDef[]).map((r) => ({
      method: r.method.toUpperCase(),
      template: r.path,
      operationId: r.operationId,
      auth: r.auth,
      body: r.body,
      params: [...r.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]),
    }));
    baselineMemory = memorySnapshot();
    baselineFile = await fileSnapshot();
    expect(baselineFile).toBe(baselineMemory);
  });

  afterAll(async () => {
    agent?.destroy();
    await d?.stop();
  });

  it('knows every endpoint the spec and contract name', () => {
    const mounted = targets.map((t) => `${t.method} ${t.template}`);
    for (const expected of [
      'POST /svc/v1/apps/request-access',
      'GET /svc/v1/apps/access-requests/{id}',
      'GET /svc/v1/access-requests',
      'GET /svc/v1/access-requests/{id}/review',
      'PUT /svc/v1/access-requests/{id}/approve',
      'POST /svc/v1/access-requests/{id}/deny',
      'POST /svc/v1/access-requests/{id}/revoke',
      'POST /svc/v1/auth/login',
      'POST /svc/v1/auth/logout',
      'GET /svc/v1/auth/me',
      'GET /svc/v1/users',
      'POST /svc/v1/users',
      'PUT /svc/v1/users/{username}/role',
      'PUT /svc/v1/users/{username}/password',
      'DELETE /svc/v1/users/{username}',
      'GET /svc/v1/mcps',
      'POST /svc/v1/mcps',
      'GET /svc/v1/mcps/{id}',
      'PATCH /svc/v1/mcps/{id}',
      'DELETE /svc/v1/mcps/{id}',
    ]) {
      expect(mounted).toContain(expected);
    }
  });

  /** The (endpoint, session) pairs a pass covers; the request budget is shared among them. */
  const cases = (filter: (t: Target) => boolean) =>
    targets
      .filter(filter)
      .flatMap((t) => [false, true].map((admin) => ({ t, admin })))
      // A call that acts without a body (logout, deny, revoke, remove) gets the session only
      // together with an id that names nothing.
      .filter(({ t, admin }) => !(admin && actsWithoutBody(t) && t.params.length === 0));
  const share = (budget: number, n: number, min: number, max: number) => Math.max(min, Math.min(max, Math.floor(budget / n)));

  it('malformed JSON bodies, odd paths and queries, with and without a session', { timeout: 120_000 }, async () => {
    const all = cases(() => true);
    const runs = share(2400, all.length, 8, 45);
    for (const { t, admin } of all) {
      const headers = admin ? { Cookie: adminCookie } : undefined;
      const paths = pathArb(t, !actsWithoutBody(t));
      if (!isWrite(t)) {
        await run(fc.tuple(paths, oddQuery), ([p, q]) => ({ method: t.method, path: p + q, headers, admin }), Math.ceil(runs / 2));
        continue;
      }
      await run(
        fc.tuple(paths, invalidJsonBody(t)),
        ([p, body]) => ({ method: t.method, path: p, body, headers: { ...headers, 'Content-Type': 'application/json' }, admin }),
        runs,
      );
    }
  });

  it('bodies that are not JSON objects at all: deep nesting, broken UTF-8, bad encodings and types', { timeout: 120_000 }, async () => {
    const writes = cases(isWrite);
    const runs = share(600, writes.length, 4, 15);
    for (const { t, admin } of writes) {
      await run(
        fc.tuple(pathArb(t, !actsWithoutBody(t)), rawBody(t)),
        ([p, { body, headers }]) => ({ method: t.method, path: p, body, headers: { ...headers, ...(admin ? { Cookie: adminCookie } : {}) }, admin }),
        runs,
      );
    }
  });

  it('bogus Cookie, Origin, Sec-Fetch-Site, Host and other headers', { timeout: 120_000 }, async () => {
    const port = d.port;
    const allowedHosts = new Set([`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]);
    const [sessValue, sigValue] = adminCookie.split('; ').map((c) => c.slice(c.indexOf('=') + 1));
    const bogusCookie = fc.oneof(
      headerText(),
      headerText(60).map((v) => `svc_session=${v}`),
      fc.tuple(headerText(60), headerText(40)).map(([v, s]) => `svc_session=${v}; svc_session.sig=${s}`),
      fc.base64String({ minLength: 20, maxLength: 44 }).map((s) => `svc_session=${sessValue}; svc_session.sig=${s.replace(/=+$/, '')}`),
      fc.constant(`svc_session=${sessValue}`),
      fc.constant(`svc_session=${sigValue}; svc_session.sig=${sessValue}`),
      fc.constant(`svc_session.sig=${sigValue}`),
      fc.constant(`svc_session=${sessValue}x; svc_session.sig=${sigValue}`),
      fc.integer({ min: 2, max: 80 }).map((n) => Array.from({ length: n }, (_, i) => `c${i}=${'v'.repeat(i)}`).join('; ')),
      fc.constantFrom('=', ';;;', '=;=;', 'svc_session', 'svc_session=', 'svc_session=;svc_session.sig=', '__proto__=1; constructor=2', 'svc_session=%E0%A4%A; svc_session.sig=%'),
    );
    const origin = fc.oneof(
      headerText(),
      fc.webUrl().map((u) => new URL(u).origin),
      fc.constantFrom('null', 'http://evil.example', `http://127.0.0.1:${port}.evil.example`, `http://127.0.0.1:${port + 1}`, `https://127.0.0.1:${port}`, 'file://', `http://localhost:${port}@evil.example`),
    );
    const host = fc.oneof(headerText(40), fc.constantFrom('evil.example', `127.0.0.1:${port + 1}`, '127.0.0.1', `127.0.0.1:${port}.evil.example`, 'localhost', `LOCALHOST:${port}`, `[::1]:${port}`));
    const headerSet = fc.record(
      {
        Cookie: bogusCookie,
        Origin: origin,
        'Sec-Fetch-Site': fc.oneof(fc.constantFrom('cross-site', 'same-site', 'same-origin', 'none', ''), headerText(20)),
        'Content-Type': contentType,
        Host: host,
        Authorization: fc.oneof(headerText(), headerText(60).map((t) => `Bearer ${t}`), fc.constantFrom('Bearer', 'Basic YWRtaW46YWRtaW4=', 'Bearer a.b.c')),
        Accept: headerText(30),
        'X-Forwarded-For': headerText(30),
        'X-Forwarded-Host': headerText(30),
        'Mcp-Session-Id': headerText(30),
      },
      { requiredKeys: [] },
    );
    const arb = fc
      .constantFrom(...targets)
      .chain((t) => fc.tuple(fc.constant(t), pathArb(t, !actsWithoutBody(t)), isWrite(t) ? invalidJsonBody(t) : fc.constant(undefined), headerSet));
    await fc.assert(
      fc.asyncProperty(arb, async ([t, p, body, headers]) => {
        const h = Object.fromEntries(Object.entries(headers).filter(([, v]) => v !== undefined)) as Record<string, string>;
        const res = await probe({ method: t.method, path: p, body, headers: h });
        // (node:http replaces an empty Host with its own; header whitespace is not part of a value)
        if (h.Host !== undefined && h.Host.trim() !== '' && !allowedHosts.has(h.Host.trim().toLowerCase())) {
          expect(res.status, `unknown Host ${JSON.stringify(h.Host)}`).toBe(400);
          // Anthropic's error shape (the Messages paths) has no code: its message says it
          if (/^\/v1\/messages/.test(p)) expect(res.json.error.type).toBe('invalid_request_error');
          else expect(res.json.error.code).toBe('invalid_host');
        }
      }),
      { numRuns: 700 },
    );

    // A cookie that is not the admin's signed session never authenticates.
    await fc.assert(
      fc.asyncProperty(bogusCookie, async (cookie) => {
        const res = await probe({ method: 'GET', path: '/svc/v1/auth/me', headers: { Cookie: cookie } });
        expect(res.status, `cookie ${JSON.stringify(cookie)}`).toBe(401);
      }),
      { numRuns: 150 },
    );
  });

  it('a state-changing session call from another origin is refused, even when it is otherwise valid', { timeout: 60_000 }, async () => {
    const port = d.port;
    const allowedOrigins = new Set([`http://127.0.0.1:${port}`, `http://localhost:${port}`, `http://[::1]:${port}`, d.baseUrl.toLowerCase()]);
    const [draftId, approvedId, , instanceId] = realIds.id;
    const valid: Req[] = [
      { method: 'PUT', path: `/svc/v1/access-requests/${draftId}/approve`, body: JSON.stringify(bases.approveAccessRequest) },
      { method: 'POST', path: `/svc/v1/access-requests/${draftId}/deny` },
      { method: 'POST', path: `/svc/v1/access-requests/${approvedId}/revoke` },
      { method: 'POST', path: '/svc/v1/users', body: JSON.stringify(bases.createUser) },
      { method: 'PUT', path: '/svc/v1/users/alice/role', body: JSON.stringify(bases.setUserRole) },
      { method: 'PUT', path: '/svc/v1/users/alice/password', body: JSON.stringify(bases.setUserPassword) },
      { method: 'DELETE', path: '/svc/v1/users/alice' },
      { method: 'POST', path: '/svc/v1/mcps', body: JSON.stringify(bases.createMcpInstance) },
      { method: 'PATCH', path: `/svc/v1/mcps/${instanceId}`, body: JSON.stringify(bases.updateMcpInstance) },
      { method: 'DELETE', path: `/svc/v1/mcps/${instanceId}` },
      { method: 'POST', path: '/svc/v1/auth/logout' },
      { method: 'POST', path: '/svc/v1/auth/login', body: JSON.stringify({ username: 'admin', password: d.adminPassword }) },
    ];
    const crossSite = fc
      .record({
        origin: fc.option(fc.oneof(fc.webUrl().map((u) => new URL(u).origin), headerText(40), fc.constantFrom('null', `http://127.0.0.1:${port + 1}`, `https://127.0.0.1:${port}`, `http://127.0.0.1:${port}.evil.example`)), { nil: undefined }),
        site: fc.option(fc.oneof(fc.constantFrom('cross-site', 'same-site'), headerText(20)), { nil: undefined }),
      })
      .filter(({ origin, site }) => {
        // header whitespace is not part of the value, so a blank header is no header
        const o = origin?.replace(/^[\t ]+|[\t ]+$/g, '') ?? '';
        const s = site?.replace(/^[\t ]+|[\t ]+$/g, '') ?? '';
        const badOrigin = o !== '' && !allowedOrigins.has(o.toLowerCase());
        const badSite = s !== '' && s !== 'same-origin' && s !== 'none';
        return badOrigin || badSite;
      });
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...valid), crossSite, async (req, { origin, site }) => {
        const headers: Record<string, string> = { Cookie: adminCookie, 'Content-Type': 'application/json' };
        if (origin !== undefined) headers.Origin = origin;
        if (site !== undefined) headers['Sec-Fetch-Site'] = site;
        const res = await probe({ ...req, headers, admin: true });
        expect(res.status, describeReq(req, res)).toBe(403);
        expect(res.json.error.code).toBe('cross_origin');
        expect(String(res.headers['set-cookie'] ?? '')).not.toContain('svc_session=');
      }),
      { numRuns: 200 },
    );
  });

  it('wrong methods on every path', { timeout: 60_000 }, async () => {
    const byPath = new Map<string, Set<string>>();
    for (const t of targets) byPath.set(t.template, (byPath.get(t.template) ?? new Set()).add(t.method));
    for (const [template, methods] of byPath) {
      const p = template.replace(/\{[^}]+\}/g, 'no-such-thing');
      for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'PROPFIND', 'PURGE']) {
        if (methods.has(method)) continue;
        for (const admin of [false, true]) {
          const res = await probe({ method, path: p, body: method === 'GET' || method === 'TRACE' ? undefined : '{}', headers: { 'Content-Type': 'application/json', ...(admin ? { Cookie: adminCookie } : {}) }, admin });
          if (method !== 'OPTIONS') expect(res.status, `${method} ${p}`).toBeGreaterThanOrEqual(400);
        }
      }
    }
  });

  it('the browser login form: odd fields, nesting, stale tokens, wrong content types', { timeout: 60_000 }, async () => {
    const page = await send({ method: 'GET', path: '/ui/login' });
    expect(page.status).toBe(200);
    const token = /name="_csrf" value="([^"]+)"/.exec(page.text)?.[1];
    expect(token).toBeTruthy();
    const csrfCookie = ([] as string[])
      .concat(page.headers['set-cookie'] ?? [])
      .map((c) => c.split(';')[0])
      .join('; ');
    expect(csrfCookie).toContain('svc_login_csrf=');

    const key = fc.oneof(
      fc.constantFrom('username', 'password', 'next', '_csrf', 'username[]', 'password[a]', 'next[]', '_csrf[]', '__proto__[admin]', 'constructor[prototype][polluted]', 'a[b][c][d][e][f][g][h]', 'username[__proto__]', ''),
      utf16String(12).map(encodeSegment),
    );
    const value = fc.oneof(
      utf16String().map(encodeSegment),
      fc.constantFrom('admin', '//evil.example', '/\\evil.example', 'https://evil.example/', '/ui', '%', '%zz', '%E0%A4%A', `${token}x`),
      fc.integer({ min: 1_000, max: 70_000 }).map((n) => 'a'.repeat(n)),
    );
    const form = fc.array(fc.tuple(key, value), { maxLength: 8 }).map((pairs) => pairs.map(([k, v]) => `${k}=${v}`).join('&'));
    const arb = fc.record({
      form,
      withToken: fc.boolean(),
      withCookie: fc.boolean(),
      contentType: fc.oneof(fc.constant('application/x-www-form-urlencoded'), contentType),
      admin: fc.boolean(),
    });
    await fc.assert(
      fc.asyncProperty(arb, async ({ form: body, withToken, withCookie, contentType: ct, admin }) => {
        const cookies = [withCookie ? csrfCookie : '', admin ? adminCookie : ''].filter(Boolean).join('; ');
        const req: Req = {
          method: 'POST',
          path: '/ui/login',
          body: withToken ? `_csrf=${encodeURIComponent(token!)}&${body}` : body,
          headers: { 'Content-Type': ct, ...(cookies ? { Cookie: cookies } : {}) },
          admin,
        };
        const res = await probe(req);
        expect(res.status, describeReq(req, res)).not.toBe(303);
        expect(String(res.headers['set-cookie'] ?? ''), describeReq(req, res)).not.toContain('svc_session=');
      }),
      { numRuns: 200 },
    );

    // GET /ui/login?next=... never redirects off the origin.
    const next = fc.oneof(
      utf16String().map(encodeSegment),
      fc.constantFrom('//evil.example', '/\\evil.example', '/%5Cevil.example', '%2F%2Fevil.example', 'https://evil.example/', '/ui', '/ui/../../x', '%', '%zz', '%E0%A4%A', 'javascript:alert(1)', '/%09/evil.example'),
      fc.integer({ min: 1_000, max: 8_000 }).map((n) => `/${'a'.repeat(n)}`),
    );
    await fc.assert(
      fc.asyncProperty(next, fc.boolean(), async (next, admin) => {
        const res = await probe({ method: 'GET', path: `/ui/login?next=${next}`, headers: admin ? { Cookie: adminCookie } : undefined, admin });
        expect([200, 302, 303, 400]).toContain(res.status);
        const location = res.headers.location;
        if (location !== undefined) {
          expect(location.startsWith('/') && !location.startsWith('//') && !location.startsWith('/\\'), `Location ${location}`).toBe(true);
        }
      }),
      { numRuns: 100 },
    );
  });

  // The summary of every other test here, so it waits for them: it runs last however the rest are shuffled.
  afterAll(async () => {
    const health = await fetch(`${d.url}/svc/v1/health`);
    expect(health.status).toBe(200);
    // The authenticated passes really were authenticated: the admin session is still good.
    const me = await send({ method: 'GET', path: '/svc/v1/auth/me', headers: { Cookie: adminCookie } });
    expect(me.status).toBe(200);
    expect(stats.acknowledgedWrites).toEqual([]);
    expect(memorySnapshot()).toBe(baselineMemory);
    expect(await fileSnapshot()).toBe(baselineFile);
    // Nothing was ever logged as a failed request, and no prototype was polluted in this process.
    expect(d.logs.filter((l) => l.includes('"request failed"'))).toEqual([]);
    expect(Object.keys(Object.prototype)).toEqual([]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    console.info(`bad-input: ${stats.requests} requests; by status ${JSON.stringify(Object.fromEntries(stats.byStatus))}`);
    expect(stats.requests).toBeGreaterThan(2000);
    expect(stats.requests).toBeLessThan(8000);
    // A few rejections of each kind actually happened (the generators reach the validators).
    for (const status of [400, 401, 403, 404, 413]) expect(stats.byStatus.get(status) ?? 0, `status ${status}`).toBeGreaterThan(0);
  });
});
