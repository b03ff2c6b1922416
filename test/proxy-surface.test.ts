import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { approvedScope, authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { startUpstream } from './helpers/upstream.js';

const PROVIDER_KEY = `sk-provider-${Math.random().toString(36).slice(2)}`;

/**
 * The rest of the OpenAI surface that clients default to: the Responses API,
 * one model by id and legacy completions, driven by the official `openai` client and by the
 * Vercel AI SDK's default provider model (which speaks the Responses API).
 */
describe('OpenAI surface beyond chat: responses, models/{id}, completions', () => {
  let d: TestDaemon;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let bare: Awaited<ReturnType<typeof startUpstream>>;
  let alice: Api;
  let token: string;
  let openai: OpenAI;

  beforeAll(async () => {
    upstream = await startUpstream({ apiKey: PROVIDER_KEY, chunkDelayMs: 100, chunks: 4 });
    // a provider that has chat only, like many local servers
    bare = await startUpstream({ lacks: ['/v1/responses', '/v1/completions'] });
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    alice = await userApi(d.url, admin, 'alice', 'power_user');
    expect((await alice.post('/svc/v1/providers', { name: 'local', base_url: upstream.url, api_key: PROVIDER_KEY, timeout_ms: 2000 })).status).toBe(201);
    expect((await alice.post('/svc/v1/providers', { name: 'bare', base_url: bare.url, models: ['bare-model'], timeout_ms: 2000 })).status).toBe(201);
    expect((await alice.put('/svc/v1/models/resp-alias', { provider: 'local', model: 'fake-model', defaults: { temperature: 0.3 } })).status).toBe(200);

    const { clientId, secret } = await registerClient(admin);
    const config = await oidcConfig(d, clientId, secret);
    const user = await approvedScope(d, alice, clientId, 'scope_user_user');
    token = (await authorize(config, alice, user.scope)).tokens!.access_token;
    openai = new OpenAI({ baseURL: `${d.url}/v1`, apiKey: token, maxRetries: 0, timeout: 10_000 });
  });
  afterAll(async () => {
    await d?.stop();
    await upstream?.close();
    await bare?.close();
  });

  it('creates a response (not streamed) through an alias, with the provider key upstream and never the token', async () => {
    const before = upstream.seen.length;
    const res = await openai.responses.create({ model: 'resp-alias', input: 'hi' });
    expect(res.output_text).toBe('echo: hi');
    const call = upstream.seen.slice(before).find((s) => s.path === '/v1/responses')!;
    expect(call.headers.authorization).toBe(`Bearer ${PROVIDER_KEY}`);
    expect(JSON.stringify(call.headers)).not.toContain(token);
    expect(call.body).toMatchObject({ model: 'fake-model', input: 'hi', temperature: 0.3 });
  });

  it('streams a response as typed events, the first before the upstream sends the last', async () => {
    const stream = await openai.responses.create({ model: 'fake-model', input: 'hi', stream: true });
    const types: string[] = [];
    let text = '';
    let firstAt = 0;
    for await (const event of stream) {
      firstAt ||= Date.now();
      types.push(event.type);
      if (event.type === 'response.output_text.delta') text += event.delta;
    }
    expect(text).toBe('part0 part1 part2 part3 ');
    expect(types[0]).toBe('response.created');
    expect(types.at(-1)).toBe('response.completed');
    expect(firstAt).toBeLessThan(upstream.sentLast.at);
  });

  it('retrieves one model by id, provider-qualified ids too (slash encoded or not), and 404s an unknown one', async () => {
    expect(await openai.models.retrieve('fake-model')).toMatchObject({ id: 'fake-model', object: 'model', owned_by: 'local' });
    expect(await openai.models.retrieve('resp-alias')).toMatchObject({ id: 'resp-alias', object: 'model', owned_by: 'svc:local' });
    expect(await openai.models.retrieve('local/fake-model')).toMatchObject({ id: 'local/fake-model', object: 'model' });
    const raw = await fetch(`${d.url}/v1/models/local/fake-model`, { headers: { Authorization: `Bearer ${token}` } });
    expect(raw.status).toBe(200);
    expect((await raw.json()).id).toBe('local/fake-model');
    const err = await openai.models.retrieve('no-such-model').catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err.error).toMatchObject({ type: 'invalid_request_error', code: 'model_not_found', param: 'model' });
    const noToken = await fetch(`${d.url}/v1/models/fake-model`);
    expect(noToken.status).toBe(401);
  });

  it('creates legacy completions, streamed and not', async () => {
    const res = await openai.completions.create({ model: 'fake-model', prompt: 'hello' });
    expect(res.choices[0].text).toBe('echo: hello');
    const stream = await openai.completions.create({ model: 'local/fake-model', prompt: 'hello', stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
    expect(text).toBe('part0 part1 part2 part3 ');
    // @ts-expect-error prompt missing on purpose
    const bad = await openai.completions.create({ model: 'fake-model' }).catch((e) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect(bad.error.code).toBe('invalid_body');
  });

  it('says which provider lacks an endpoint, in the OpenAI error shape', async () => {
    const err = await openai.responses.create({ model: 'bare-model', input: 'hi' }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err.error).toMatchObject({ type: 'invalid_request_error', code: 'unsupported_endpoint' });
    expect(err.error.message).toContain('bare does not serve /v1/responses');
    const streamed = await openai.responses.create({ model: 'bare-model', input: 'hi', stream: true }).catch((e) => e);
    expect(streamed).toBeInstanceOf(OpenAI.NotFoundError);
    const completion = await openai.completions.create({ model: 'bare-model', prompt: 'x' }).catch((e) => e);
    expect(completion.error.message).toContain('bare does not serve /v1/completions');
    // chat still works on that provider
    expect((await openai.chat.completions.create({ model: 'bare-model', messages: [{ role: 'user', content: 'x' }] })).choices[0].message.content).toBe('echo: x');
  });

  it("serves the Vercel AI SDK's default openai('model'), which is the Responses API", async () => {
    const provider = createOpenAI({ baseURL: `${d.url}/v1`, apiKey: token });
    const before = upstream.seen.length;
    const generated = await generateText({ model: provider('fake-model'), prompt: 'hi', maxRetries: 0 });
    expect(generated.text).toBe('echo: hi');
    expect(upstream.seen.slice(before).map((s) => s.path)).toContain('/v1/responses');

    const streamed = streamText({ model: provider('resp-alias'), prompt: 'hi', maxRetries: 0 });
    let text = '';
    for await (const part of streamed.textStream) text += part;
    expect(text).toBe('part0 part1 part2 part3 ');
  });

  it('documents the new routes in the OpenAPI document', async () => {
    const doc = await (await fetch(`${d.url}/svc/v1/openapi.json`)).json();
    expect(doc.paths['/v1/responses'].post.operationId).toBe('createResponse');
    expect(doc.paths['/v1/completions'].post.operationId).toBe('createCompletion');
    expect(doc.paths['/v1/models/{id}'].get.operationId).toBe('retrieveModel');
  });
});
