/**
 * An app with a valid but limited grant trying to get more than the person allowed: tokens a day
 * and calls a minute, against the real daemon and a real OpenAI-format upstream on 127.0.0.1.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { approvedScope, authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { startUpstream } from './helpers/upstream.js';
import { eventually } from './helpers/wait.js';

/**
 * An upstream that answers a Responses API call the way OpenAI orders its fields: `usage`, then
 * `user` and `metadata`, both echoed from the request.
 */
async function startResponsesUpstream() {
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(
      JSON.stringify({
        id: 'resp_1',
        object: 'response',
        created_at: 1,
        status: 'completed',
        model: body.model,
        output: [{ id: 'msg_1', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'hi', annotations: [] }] }],
        usage: { input_tokens: 50, output_tokens: 50, total_tokens: 100 },
        user: body.user ?? null,
        metadata: body.metadata ?? {},
      }),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, close: () => new Promise<void>((r) => server.close(() => r())) };
}

describe('per-grant limits against an app that tries to get around them', () => {
  let d: TestDaemon;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let responses: Awaited<ReturnType<typeof startResponsesUpstream>>;
  let alice: Api;
  let clientId: string;
  let config: Awaited<ReturnType<typeof oidcConfig>>;

  /** A fresh grant with `limits` and a token for it. */
  async function grant(limits: Record<string, unknown>) {
    const g = await approvedScope(d, alice, clientId);
    expect((await alice.put(`/svc/v1/access-requests/${g.id}/limits`, limits)).status).toBe(200);
    const token = (await authorize(config, alice, g.scope)).tokens!.access_token;
    const post = (path: string, body: unknown, signal?: AbortSignal) =>
      fetch(`${d.url}${path}`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, body: JSON.stringify(body), signal: signal ?? AbortSignal.timeout(8000) });
    const get = (path: string) => fetch(`${d.url}${path}`, { headers: { Authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(8000) });
    return { id: g.id, post, get };
  }
  const usageOf = async (id: string) => (await alice.get(`/svc/v1/access-requests/${id}/review`)).body.usage;

  beforeAll(async () => {
    upstream = await startUpstream({ chunks: 200, chunkDelayMs: 5 });
    responses = await startResponsesUpstream();
    // a small bound on kept events, so that retention runs within the test
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, activityMaxEvents: 20 } });
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    alice = await userApi(d.url, admin, 'alice', 'power_user');
    expect((await alice.post('/svc/v1/providers', { name: 'local', base_url: upstream.url })).status).toBe(201);
    expect((await alice.post('/svc/v1/providers', { name: 'remote', base_url: responses.url, models: ['gpt-x'] })).status).toBe(201);
    ({ clientId } = await registerClient(admin, { public: true }));
    config = await oidcConfig(d, clientId);
  });
  afterAll(async () => {
    await d?.stop();
    await upstream?.close();
    await responses?.close();
  });

  it('a spent day stays spent when old activity events are dropped by the count bound', async () => {
    const g = await grant({ tokens_per_day: 3 });
    const chat = () => g.post('/v1/chat/completions', { model: 'fake-model', messages: [{ role: 'user', content: 'x' }] });
    expect((await chat()).status).toBe(200); // 2 tokens
    expect((await chat()).status).toBe(200); // 4: over the budget
    expect((await chat()).status).toBe(429);
    // The app floods cheap calls (each refused, each recorded) until its spending is pushed out
    // of the kept events. The log is cut once it holds a tenth and 100 more than the bound, so
    // 140 events after the spending make at least one cut that leaves it behind, whatever the
    // log held before (the other tests here share it, in any order). Until a cut, the usage is
    // counted over every event the file still holds, so the spending's tokens show it is gone.
    for (let i = 0; i < 140; i++) expect((await g.get('/v1/models')).status).toBe(429);
    await eventually(async () => {
      const usage = await usageOf(g.id);
      return usage.tokens_in + usage.tokens_out === 0;
    }, 'retention to drop the spending events');
    const after = await chat();
    expect(after.status).toBe(429);
    expect((await after.json()).error.code).toBe('grant_token_budget_exhausted');
    expect((await usageOf(g.id)).today.tokens).toBeGreaterThanOrEqual(4);
  });

  it('a path spelt in other case is no way round the day: it is refused, never served uncounted', async () => {
    const g = await grant({ tokens_per_day: 3 });
    const body = { model: 'fake-model', messages: [{ role: 'user', content: 'x' }] };
    // the router once matched paths whatever their case, while the activity and the limits knew
    // the endpoint by its exact path: such a call was served, and neither counted nor shown
    for (const path of ['/v1/Chat/Completions', '/v1/CHAT/COMPLETIONS', '/v1/chat/Completions', '/v1/Messages', '/v1/Embeddings']) {
      const res = await g.post(path, body);
      expect(res.status, path).toBe(404);
      expect((await res.json()).error.code, path).toBe('unsupported_endpoint');
    }
    expect((await g.get('/v1/Models')).status).toBe(404);
    // the exact spelling still works, and counts
    expect((await g.post('/v1/chat/completions', body)).status).toBe(200);
    expect((await g.post('/v1/chat/completions/', body)).status).toBe(200);
    await eventually(async () => (await usageOf(g.id)).calls >= 2, 'the calls recorded');
    expect((await g.post('/v1/chat/completions', body)).status).toBe(429);
  });
  it('counts a Responses answer whose echoed user and metadata come after its usage', async () => {
    const g = await grant({ tokens_per_day: 150 });
    const res = await g.post('/v1/responses', { model: 'gpt-x', input: 'hi', user: 'usage', metadata: { usage: 'x' } });
    expect(res.status).toBe(200);
    await eventually(async () => (await usageOf(g.id)).calls >= 1, 'the call recorded');
    expect((await usageOf(g.id)).today.tokens).toBe(100);
    expect((await g.post('/v1/responses', { model: 'gpt-x', input: 'hi', metadata: { usage: 'x' } })).status).toBe(200); // 200: over it
    expect((await g.post('/v1/responses', { model: 'gpt-x', input: 'hi', metadata: { usage: 'x' } })).status).toBe(429);
  });

  // A stream's tokens are reported by the usage its upstream sends last; a stream the app leaves
  // before then counts svc's estimate of them (a token a chunk passed on).
  it('counts the tokens of a stream the app reads most of and then hangs up on, before the usage comes', async () => {
    const g = await grant({ tokens_per_day: 10 });
    for (let round = 0; round < 3; round++) {
      const stop = new AbortController();
      const res = await g.post('/v1/chat/completions', { model: 'fake-model', stream: true, messages: [{ role: 'user', content: 'x' }] }, stop.signal);
      if (res.status === 429) return; // held to the budget: what the test wants
      expect(res.status).toBe(200);
      // read 30 content chunks (30 tokens, three times the budget), then hang up
      const reader = res.body!.getReader();
      let text = '';
      while ((text.match(/"content"/g) ?? []).length < 30) text += new TextDecoder().decode((await reader.read()).value);
      stop.abort();
      await eventually(async () => (await usageOf(g.id)).calls >= round + 1, 'the call recorded');
    }
    throw new Error(`three streams of 30 tokens each went through a budget of 10; the grant's usage: ${JSON.stringify(await usageOf(g.id))}`);
  });

  it('holds calls a minute when many calls arrive at once: exactly the limit goes through', async () => {
    const g = await grant({ requests_per_minute: 5 });
    const statuses = await Promise.all(Array.from({ length: 20 }, () => g.post('/v1/chat/completions', { model: 'fake-model', messages: [{ role: 'user', content: 'x' }] }).then((r) => r.status)));
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(15);
  });
});
