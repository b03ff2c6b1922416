/**
 * A /v1 body whose keys an upstream reads another way than svc: an upstream that matches keys
 * without regard to case (Go's encoding/json) takes `"Stream": true` as a stream svc never asked
 * usage for, and `"Model"` beside `"model"` as another model than the one svc routed. Against the
 * real daemon and such an upstream on 127.0.0.1, with the openai client and plain fetch.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { startLenientUpstream } from './helpers/lenient-upstream.js';
import { eventually } from './helpers/wait.js';

describe('/v1 bodies with keys that fold onto the ones svc reads', () => {
  let d: TestDaemon;
  let upstream: Awaited<ReturnType<typeof startLenientUpstream>>;
  let admin: Api;

  /** An API key on a grant with `limits`, and its grant's id. */
  async function limitedKey(limits: Record<string, unknown>) {
    const created = (await admin.post('/svc/v1/keys', { name: `k${Math.random()}` })).body;
    expect((await admin.put(`/svc/v1/access-requests/${created.access_request_id}/limits`, limits)).status).toBe(200);
    const post = (body: unknown) =>
      fetch(`${d.url}/v1/chat/completions`, { method: 'POST', headers: { Authorization: `Bearer ${created.key}`, 'Content-Type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(8000) });
    return { key: created.key as string, id: created.access_request_id as string, post };
  }
  const usageOf = async (id: string) => (await admin.get(`/svc/v1/access-requests/${id}/review`)).body.usage;

  beforeAll(async () => {
    upstream = await startLenientUpstream();
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    expect((await admin.post('/svc/v1/providers', { name: 'go', base_url: upstream.url, models: ['fake-model', 'no-usage', 'other'] })).status).toBe(201);
  });
  afterAll(async () => {
    await d?.stop();
    await upstream?.close();
  });

  it('refuses a body with Stream, STREAM, ſtream, Model, max_Tokens or Stream_Options (400 invalid_body naming the key), and none goes upstream', async () => {
    const g = await limitedKey({ tokens_per_day: 1500 });
    const messages = [{ role: 'user', content: 'hi' }];
    const bodies: [string, Record<string, unknown>][] = [
      ['Stream', { model: 'fake-model', messages, Stream: true }],
      ['STREAM', { model: 'fake-model', messages, STREAM: true }],
      ['ſtream', { model: 'fake-model', messages, ſtream: true }],
      ['Model', { model: 'fake-model', Model: 'other', messages }],
      ['max_Tokens', { model: 'fake-model', messages, max_Tokens: 100000 }],
      ['Stream_Options', { model: 'fake-model', messages, stream: true, Stream_Options: { include_usage: false } }],
      ['Include_Usage', { model: 'fake-model', messages, stream: true, stream_options: { include_usage: true, Include_Usage: false } }],
      ['Messages', { model: 'fake-model', messages, Messages: [{ role: 'user', content: 'other' }] }],
    ];
    const before = upstream.seen.length;
    for (const [key, body] of bodies) {
      const res = await g.post(body);
      expect(res.status, key).toBe(400);
      const error = (await res.json()).error;
      expect(error.code, key).toBe('invalid_body');
      expect(error.message, key).toContain(JSON.stringify(key));
    }
    // the openai client passes unknown parameters through as they are: refused the same
    const openai = new OpenAI({ baseURL: `${d.url}/v1`, apiKey: g.key, maxRetries: 0, timeout: 8000 });
    const failure = await openai.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'hi' }], Stream: true } as never).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(OpenAI.BadRequestError);
    expect((failure as InstanceType<typeof OpenAI.BadRequestError>).code).toBe('invalid_body');
    expect(upstream.seen.length).toBe(before);
    // the exact spellings still pass
    const ok = await openai.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 });
    expect(ok.choices[0].message.content).toBeTruthy();
  });

  it('refuses a body that gives a key twice (top level, or in stream_options; also spelled with escapes), and passes repeats deeper in', async () => {
    const g = await limitedKey({ tokens_per_day: 1500 });
    const send = (raw: string) =>
      fetch(`${d.url}/v1/chat/completions`, { method: 'POST', headers: { Authorization: `Bearer ${g.key}`, 'Content-Type': 'application/json' }, body: raw, signal: AbortSignal.timeout(8000) });
    const msgs = '"messages":[{"role":"user","content":"hi"}]';
    const bodies: [string, string][] = [
      ['max_tokens', `{"model":"fake-model",${msgs},"max_tokens":1000000,"max_tokens":5}`],
      ['model', `{"model":"other","model":"fake-model",${msgs}}`],
      ['model', `{"model":"other", ${msgs}, "m\u006fdel" : "fake-model"}`],
      ['stream', `{"model":"fake-model",${msgs},"stream":true,"stream":false}`],
      ['include_usage', `{"model":"fake-model",${msgs},"stream":true,"stream_options":{"include_usage":false,"include_usage":true}}`],
    ];
    const before = upstream.seen.length;
    for (const [key, raw] of bodies) {
      const res = await send(raw);
      expect(res.status, raw).toBe(400);
      const error = (await res.json()).error;
      expect(error.code, raw).toBe('invalid_body');
      expect(error.message, raw).toContain(`${JSON.stringify(key)} twice`);
    }
    expect(upstream.seen.length).toBe(before);
    // the same key in two messages, or a string that reads like a repeat, is no repeat of svc's keys
    const deeper = JSON.stringify({
      model: 'fake-model',
      messages: [{ role: 'user', content: '\\"model":1,"max_tokens":2' }, { role: 'user', content: 'again', name: 'a' }],
      max_tokens: 5,
    });
    expect(JSON.parse(deeper).max_tokens).toBe(5);
    expect((await send(deeper)).status).toBe(200);
  });

  it('counts an estimate for a whole answer that reports no usage, against the tokens a day', async () => {
    const g = await limitedKey({ tokens_per_day: 100 });
    const chat = () => g.post({ model: 'no-usage', messages: [{ role: 'user', content: 'hi' }] });
    expect((await chat()).status).toBe(200);
    await eventually(async () => (await usageOf(g.id)).calls >= 1, 'the call recorded');
    // the answer's 400 characters of content are about 100 tokens: the budget is spent
    expect((await usageOf(g.id)).today.tokens).toBeGreaterThanOrEqual(100);
    const events = (await admin.get(`/svc/v1/activity?grant=${g.id}`)).body;
    expect(JSON.stringify(events)).toContain('"tokens_estimated":true');
    const refused = await chat();
    expect(refused.status).toBe(429);
    expect((await refused.json()).error.code).toBe('grant_token_budget_exhausted');
  });
});
