import net from 'node:net';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, expectErrorShape, userApi } from './helpers/http.js';
import { approvedScope, authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { startUpstream } from './helpers/upstream.js';
import { LineRelay } from '../src/upstream/scrub.js';

/** A key with a slash, so that PHP-style `\/` escaping changes its bytes. */
const LEAKY_KEY = `sk-live/${Math.random().toString(36).slice(2)}+Zq/${Math.random().toString(36).slice(2)}`;

const escapeSlashes = (s: string) => s.replace(/\//g, '\\/');
const escapeAll = (s: string) => [...s].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
/** every other character as an upper-case `\uXXXX`, the rest raw */
const escapeMixed = (s: string) => [...s].map((c, i) => (i % 2 ? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0').toUpperCase()}` : c)).join('');

/** Fails if the key is in the text in any JSON spelling. */
function expectNoKey(text: string) {
  const decoded = text.replace(/\\u([0-9a-fA-F]{4})/g, (_, h) => String.fromCharCode(parseInt(h, 16))).replace(/\\\//g, '/');
  expect(text.includes(LEAKY_KEY)).toBe(false);
  expect(decoded.includes(LEAKY_KEY)).toBe(false);
  // and no long piece of it either
  expect(decoded.includes(LEAKY_KEY.slice(0, 16))).toBe(false);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A real, misbehaving upstream on 127.0.0.1, written at the socket level so it can do what a
 * well-behaved HTTP server never does: stall after the headers, reset mid-body, end a body that
 * has no framing, split a key across network chunks. What it does is picked by the request's model.
 */
async function startRawUpstream() {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.setNoDelay(true);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let buf = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = buf.subarray(0, end).toString('latin1');
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (buf.length < end + 4 + length) return;
      const body = buf.subarray(end + 4, end + 4 + length).toString('utf8');
      buf = Buffer.alloc(0);
      const key = /\r\nauthorization: *Bearer (.*)/i.exec(head)?.[1]?.trim() ?? '';
      let model = '';
      try {
        model = JSON.parse(body).model;
      } catch {
        /* GET /models and the like */
      }
      void behave(socket, model, key);
    });
  });

  const json = (status: number, text: string, extra = '') =>
    `HTTP/1.1 ${status} X\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\n${extra}\r\n${text}`;
  /** an event stream with no framing: it ends with the connection */
  const sseHead = 'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n';
  const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
  /** an event stream in chunked framing, as HTTP/1.1 servers send them */
  const sseChunked = (text: string) => `HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n${chunk(text)}`;
  const delta = (content: string) => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;

  async function behave(socket: net.Socket, model: string, key: string) {
    switch (model) {
      case 'stall-headers': // headers, then nothing
        return socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n');
      case 'stall-cl': // headers and part of a body with Content-Length, then nothing
        return socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"id":"x","choices":[');
      case 'stall-chunked':
        return socket.write(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${chunk('{"id":"x","choices":[')}`);
      case 'reset-cl':
        socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"id":"x","choices":[');
        await sleep(30);
        return socket.resetAndDestroy();
      case 'reset-chunked':
        socket.write(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${chunk('{"id":"x","choices":[')}`);
        await sleep(30);
        return socket.resetAndDestroy();
      case 'close-unframed': // no Content-Length, no chunking: the body ends with the connection
        socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{"id":"x","choices":[{"index":0,');
        await sleep(30);
        return socket.end();
      case 'fail500':
        return socket.write(json(500, '{"error":{"message":"boom"}}'));
      case 'stream-break':
        socket.write(sseChunked(delta('one ') + delta('two ')));
        await sleep(30);
        return socket.resetAndDestroy();
      case 'stream-half-event': // breaks off in the middle of an event
        socket.write(sseChunked(`${delta('one ')}data: {"id":"c1","choi`));
        await sleep(30);
        return socket.resetAndDestroy();
      case 'stream-stall':
        return socket.write(sseChunked(delta('one ')));
      case 'leak-slash': // PHP's json_encode escapes every slash
        return socket.write(json(400, `{"error":{"message":"Incorrect API key provided: ${escapeSlashes(key)}","type":"invalid_request_error"}}`));
      case 'leak-unicode':
        return socket.write(json(400, `{"error":{"message":"Incorrect API key provided: ${escapeAll(key)}","type":"invalid_request_error"}}`));
      case 'leak-mixed':
        return socket.write(json(422, `{"detail":"bad key ${escapeMixed(escapeSlashes(key))}"}`));
      case 'leak-text': // not JSON at all
        return socket.write(`HTTP/1.1 400 X\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(`bad key ${escapeSlashes(key)}`)}\r\n\r\nbad key ${escapeSlashes(key)}`);
      case 'leak-ok': // a 200 whose content carries the key, escaped
        return socket.write(json(200, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"your key is ${escapeAll(key)}"},"finish_reason":"stop"}]}`));
      case 'leak-stream-split': {
        // an error event inside a 200 stream, the key cut in two network chunks
        const event = `data: {"error":{"message":"Incorrect API key provided: ${key}","type":"invalid_request_error"}}\n\n`;
        const cut = event.indexOf(key) + 10;
        socket.write(sseHead + delta('one ') + event.slice(0, cut));
        await sleep(50);
        socket.write(event.slice(cut));
        return socket.end();
      }
      case 'leak-stream-escaped-split': {
        // the key unicode-escaped, cut in the middle of an escape
        const event = `data: {"error":{"message":"Incorrect API key provided: ${escapeAll(key)}"}}\n\n`;
        const cut = event.indexOf('\\u') + 6 * 7 + 3;
        socket.write(sseHead + event.slice(0, cut));
        await sleep(50);
        socket.write(event.slice(cut));
        return socket.end();
      }
      default:
        return socket.end(json(404, '{"error":{"message":"no such route"}}', 'Connection: close\r\n'));
    }
  }

  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const MODELS = [
  'stall-headers', 'stall-cl', 'stall-chunked', 'reset-cl', 'reset-chunked', 'close-unframed', 'fail500',
  'stream-break', 'stream-half-event', 'stream-stall',
  'leak-slash', 'leak-unicode', 'leak-mixed', 'leak-text', 'leak-ok', 'leak-stream-split', 'leak-stream-escaped-split',
];

const ENDPOINTS: Record<string, (model: string) => Record<string, unknown>> = {
  '/v1/chat/completions': (model) => ({ model, messages: [{ role: 'user', content: 'x' }] }),
  '/v1/embeddings': (model) => ({ model, input: 'x' }),
  '/v1/completions': (model) => ({ model, prompt: 'x' }),
  '/v1/responses': (model) => ({ model, input: 'x' }),
};

describe('OpenAI proxy hardening', () => {
  let d: TestDaemon;
  let raw: Awaited<ReturnType<typeof startRawUpstream>>;
  let fake: Awaited<ReturnType<typeof startUpstream>>;
  let token: string;
  let openai: OpenAI;

  /** One call that can never hang the test: a hang is a failure, not a timeout of the suite. */
  const call = (path: string, body: unknown) =>
    fetch(`${d.url}${path}`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(8000),
    });

  beforeAll(async () => {
    raw = await startRawUpstream();
    fake = await startUpstream();
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    const alice = await userApi(d.url, admin, 'alice', 'power_user');
    const added = await alice.post('/svc/v1/providers', { name: 'broken', base_url: raw.url, api_key: LEAKY_KEY, models: MODELS, timeout_ms: 500 });
    expect(added.status).toBe(201);
    expect((await alice.post('/svc/v1/providers', { name: 'local', base_url: fake.url })).status).toBe(201);
    expect((await alice.put('/svc/v1/models/deep-alias', { provider: 'local', model: 'fake-model' })).status).toBe(200);
    const { clientId, secret } = await registerClient(admin);
    const config = await oidcConfig(d, clientId, secret);
    const user = await approvedScope(d, alice, clientId, 'scope_user_user');
    token = (await authorize(config, alice, user.scope)).tokens!.access_token;
    openai = new OpenAI({ baseURL: `${d.url}/v1`, apiKey: token, maxRetries: 0, timeout: 8000 });
  });
  afterAll(async () => {
    await d?.stop();
    await raw?.close();
    await fake?.close();
  });

  describe('item 10: a non-streamed call never hangs and never gets a truncated 200', () => {
    for (const path of Object.keys(ENDPOINTS)) {
      it(`${path}: headers then a stall is a 504 in the OpenAI shape`, async () => {
        // the three stalls are waited out at once: each is its own call on its own upstream connection
        const answers = await Promise.all(
          ['stall-headers', 'stall-cl', 'stall-chunked'].map(async (model) => {
            const res = await call(path, ENDPOINTS[path](model));
            return { model, status: res.status, body: await res.json() };
          }),
        );
        for (const { model, status, body } of answers) {
          expect(status, model).toBe(504);
          expectErrorShape(body);
          expect(body.error).toMatchObject({ type: 'upstream_error', code: 'upstream_timeout' });
        }
      });
      it(`${path}: a reset mid-body, with or without Content-Length, or an unframed body cut short, is a 502`, async () => {
        for (const model of ['reset-cl', 'reset-chunked', 'close-unframed']) {
          const res = await call(path, ENDPOINTS[path](model));
          expect(res.status, model).toBe(502);
          const body = await res.json();
          expectErrorShape(body);
          expect(body.error, model).toMatchObject({ type: 'upstream_error', code: 'upstream_unavailable' });
        }
      });
    }

    it('a stream the upstream breaks off ends with an error event, then closes (chat and responses)', async () => {
      for (const model of ['stream-break', 'stream-half-event']) {
        const res = await call('/v1/chat/completions', { model, messages: [{ role: 'user', content: 'x' }], stream: true });
        expect(res.status).toBe(200);
        const text = await res.text();
        const events = text.split('\n\n').filter(Boolean);
        expect(events.at(-1), model).toMatch(/^data: \{"error":/);
        const error = JSON.parse(events.at(-1)!.slice(6)).error;
        expect(error).toMatchObject({ type: 'upstream_error', code: 'upstream_unavailable' });
        expect(error.message).toContain('provider broken');
        // no half event was passed on: every event but the error is a whole chunk
        for (const e of events.slice(0, -1)) expect(() => JSON.parse(e.slice(6))).not.toThrow();
      }
      const res = await call('/v1/responses', { model: 'stream-break', input: 'x', stream: true });
      const last = (await res.text()).split('\n\n').filter(Boolean).at(-1)!;
      expect(last).toMatch(/^event: error\ndata: /);
      expect(JSON.parse(last.split('\ndata: ')[1])).toMatchObject({ type: 'error', code: 'upstream_unavailable' });
    });

    it('a stream that stalls mid-way ends with a timeout error event; the openai client throws', async () => {
      const res = await call('/v1/chat/completions', { model: 'stream-stall', messages: [{ role: 'user', content: 'x' }], stream: true });
      const last = (await res.text()).split('\n\n').filter(Boolean).at(-1)!;
      expect(JSON.parse(last.slice(6)).error).toMatchObject({ code: 'upstream_timeout' });
      const stream = await openai.chat.completions.create({ model: 'stream-break', messages: [{ role: 'user', content: 'x' }], stream: true });
      const got: string[] = [];
      const err = await (async () => {
        for await (const c of stream) got.push(c.choices[0]?.delta?.content ?? '');
      })().catch((e) => e);
      expect(got.join('')).toBe('one two ');
      expect(err).toBeInstanceOf(OpenAI.APIError);
      expect(err.message).toContain('broke off');
    });
  });

  describe('item 15: upstream 502/504 say which upstream failed, without secrets', () => {
    it('names the provider, not "Internal error", and never its URL or key', async () => {
      for (const [model, status] of [['stall-cl', 504], ['reset-cl', 502], ['fail500', 502]] as const) {
        const err = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
        expect(err.status, model).toBe(status);
        expect(err.error.message, model).toContain('provider broken');
        expect(err.error.message).not.toContain('Internal error');
        expect(err.error.message).not.toContain(new URL(raw.url).port);
        expectNoKey(JSON.stringify(err.error));
      }
      const gone = await startUpstream();
      const goneUrl = gone.url;
      await gone.close();
      const admin = await new Api(d.url).login('admin', d.adminPassword);
      await admin.post('/svc/v1/providers', { name: 'offline', base_url: goneUrl, models: ['ghost'] });
      const err = await openai.chat.completions.create({ model: 'ghost', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
      expect(err.status).toBe(502);
      expect(err.error.message).toBe('Upstream provider offline could not be reached.');
    });
  });

  describe('item 2: the provider key never reaches the app through relayed upstream answers', () => {
    it('scrubs a key escaped as \\/ , as \\uXXXX and as a mix of both from relayed errors', async () => {
      for (const model of ['leak-slash', 'leak-unicode', 'leak-mixed', 'leak-text']) {
        const res = await call('/v1/chat/completions', { model, messages: [{ role: 'user', content: 'x' }] });
        expect(res.status, model).toBeGreaterThanOrEqual(400);
        const text = await res.text();
        expectNoKey(text);
        expect(JSON.parse(text).error.message, model).toContain('[redacted]');
      }
      const err = await openai.chat.completions.create({ model: 'leak-unicode', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
      expect(err.status).toBe(400);
      expect(err.message).toContain('Incorrect API key provided: [redacted]');
      expectNoKey(err.message);
    });

    it('scrubs it from a 200 answer, keeping the JSON valid', async () => {
      const res = await call('/v1/chat/completions', { model: 'leak-ok', messages: [{ role: 'user', content: 'x' }] });
      expect(res.status).toBe(200);
      const text = await res.text();
      expectNoKey(text);
      expect(JSON.parse(text).choices[0].message.content).toBe('your key is [redacted]');
    });

    it('scrubs it from a stream when it is split across network chunks, raw or escaped', async () => {
      for (const model of ['leak-stream-split', 'leak-stream-escaped-split']) {
        const res = await call('/v1/chat/completions', { model, messages: [{ role: 'user', content: 'x' }], stream: true });
        const text = await res.text();
        expectNoKey(text);
        expect(text, model).toContain('[redacted]');
      }
      const stream = await openai.chat.completions.create({ model: 'leak-stream-split', messages: [{ role: 'user', content: 'x' }], stream: true });
      const err = await (async () => {
        for await (const _ of stream) {
          /* the error event throws */
        }
      })().catch((e) => e);
      expect(err.message).toContain('[redacted]');
      expectNoKey(err.message);
      expectNoKey(d.logs.join(''));
    });
  });

  describe('item 16: embeddings for the official client', () => {
    it('encodes floats as base64 float32 when the app asked for base64 and the upstream ignored it', async () => {
      const before = fake.seen.length;
      const res = await openai.embeddings.create({ model: 'embed-floats', input: ['a', 'b'] });
      expect(fake.seen.slice(before).find((s) => s.path === '/v1/embeddings')!.body.encoding_format).toBe('base64');
      expect(res.data).toHaveLength(2);
      for (const item of res.data) expect(item.embedding.map((x) => Math.round(x * 100) / 100)).toEqual([0.1, 0.2, 0.3]);
      // an app that asks for floats gets them as they came
      const floats = await openai.embeddings.create({ model: 'embed-floats', input: 'a', encoding_format: 'float' });
      expect(floats.data[0].embedding.map((x) => Math.round(x * 100) / 100)).toEqual([0.1, 0.2, 0.3]);
      // the wire format is OpenAI's: little-endian float32
      const wire = await (await call('/v1/embeddings', { model: 'embed-floats', input: 'a', encoding_format: 'base64' })).json();
      expect(wire.data[0].embedding).toBe(Buffer.from(new Float32Array([0.1, 0.2, 0.3]).buffer).toString('base64'));
    });
  });

  describe('item 9: deeply nested content', () => {
    const nested = (depth: number) => `${'['.repeat(depth)}"x"${']'.repeat(depth)}`;
    it('an aliased model with content nested 20,000 levels deep is a 400 invalid_body, not a 500', async () => {
      const body = `{"model":"deep-alias","messages":[{"role":"user","content":${nested(20_000)}}]}`;
      const res = await fetch(`${d.url}/v1/chat/completions`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, body });
      expect(res.status).toBe(400);
      expect((await res.json()).error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_body' });
      for (const model of ['local/fake-model', 'deep-alias']) {
        const ok = await call('/v1/chat/completions', { model, messages: [{ role: 'user', content: JSON.parse(nested(50)) }] });
        expect(ok.status, model).toBe(200);
      }
    });
    it('a model id used as is passes the body through unparsed, however deep', async () => {
      const body = `{"model":"fake-model","messages":[{"role":"user","content":${nested(20_000)}}]}`;
      const res = await fetch(`${d.url}/v1/chat/completions`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, body });
      expect(res.status).toBe(200);
    });
  });

  describe('item 2, the stream scrubber on its own: a key cut at every byte, in every spelling', () => {
    it('never lets any spelling through, whatever the cut', () => {
      for (const spelled of [LEAKY_KEY, escapeSlashes(LEAKY_KEY), escapeAll(LEAKY_KEY), escapeMixed(LEAKY_KEY)]) {
        const stream = Buffer.from(`data: {"a":1}\n\ndata: {"error":{"message":"key ${spelled} refused"}}\n\ndata: [DONE]\n\n`);
        for (let cut = 1; cut < stream.length; cut++) {
          for (const cut2 of [cut, Math.min(stream.length, cut + 7)]) {
            const relay = new LineRelay(LEAKY_KEY, 1024);
            const out = [relay.push(stream.subarray(0, cut)), relay.push(stream.subarray(cut, cut2)), relay.push(stream.subarray(cut2)), relay.end()]
              .map((o) => (o === null ? '' : o.toString()))
              .join('');
            expectNoKey(out);
            expect(out).toContain('key [redacted] refused');
            expect(out.endsWith('data: [DONE]\n\n')).toBe(true);
          }
        }
      }
    });
  });
});
