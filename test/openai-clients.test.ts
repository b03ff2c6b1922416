import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { startUpstream } from './helpers/upstream.js';

/**
 * What the official `openai` client expects of any OpenAI-compatible server, beyond the calls
 * themselves: a request id on every answer, OpenAI's own error for an unknown model, an error that
 * names an endpoint svc does not proxy, and each model's `created` as its provider gave it.
 */
describe('the openai client against svc, the details it reads', () => {
  let d: TestDaemon;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let openai: OpenAI;
  let key: string;

  beforeAll(async () => {
    upstream = await startUpstream();
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    expect((await admin.post('/svc/v1/providers', { name: 'local', base_url: upstream.url, models: ['listed-only'] })).status).toBe(201);
    key = (await admin.post('/svc/v1/keys', { name: 'openai-client' })).body.key as string;
    openai = new OpenAI({ baseURL: `${d.url}/v1`, apiKey: key, maxRetries: 0, timeout: 10_000 });
  });
  afterAll(async () => {
    await d?.stop();
    await upstream?.close();
  });

  it('every /v1 answer carries x-request-id, which the client reads into request_id (answers, streams and errors)', async () => {
    const { data, response, request_id } = await openai.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect(data.choices[0].message.content).toBe('echo: hi');
    expect(request_id).toBeTruthy();
    expect(response.headers.get('x-request-id')).toBe(request_id);
    const completion = await openai.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'again' }] });
    expect(completion._request_id).toBeTruthy();
    expect(completion._request_id).not.toBe(request_id);
    const stream = await openai.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'hi' }], stream: true }).withResponse();
    expect(stream.request_id).toBeTruthy();
    for await (const chunk of stream.data) void chunk;
    const models = await openai.models.list().withResponse();
    expect(models.request_id).toBeTruthy();
    const err = await openai.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect((err as InstanceType<typeof OpenAI.APIError>).requestID).toBeTruthy();
  });

  it('an unknown model is OpenAI\'s own error: 404, invalid_request_error, model_not_found, param model', async () => {
    for (const call of [
      () => openai.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }),
      () => openai.embeddings.create({ model: 'no-such-model', input: 'x' }),
      () => openai.models.retrieve('no-such-model'),
    ]) {
      const err = await call().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.NotFoundError);
      expect((err as InstanceType<typeof OpenAI.NotFoundError>).error).toMatchObject({ type: 'invalid_request_error', code: 'model_not_found', param: 'model' });
    }
  });

  it('an endpoint svc does not proxy is an OpenAI-shaped 404 that names it', async () => {
    const cases: [string, () => Promise<unknown>, RegExp][] = [
      ['moderations', () => openai.moderations.create({ input: 'x' }), /POST \/v1\/moderations/],
      ['images', () => openai.images.generate({ prompt: 'x' }), /POST \/v1\/images\/generations/],
      ['audio', () => openai.audio.speech.create({ model: 'fake-model', input: 'x', voice: 'alloy' }), /POST \/v1\/audio\/speech/],
      ['a stored response', () => openai.responses.retrieve('resp_123'), /GET \/v1\/responses\/resp_123/],
      ['deleting one', () => openai.responses.delete('resp_123'), /DELETE \/v1\/responses\/resp_123/],
    ];
    for (const [what, call, names] of cases) {
      const err = await call().catch((e: unknown) => e);
      expect(err, what).toBeInstanceOf(OpenAI.NotFoundError);
      const body = (err as InstanceType<typeof OpenAI.NotFoundError>).error as { message: string; type: string; code: string };
      expect(body, what).toMatchObject({ type: 'invalid_request_error', code: 'unsupported_endpoint' });
      expect(body.message, what).toMatch(names);
      expect(body.message, what).toContain('/v1/chat/completions');
    }
    // a path svc does serve, asked with another method, is still the router's 405
    const wrongMethod = await fetch(`${d.url}/v1/chat/completions`, { headers: { Authorization: `Bearer ${key}` } });
    expect(wrongMethod.status).toBe(405);
  });

  it('/v1/models gives each model the `created` its provider gave, else when the provider was added', async () => {
    const models = await openai.models.list();
    const byId = new Map(models.data.map((m) => [m.id, m]));
    expect(byId.get('fake-model')?.created).toBe(1); // what the upstream's GET /models says
    expect(await openai.models.retrieve('local/fake-model')).toMatchObject({ created: 1 });
    const listedOnly = byId.get('listed-only')!.created;
    expect(Math.abs(listedOnly - Date.now() / 1000)).toBeLessThan(600);
  });
});
