import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { approvedScope, authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { startUpstream } from './helpers/upstream.js';
import { eventually } from './helpers/wait.js';

const PROVIDER_KEY = `sk-provider-${Math.random().toString(36).slice(2)}`;

describe('OpenAI-compatible proxy, driven by the official openai client', () => {
  let d: TestDaemon;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let admin: Api;
  let alice: Api;
  let token: string;
  let powerToken: string;
  let openai: OpenAI;
  let clientId: string;
  let config: Awaited<ReturnType<typeof oidcConfig>>;

  beforeAll(async () => {
    upstream = await startUpstream({ apiKey: PROVIDER_KEY, chunkDelayMs: 150, chunks: 4 });
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    alice = await userApi(d.url, admin, 'alice', 'power_user');
    const added = await alice.post('/svc/v1/providers', { name: 'local', base_url: upstream.url, api_key: PROVIDER_KEY, timeout_ms: 1000 });
    expect(added.status).toBe(201);
    expect(added.body.provider).toMatchObject({ has_api_key: true, discovery_error: null });
    expect(added.body.provider.discovered_models).toContain('fake-model');
    expect(JSON.stringify(added.body)).not.toContain(PROVIDER_KEY);

    const registered = await registerClient(admin);
    clientId = registered.clientId;
    config = await oidcConfig(d, clientId, registered.secret);
    const user = await approvedScope(d, alice, clientId, 'scope_user_user');
    token = (await authorize(config, alice, user.scope)).tokens!.access_token;
    const power = await approvedScope(d, alice, clientId, 'scope_user_power_user');
    powerToken = (await authorize(config, alice, power.scope)).tokens!.access_token;
    openai = new OpenAI({ baseURL: `${d.url}/v1`, apiKey: token, maxRetries: 0, timeout: 10_000 });
  });
  afterAll(async () => {
    await d.stop();
    await upstream.close();
  });

  it('lists models', async () => {
    const page = await openai.models.list();
    const ids = page.data.map((m) => m.id);
    expect(ids).toContain('fake-model');
    expect(ids).toContain('embed-model');
  });

  it('completes a chat, sending the provider key upstream and never the app token', async () => {
    const before = upstream.seen.length;
    const res = await openai.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'hi' }] });
    expect(res.choices[0].message.content).toBe('echo: hi');
    const call = upstream.seen.slice(before).find((s) => s.path === '/v1/chat/completions')!;
    expect(call.headers.authorization).toBe(`Bearer ${PROVIDER_KEY}`);
    expect(JSON.stringify(call.headers)).not.toContain(token);
    expect(call.headers.cookie).toBeUndefined();
  });

  it('passes fields it does not know through untouched', async () => {
    const res = (await openai.chat.completions.create({
      model: 'fake-model',
      messages: [{ role: 'user', content: 'x' }],
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }],
      response_format: { type: 'json_object' },
      // @ts-expect-error a provider-specific field
      top_k: 5,
    })) as unknown as { echo_fields: string[] };
    expect(res.echo_fields).toEqual(expect.arrayContaining(['tools', 'response_format', 'top_k', 'messages', 'model']));
  });

  it('streams chunk by chunk: the first arrives before the upstream sends the last', async () => {
    const stream = await openai.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'hi' }], stream: true });
    const arrivals: number[] = [];
    let text = '';
    for await (const chunk of stream) {
      arrivals.push(Date.now());
      text += chunk.choices[0]?.delta?.content ?? '';
    }
    expect(text).toBe('part0 part1 part2 part3 ');
    expect(arrivals[0]).toBeLessThan(upstream.sentLast.at);
  });

  it('embeds', async () => {
    const res = await openai.embeddings.create({ model: 'embed-model', input: 'hello' });
    expect(res.data[0].embedding.map((x) => Math.round(x * 100) / 100)).toEqual([0.1, 0.2, 0.3]);
  });

  it('answers an unknown model with 404 in the OpenAI error shape', async () => {
    const err = await openai.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err.error).toMatchObject({ type: 'invalid_request_error', code: 'model_not_found', param: 'model' });
  });

  it('refuses a malformed body with 400 and an oversize one with 413', async () => {
    // @ts-expect-error messages missing on purpose
    const err = await openai.chat.completions.create({ model: 'fake-model' }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.error.code).toBe('invalid_body');
    const raw = await fetch(`${d.url}/v1/chat/completions`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, body: '{"model": ' });
    expect(raw.status).toBe(400);
    const big = await fetch(`${d.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'fake-model', messages: [{ role: 'user', content: 'x'.repeat(9 * 1024 * 1024) }] }),
    });
    expect(big.status).toBe(413);
    expect((await big.json()).error.code).toBe('payload_too_large');
  });

  it('relays an upstream 400 without the provider key, and turns a 500 into 502', async () => {
    const bad = await openai.chat.completions.create({ model: 'fail400', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
    expect(bad.status).toBe(400);
    expect(bad.message).toContain('context too long');
    expect(bad.message).not.toContain(PROVIDER_KEY);
    const down = await openai.chat.completions.create({ model: 'fail500', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
    expect(down.status).toBe(502);
    expect(down.error).toMatchObject({ type: 'upstream_error', code: 'upstream_unavailable' });
  });

  it("turns the upstream refusing svc's provider key into 502, not the app's 401", async () => {
    await alice.post('/svc/v1/providers', { name: 'badkey', base_url: upstream.url, api_key: 'sk-wrong', models: ['badkey-model'] });
    await alice.put('/svc/v1/models/badkey-alias', { provider: 'badkey', model: 'fake-model' });
    const err = await openai.chat.completions.create({ model: 'badkey-alias', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
    expect(err.status).toBe(502);
    expect(err.error).toMatchObject({ type: 'upstream_error', code: 'upstream_rejected' });
    expect(JSON.stringify(err.error)).not.toContain('sk-wrong');
  });

  it('answers 504 when the upstream stalls', async () => {
    const err = await openai.chat.completions.create({ model: 'stall', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
    expect(err.status).toBe(504);
    expect(err.error).toMatchObject({ type: 'upstream_error', code: 'upstream_timeout' });
  });

  it('answers 502 when the upstream is down', async () => {
    const gone = await startUpstream();
    const goneUrl = gone.url;
    await gone.close();
    await alice.post('/svc/v1/providers', { name: 'gone', base_url: goneUrl, models: ['ghost'] });
    const err = await openai.chat.completions.create({ model: 'ghost', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
    expect(err.status).toBe(502);
    expect(err.error.code).toBe('upstream_unavailable');
    expect(JSON.stringify(err.error)).not.toContain(goneUrl);
  });

  it('reports a stream the upstream breaks mid-way as an error to the client', async () => {
    const stream = await openai.chat.completions.create({ model: 'break', messages: [{ role: 'user', content: 'x' }], stream: true });
    const got: string[] = [];
    const err = await (async () => {
      for await (const chunk of stream) got.push(chunk.choices[0]?.delta?.content ?? '');
    })().catch((e) => e);
    expect(got.length).toBeGreaterThan(0);
    expect(err).toBeInstanceOf(Error);
  });

  it('aborts the upstream call when the client disconnects mid-stream', async () => {
    const before = upstream.aborted.length;
    const controller = new AbortController();
    const stream = await openai.chat.completions.create(
      { model: 'fake-model', messages: [{ role: 'user', content: 'x' }], stream: true },
      { signal: controller.signal },
    );
    await (async () => {
      for await (const _chunk of stream) {
        controller.abort();
      }
    })().catch(() => undefined);
    await eventually(() => upstream.aborted.length > before, 'the upstream to see its call aborted');
  });

  it('lets power-user tokens manage aliases and refuses user tokens with 403', async () => {
    const asUser = await new Api(d.url).put('/svc/v1/models/friendly', { provider: 'local', model: 'fake-model' }, { Authorization: `Bearer ${token}` });
    expect(asUser.status).toBe(403);
    expect(asUser.body.error).toMatchObject({ type: 'forbidden_error', code: 'insufficient_scope' });
    const asPower = await new Api(d.url).put(
      '/svc/v1/models/friendly',
      { provider: 'local', model: 'fake-model', defaults: { temperature: 0.2 } },
      { Authorization: `Bearer ${powerToken}` },
    );
    expect(asPower.status).toBe(200);
    const before = upstream.seen.length;
    const res = await openai.chat.completions.create({ model: 'friendly', messages: [{ role: 'user', content: 'alias' }] });
    expect(res.choices[0].message.content).toBe('echo: alias');
    const call = upstream.seen.slice(before).find((s) => s.path === '/v1/chat/completions')!;
    expect(call.body).toMatchObject({ model: 'fake-model', temperature: 0.2 });
    expect((await openai.models.list()).data.map((m) => m.id)).toContain('friendly');
    const bySession = await alice.get('/svc/v1/models');
    expect(bySession.body.data.map((a: { id: string }) => a.id)).toContain('friendly');
  });

  it('keeps the provider key out of the data dir, the logs and every response', async () => {
    const files = await readdir(d.dataDir);
    for (const f of files) {
      const content = await readFile(path.join(d.dataDir, f)).catch(() => Buffer.alloc(0));
      expect(content.includes(PROVIDER_KEY), f).toBe(false);
    }
    expect(d.logs.join('').includes(PROVIDER_KEY)).toBe(false);
    const listed = await alice.get('/svc/v1/providers');
    expect(listed.text.includes(PROVIDER_KEY)).toBe(false);
  });

  it('answers a browser app (an Origin) with CORS on whole and streamed answers, never with credentials', async () => {
    for (const stream of [false, true]) {
      const res = await fetch(`${d.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { Origin: 'http://app.example', Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ model: 'fake-model', messages: [{ role: 'user', content: 'hi' }], stream }),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      expect(res.headers.get('access-control-expose-headers')).toMatch(/WWW-Authenticate/);
      expect(res.headers.get('access-control-allow-credentials')).toBeNull();
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      await res.text();
    }
  });

  it('stops the token at once when its grant is revoked', async () => {
    // a grant of its own: the others' tests keep theirs, in whatever order they run
    const own = await approvedScope(d, alice, clientId, 'scope_user_user');
    const ownClient = new OpenAI({ baseURL: `${d.url}/v1`, apiKey: (await authorize(config, alice, own.scope)).tokens!.access_token, maxRetries: 0, timeout: 10_000 });
    expect((await ownClient.models.list()).data.length).toBeGreaterThan(0);
    await alice.post(`/svc/v1/access-requests/${own.id}/revoke`);
    const err = await ownClient.models.list().catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
  });
});
