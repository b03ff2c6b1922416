/**
 * Anthropic's Messages API on svc, driven by the official @anthropic-ai/sdk client against the real
 * daemon: translated onto the suite's OpenAI-format upstream (scripted answers: tool calls, streamed
 * argument pieces, usage), and passed through to a small Messages API server. The grant's limits,
 * activity and revocation hold as on chat, and every error is in Anthropic's shape.
 */
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { startMessagesUpstream } from './helpers/messages-upstream.js';
import { type ChatScript, chatChunk, startUpstream, toolChunk } from './helpers/upstream.js';
import { eventually } from './helpers/wait.js';

const PROVIDER_KEY = 'sk-provider-secret-0123456789';
const MESSAGES_KEY = 'sk-ant-upstream-secret-9876543210';

const whole = (message: Record<string, unknown>, finish: string, usage = { prompt_tokens: 21, completion_tokens: 8, total_tokens: 29 }, extra: Record<string, unknown> = {}) => ({
  id: 'chatcmpl-w',
  object: 'chat.completion',
  created: 1,
  model: 'scripted',
  choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: finish, ...extra }],
  usage,
});

/** What the 'gated' stream waits for after its first chunk: the test opens it once that chunk's event is in. */
let openGate!: () => void;
const gate = new Promise<void>((resolve) => (openGate = resolve));

const SCRIPTS: Record<string, ChatScript> = {
  'gated': { chunks: [chatChunk({ role: 'assistant', content: 'first' }), () => gate, chatChunk({ content: ' second' }), chatChunk({}, 'stop')], usage: { prompt_tokens: 3, completion_tokens: 2 } },
  'tools-whole': {
    answer: whole(
      {
        content: 'Let me look.',
        tool_calls: [
          { id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          { id: 'call_b', type: 'function', function: { name: 'get_time', arguments: '{"zone":"CET"}' } },
        ],
      },
      'tool_calls',
    ),
  },
  'tools-stream': {
    chunks: [
      chatChunk({ role: 'assistant', content: 'Checking ' }),
      chatChunk({ content: 'both.' }),
      toolChunk(0, '', 'call_1', 'get_weather'),
      toolChunk(0, '{"ci'),
      toolChunk(1, '{"city":', 'call_2', 'get_weather'),
      toolChunk(0, 'ty":"Pa'),
      toolChunk(1, '"Rome"}'),
      toolChunk(0, 'ris"}'),
      chatChunk({}, 'tool_calls'),
    ],
    usage: { prompt_tokens: 30, completion_tokens: 12 },
  },
  'text-stream': { chunks: [chatChunk({ role: 'assistant', content: 'Hel' }), chatChunk({ content: 'lo' }), chatChunk({}, 'stop')], usage: { prompt_tokens: 5, completion_tokens: 2 } },
  'long-stream': {
    chunks: [...Array.from({ length: 200 }, (_, i) => chatChunk({ content: `w${i} ` })), chatChunk({}, 'stop')],
    usage: { prompt_tokens: 5, completion_tokens: 200 },
  },
  'cut-short': { answer: whole({ content: 'and so on' }, 'length') },
  'stopped': { answer: whole({ content: 'one two' }, 'stop', undefined, { stop_reason: 'THREE' }) },
  'stall-mid': { chunks: [chatChunk({ role: 'assistant', content: 'starting' }), 'stall'] },
  'garbage': { answer: '{"choices": [ {"message": ' },
  'not-chat': { answer: { hello: 'world' } },
  'mid-error': { chunks: [chatChunk({ content: 'a' }), 'data: {"error":{"message":"model crashed"}}\n\n'] },
};

describe('/v1/messages with the Anthropic SDK', () => {
  let d: TestDaemon;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let anthropicUp: Awaited<ReturnType<typeof startMessagesUpstream>>;
  let admin: Api;
  let key: string;
  let client: Anthropic;

  const sdk = (opts: ConstructorParameters<typeof Anthropic>[0] = {}) => new Anthropic({ baseURL: d.url, apiKey: key, maxRetries: 0, timeout: 15_000, ...opts });
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${d.url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'x-api-key': key, ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body), signal: AbortSignal.timeout(15_000) });
  const lastChatBody = () => [...upstream.seen].reverse().find((r) => r.path === '/v1/chat/completions')?.body;
  const activity = async (id: string) => (await admin.get(`/svc/v1/activity?grant=${id.slice(0, 8)}`)).body.data as Record<string, any>[];
  const newKey = async (limits?: Record<string, unknown>) => {
    const created = (await admin.post('/svc/v1/keys', { name: `k${Math.random().toString(36).slice(2, 8)}` })).body;
    if (limits) expect((await admin.put(`/svc/v1/access-requests/${created.access_request_id}/limits`, limits)).status).toBe(200);
    return { key: created.key as string, id: created.access_request_id as string, keyId: created.id as string };
  };

  beforeAll(async () => {
    upstream = await startUpstream({ apiKey: PROVIDER_KEY, scripts: SCRIPTS });
    anthropicUp = await startMessagesUpstream({ apiKey: MESSAGES_KEY });
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, messagesPingMs: 50 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    expect((await admin.post('/svc/v1/providers', { name: 'local', base_url: upstream.url, api_key: PROVIDER_KEY, timeout_ms: 1500 })).status).toBe(201);
    const added = await admin.post('/svc/v1/providers', { name: 'anth', base_url: anthropicUp.url, api_key: MESSAGES_KEY, api: 'messages', models: ['leaky'] });
    expect(added.status).toBe(201);
    expect(added.body.provider).toMatchObject({ api: 'messages', auth_header: 'x-api-key', discovered_models: ['claude-up'] });
    ({ key } = await newKey());
    client = sdk();
  });
  afterAll(async () => {
    await d?.stop();
    await upstream?.close();
    await anthropicUp?.close();
  });

  describe('translated onto chat completions', () => {
    it('text with system blocks: the SDK gets a Message; the upstream a chat request with the system prompt, max_tokens and stop', async () => {
      const { data, response } = await client.messages
        .create({
          model: 'fake-model',
          max_tokens: 64,
          system: [{ type: 'text', text: 'Be brief.' }, { type: 'text', text: 'Be kind.', cache_control: { type: 'ephemeral' } }],
          messages: [{ role: 'user', content: 'hi' }],
          stop_sequences: ['END'],
          // (this SDK's types no longer name it; Claude Code and older SDKs send it)
          ...({ temperature: 0.5 } as object),
          metadata: { user_id: 'u1' },
        })
        .withResponse();
      expect(data).toMatchObject({ type: 'message', role: 'assistant', model: 'fake-model', content: [{ type: 'text', text: 'echo: hi' }], stop_reason: 'end_turn', usage: { input_tokens: 1, output_tokens: 1 } });
      expect(data.id).toMatch(/^msg_/);
      expect(response.headers.get('request-id')).toBeTruthy();
      expect(response.headers.get('request-id')).toBe(response.headers.get('x-request-id'));
      const sent = lastChatBody();
      expect(sent).toMatchObject({ model: 'fake-model', max_tokens: 64, stop: ['END'], temperature: 0.5, messages: [{ role: 'system', content: 'Be brief.\n\nBe kind.' }, { role: 'user', content: 'hi' }] });
      expect(sent).not.toHaveProperty('metadata');
      expect(upstream.seen.at(-1)!.headers.authorization).toBe(`Bearer ${PROVIDER_KEY}`);
    });

    it('images as base64 and URL go as image_url parts; Claude Code\'s ?beta=true and its headers are accepted', async () => {
      const beta = new Anthropic({ baseURL: d.url, apiKey: key, maxRetries: 0, defaultHeaders: { 'anthropic-beta': 'interleaved-thinking-2025-05-14,context-management-2025-06-27' } });
      const msg = await beta.beta.messages.create({
        model: 'fake-model',
        max_tokens: 16,
        thinking: { type: 'enabled', budget_tokens: 1024 },
        messages: [
          {
            role: 'user',
            content: [
              { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
              { type: 'image', source: { type: 'url', url: 'https://example.com/cat.png' } },
              { type: 'text', text: 'what is this?' },
            ],
          },
        ],
      });
      expect(msg.content[0]).toMatchObject({ type: 'text' });
      const seenPath = upstream.seen.at(-1)!;
      expect(seenPath.path).toBe('/v1/chat/completions');
      expect(seenPath.headers['anthropic-beta']).toBeUndefined();
      expect(seenPath.headers['x-api-key']).toBeUndefined();
      expect(seenPath.body).not.toHaveProperty('thinking');
      expect(seenPath.body.messages[0].content).toEqual([
        { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
        { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } },
        { type: 'text', text: 'what is this?' },
      ]);
    });

    it('tool use over turns, not streamed: parallel tool calls come back as tool_use blocks; results (one an error) go back as tool messages', async () => {
      const tools: Anthropic.Tool[] = [
        { name: 'get_weather', description: 'Weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } },
        { name: 'get_time', input_schema: { type: 'object', properties: { zone: { type: 'string' } } } },
      ];
      const first = await client.messages.create({ model: 'tools-whole', max_tokens: 100, tools, tool_choice: { type: 'any' }, messages: [{ role: 'user', content: 'weather and time?' }] });
      expect(first.stop_reason).toBe('tool_use');
      expect(first.content).toEqual([
        { type: 'text', text: 'Let me look.' },
        { type: 'tool_use', id: 'call_a', name: 'get_weather', input: { city: 'Paris' } },
        { type: 'tool_use', id: 'call_b', name: 'get_time', input: { zone: 'CET' } },
      ]);
      expect(lastChatBody()).toMatchObject({ tool_choice: 'required', tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather' } }, { type: 'function', function: { name: 'get_time' } }] });
      await client.messages.create({
        model: 'fake-model',
        max_tokens: 100,
        tools,
        tool_choice: { type: 'tool', name: 'get_time' },
        messages: [
          { role: 'user', content: 'weather and time?' },
          { role: 'assistant', content: first.content },
          {
            role: 'user',
            content: [
              { type: 'tool_result', tool_use_id: 'call_a', content: '18C' },
              { type: 'tool_result', tool_use_id: 'call_b', content: [{ type: 'text', text: 'no clock' }], is_error: true },
            ],
          },
        ],
      });
      const sent = lastChatBody();
      expect(sent.tool_choice).toEqual({ type: 'function', function: { name: 'get_time' } });
      expect(sent.messages[1]).toMatchObject({ role: 'assistant', content: 'Let me look.', tool_calls: [{ id: 'call_a', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }, { id: 'call_b' }] });
      expect(sent.messages[2]).toEqual({ role: 'tool', tool_call_id: 'call_a', content: '18C' });
      expect(sent.messages[3]).toMatchObject({ role: 'tool', tool_call_id: 'call_b' });
      expect(sent.messages[3].content).toMatch(/^Error: no clock/);
    });

    it('tool use streamed: parallel calls with arguments split mid-JSON build whole inputs in the SDK\'s MessageStream; text streams as it comes', async () => {
      const stream = client.messages.stream({ model: 'tools-stream', max_tokens: 100, messages: [{ role: 'user', content: 'weather?' }], tools: [{ name: 'get_weather', input_schema: { type: 'object' } }] });
      const texts: string[] = [];
      const partials: string[] = [];
      stream.on('text', (t) => texts.push(t));
      stream.on('inputJson', (p) => partials.push(p));
      const message = await stream.finalMessage();
      expect(texts.join('')).toBe('Checking both.');
      expect(message.content).toEqual([
        { type: 'text', text: 'Checking both.' },
        { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Paris' } },
        { type: 'tool_use', id: 'call_2', name: 'get_weather', input: { city: 'Rome' } },
      ]);
      expect(partials.length).toBeGreaterThan(2);
      expect(message.stop_reason).toBe('tool_use');
      expect(message.usage).toMatchObject({ input_tokens: 30, output_tokens: 12 });
      // svc asked the upstream for the usage the translation needs
      expect(lastChatBody()).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    });

    it('the raw event stream is Anthropic\'s order, and a 200-chunk answer keeps every chunk', async () => {
      const stream = await client.messages.create({ model: 'long-stream', max_tokens: 500, stream: true, messages: [{ role: 'user', content: 'count' }] });
      const types: string[] = [];
      let text = '';
      for await (const e of stream) {
        types.push(e.type);
        if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
      }
      const kinds = types.filter((t) => t !== 'ping');
      expect(kinds[0]).toBe('message_start');
      expect(kinds[1]).toBe('content_block_start');
      expect(kinds.filter((t) => t === 'content_block_delta')).toHaveLength(200);
      expect(kinds.slice(-3)).toEqual(['content_block_stop', 'message_delta', 'message_stop']);
      expect(text).toBe(Array.from({ length: 200 }, (_, i) => `w${i} `).join(''));
    });

    it('the first text event is out before the upstream sends its second chunk (nothing waits for more)', async () => {
      const stream = await client.messages.create({ model: 'gated', max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'x' }] });
      const before: string[] = [];
      let text = '';
      let opened = false;
      for await (const e of stream) {
        if (!opened) before.push(e.type);
        if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') {
          text += e.delta.text;
          if (!opened) {
            // the upstream holds its second chunk until here; a relay that buffered would never get this far
            opened = true;
            openGate();
          }
        }
      }
      expect(before.filter((t) => t !== 'ping')).toEqual(['message_start', 'content_block_start', 'content_block_delta']);
      expect(text).toBe('first second');
    });

    it('each stop_reason: end_turn, max_tokens, stop_sequence, tool_use', async () => {
      const ask = (model: string, extra: Record<string, unknown> = {}) => client.messages.create({ model, max_tokens: 10, messages: [{ role: 'user', content: 'x' }], ...extra });
      expect((await ask('fake-model')).stop_reason).toBe('end_turn');
      expect((await ask('cut-short')).stop_reason).toBe('max_tokens');
      const stopped = await ask('stopped', { stop_sequences: ['THREE'] });
      expect(stopped).toMatchObject({ stop_reason: 'stop_sequence', stop_sequence: 'THREE' });
      expect((await ask('tools-whole')).stop_reason).toBe('tool_use');
      const streamed = await client.messages.stream({ model: 'text-stream', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }).finalMessage();
      expect(streamed).toMatchObject({ stop_reason: 'end_turn', content: [{ type: 'text', text: 'Hello' }] });
    });

    it('count_tokens on a translated provider is svc\'s estimate', async () => {
      const counted = await client.messages.countTokens({ model: 'fake-model', system: 'sys', messages: [{ role: 'user', content: 'a'.repeat(400) }] });
      expect(counted.input_tokens).toBeGreaterThanOrEqual(100);
      expect(counted.input_tokens).toBeLessThan(120);
    });
  });

  describe('errors in Anthropic\'s shape', () => {
    const expectShape = async (res: Response, status: number, type: string) => {
      expect(res.status).toBe(status);
      const body = await res.json();
      expect(body).toEqual({ type: 'error', error: { type, message: expect.any(String) } });
      expect(res.headers.get('request-id')).toBeTruthy();
      return body.error.message as string;
    };

    it('before the handler: no credential, a bad one, and two different ones are 401 authentication_error', async () => {
      await expectShape(await fetch(`${d.url}/v1/messages`, { method: 'POST', body: '{}' }), 401, 'authentication_error');
      await expectShape(await post('/v1/messages', {}, { 'x-api-key': 'svc_not-a-real-key' }), 401, 'authentication_error');
      const both = await post('/v1/messages', { model: 'fake-model', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }, { Authorization: 'Bearer svc_other' });
      expect(await expectShape(both, 401, 'authentication_error')).toMatch(/different credentials/);
      // the same credential in both is one credential
      const same = await post('/v1/messages', { model: 'fake-model', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }, { Authorization: `Bearer ${key}` });
      expect(same.status).toBe(200);
      // the SDK's own error class reads it
      const err = await sdk({ apiKey: 'svc_wrong' }).messages.create({ model: 'fake-model', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.AuthenticationError);
      expect((err as InstanceType<typeof Anthropic.APIError>).requestID).toBeTruthy();
    });

    it('the chat path keeps OpenAI\'s shape for the same refusal', async () => {
      const res = await fetch(`${d.url}/v1/chat/completions`, { method: 'POST', body: '{}' });
      expect(res.status).toBe(401);
      expect((await res.json()).error).toMatchObject({ type: 'authentication_error', code: 'invalid_token' });
      expect(res.headers.get('request-id')).toBeNull();
    });

    it('a bad body is 400 invalid_request_error, an unknown model 404 not_found_error, a body too big 413, an unserved path 404', async () => {
      await expectShape(await post('/v1/messages', { model: 'fake-model', messages: [{ role: 'user', content: 'x' }] }), 400, 'invalid_request_error');
      await expectShape(await post('/v1/messages', '{not json'), 400, 'invalid_request_error');
      await expectShape(await post('/v1/messages', { model: 'no-such', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }), 404, 'not_found_error');
      await expectShape(await post('/v1/messages', { model: 'fake-model', max_tokens: 5, messages: [{ role: 'user', content: 'x'.repeat(9 * 1024 * 1024) }] }), 413, 'request_too_large');
      await expectShape(await post('/v1/messages/batches', {}), 404, 'not_found_error');
      const err = await client.messages.create({ model: 'no-such', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.NotFoundError);
    });

    it('an upstream that fails, answers garbage or not a chat completion is 502 api_error; one that stalls is 504 overloaded_error within its timeout', async () => {
      const ask = (model: string) => post('/v1/messages', { model, max_tokens: 5, messages: [{ role: 'user', content: 'x' }] });
      await expectShape(await ask('fail500'), 502, 'api_error');
      await expectShape(await ask('garbage'), 502, 'api_error');
      await expectShape(await ask('not-chat'), 502, 'api_error');
      await expectShape(await ask('stall'), 504, 'overloaded_error');
      // the upstream's own 400 keeps its status, its message without the provider's key
      const message = await expectShape(await ask('fail400'), 400, 'invalid_request_error');
      expect(message).not.toContain(PROVIDER_KEY);
    });

    it('a stream whose upstream stalls mid-way gets pings while it is quiet, then an error event (overloaded_error) within the timeout', async () => {
      const res = await post('/v1/messages', { model: 'stall-mid', max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'x' }] });
      expect(res.status).toBe(200);
      const text = await res.text();
      const events = [...text.matchAll(/^event: (\w+)$/gm)].map((m) => m[1]);
      expect(events[0]).toBe('message_start');
      expect(events).toContain('ping');
      expect(events.at(-1)).toBe('error');
      expect(events).not.toContain('message_stop');
      expect(text).toMatch(/"type":"error","error":\{"type":"overloaded_error"/);
    });

    it('an error the upstream sends mid-stream is an error event, and the SDK throws it', async () => {
      const stream = client.messages.stream({ model: 'mid-error', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] });
      await expect(stream.finalMessage()).rejects.toThrow(/model crashed/);
    });
  });

  describe('the grant holds on /v1/messages', () => {
    it('x-api-key (apiKey) and Bearer (authToken, as Claude Code\'s ANTHROPIC_AUTH_TOKEN) both authenticate', async () => {
      const viaBearer = new Anthropic({ baseURL: d.url, authToken: key, apiKey: null, maxRetries: 0 });
      expect((await viaBearer.messages.create({ model: 'fake-model', max_tokens: 5, messages: [{ role: 'user', content: 'b' }] })).content[0]).toMatchObject({ text: 'echo: b' });
      expect((await client.messages.create({ model: 'fake-model', max_tokens: 5, messages: [{ role: 'user', content: 'k' }] })).content[0]).toMatchObject({ text: 'echo: k' });
    });

    it('activity records endpoint /v1/messages, kind messages, the model and the translated tokens, no content', async () => {
      const g = await newKey();
      await sdk({ apiKey: g.key }).messages.stream({ model: 'text-stream', max_tokens: 10, messages: [{ role: 'user', content: 'secret words' }] }).finalMessage();
      await sdk({ apiKey: g.key }).messages.countTokens({ model: 'fake-model', messages: [{ role: 'user', content: 'x' }] });
      const events = await eventually(async () => ((await activity(g.id)).length >= 2 ? await activity(g.id) : null), 'both calls recorded');
      const call = events.find((e) => e.endpoint === '/v1/messages');
      expect(call).toMatchObject({ kind: 'messages', model: 'text-stream', status: 200, outcome: 'ok', tokens_in: 5, tokens_out: 2 });
      expect(call).not.toHaveProperty('tokens_estimated');
      expect(events.find((e) => e.endpoint === '/v1/messages/count_tokens')).toMatchObject({ kind: 'messages', status: 200 });
      expect(JSON.stringify(events)).not.toContain('secret words');
    });

    it('calls a minute: past the limit a 429 rate_limit_error with Retry-After, the SDK\'s RateLimitError', async () => {
      const g = await newKey({ requests_per_minute: 1 });
      const limited = sdk({ apiKey: g.key });
      await limited.messages.create({ model: 'fake-model', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] });
      const err = await limited.messages.create({ model: 'fake-model', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.RateLimitError);
      const e = err as InstanceType<typeof Anthropic.RateLimitError>;
      expect(e.headers?.get('retry-after')).toMatch(/^\d+$/);
      expect(e.error).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
    });

    it('tokens a day count the translated usage; once spent, a 429', async () => {
      const g = await newKey({ tokens_per_day: 60 });
      const limited = sdk({ apiKey: g.key });
      // 30 in and 12 out: 42 of 60
      await limited.messages.stream({ model: 'tools-stream', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }).finalMessage();
      await eventually(async () => (await activity(g.id)).length >= 1, 'the call recorded');
      // 21 + 8 more: 71, over the budget
      await limited.messages.create({ model: 'tools-whole', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] });
      await eventually(async () => (await activity(g.id)).length >= 2, 'the second call recorded');
      const err = await limited.messages.create({ model: 'fake-model', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.RateLimitError);
      const usage = (await admin.get(`/svc/v1/access-requests/${g.id}/review`)).body.usage;
      expect(usage.today.tokens).toBe(71);
    });

    it('revocation ends the key at its next call', async () => {
      const g = await newKey();
      const revocable = sdk({ apiKey: g.key });
      await revocable.messages.create({ model: 'fake-model', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] });
      expect((await admin.post(`/svc/v1/keys/${g.keyId}/revoke`)).status).toBe(200);
      const err = await revocable.messages.create({ model: 'fake-model', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.AuthenticationError);
    });

    it('a stream the app leaves early: the upstream is let go, and svc\'s estimate is counted', async () => {
      const g = await newKey();
      const abortedBefore = upstream.aborted.length;
      const stream = await sdk({ apiKey: g.key }).messages.create({ model: 'stall-mid', max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'x' }] });
      const seen: string[] = [];
      // leaving the loop aborts the SDK's request
      for await (const e of stream) {
        seen.push(e.type);
        if (e.type === 'content_block_delta') break;
      }
      expect(seen).toContain('content_block_delta');
      await eventually(() => upstream.aborted.length > abortedBefore, 'the upstream call let go');
      const [event] = await eventually(async () => ((await activity(g.id)).length ? await activity(g.id) : null), 'the call recorded');
      expect(event).toMatchObject({ endpoint: '/v1/messages', tokens_estimated: true, tokens_out: 1 });
      expect(event.tokens_in).toBeGreaterThan(0);
    });
  });

  describe('passed through to a provider that serves the Messages API', () => {
    it('the body goes on unchanged with the provider\'s key in x-api-key, never the app\'s; the answer comes back', async () => {
      const body = { model: 'claude-up', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }], thinking: { type: 'enabled', budget_tokens: 1024 }, cache_ctl_field: 1 };
      const raw = JSON.stringify(body, null, 1);
      const res = await post('/v1/messages?beta=true', raw, { 'anthropic-version': '2023-06-01', 'anthropic-beta': 'some-beta' });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ id: 'msg_up', content: [{ type: 'text', text: 'upstream saw 1 message(s)' }] });
      const seen = anthropicUp.seen.at(-1)!;
      expect(seen.path).toBe('/v1/messages');
      expect(seen.body).toBe(raw);
      expect(seen.headers['x-api-key']).toBe(MESSAGES_KEY);
      expect(seen.headers.authorization).toBeUndefined();
      expect(seen.headers['anthropic-version']).toBe('2023-06-01');
      expect(seen.headers['anthropic-beta']).toBe('some-beta');
    });

    it('streamed through the SDK, with tokens from message_start and message_delta both', async () => {
      const g = await newKey();
      const message = await sdk({ apiKey: g.key }).messages.stream({ model: 'claude-up', max_tokens: 20, messages: [{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }, { role: 'user', content: 'c' }] }).finalMessage();
      expect(message.content).toEqual([{ type: 'text', text: 'upstream saw 3 message(s)' }]);
      const [event] = await eventually(async () => ((await activity(g.id)).length ? await activity(g.id) : null), 'the call recorded');
      expect(event).toMatchObject({ kind: 'messages', tokens_in: 11, tokens_out: 13 });
      expect(event).not.toHaveProperty('tokens_estimated');
    });

    it('count_tokens is the provider\'s own count', async () => {
      expect(await client.messages.countTokens({ model: 'claude-up', messages: [{ role: 'user', content: 'x' }] })).toEqual({ input_tokens: 4242 });
      expect(anthropicUp.seen.at(-1)!.path).toBe('/v1/messages/count_tokens');
    });

    it('a provider added with --auth-header authorization gets its key as a Bearer; a <provider>/<model> id is rewritten to its own', async () => {
      const bearerUp = await startMessagesUpstream({ apiKey: MESSAGES_KEY, bearer: true });
      try {
        const added = await admin.post('/svc/v1/providers', { name: 'anthb', base_url: bearerUp.url, api_key: MESSAGES_KEY, api: 'messages', auth_header: 'authorization' });
        expect(added.body.provider).toMatchObject({ auth_header: 'authorization', discovered_models: ['claude-up'] });
        const message = await client.messages.create({ model: 'anthb/claude-up', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] });
        expect(message).toMatchObject({ id: 'msg_up', model: 'claude-up' });
        const seen = bearerUp.seen.at(-1)!;
        expect(seen.headers.authorization).toBe(`Bearer ${MESSAGES_KEY}`);
        expect(seen.headers['x-api-key']).toBeUndefined();
        expect(JSON.parse(seen.body).model).toBe('claude-up');
      } finally {
        await bearerUp.close();
      }
    });

    it('the provider\'s key is scrubbed from its error, which keeps its status and Anthropic type', async () => {
      const res = await post('/v1/messages', { model: 'leaky', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] });
      expect(res.status).toBe(400);
      const text = await res.text();
      expect(text).not.toContain(MESSAGES_KEY);
      expect(JSON.parse(text)).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    });
  });

  describe('browsers', () => {
    it("the CORS preflight allows what the Anthropic SDK sends from a page: its version, betas, x-api-key, the browser opt-in and every x-stainless-* header", async () => {
      const asked = ['anthropic-version', 'anthropic-beta', 'x-api-key', 'anthropic-dangerous-direct-browser-access', 'content-type', 'x-stainless-arch', 'x-stainless-lang', 'x-stainless-os', 'x-stainless-package-version', 'x-stainless-retry-count', 'x-stainless-runtime', 'x-stainless-runtime-version', 'x-stainless-timeout'];
      const res = await fetch(`${d.url}/v1/messages`, {
        method: 'OPTIONS',
        headers: { Origin: 'https://app.example', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': asked.join(',') },
        signal: AbortSignal.timeout(15_000),
      });
      expect(res.status).toBe(204);
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      const allowed = new Set(res.headers.get('access-control-allow-headers')!.split(',').map((h) => h.trim().toLowerCase()));
      for (const h of asked) expect(allowed, h).toContain(h);
      // only the SDK's own prefix is allowed by what is asked, nothing else a preflight names
      const other = await fetch(`${d.url}/v1/messages`, {
        method: 'OPTIONS',
        headers: { Origin: 'https://app.example', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'x-forwarded-for,cookie' },
        signal: AbortSignal.timeout(15_000),
      });
      expect(other.headers.get('access-control-allow-headers')!.toLowerCase()).not.toMatch(/x-forwarded-for|cookie/);
    });
  });
});

describe('/v1/messages holds the grant\'s calls in flight', () => {
  it('past its calls in flight a grant gets 429 rate_limit_error with Retry-After, while another grant goes through; the slots come back', async () => {
    const d = await startTestDaemon({ config: { grantConcurrency: 2, rateLimitClient: 0, rateLimitAddress: 0 } });
    const slow = await startUpstream({ chunkDelayMs: 300, chunks: 4 });
    try {
      const admin = await new Api(d.url).login('admin', d.adminPassword);
      expect((await admin.post('/svc/v1/providers', { name: 'slow', base_url: slow.url })).status).toBe(201);
      const keyFor = async (name: string) => (await admin.post('/svc/v1/keys', { name })).body.key as string;
      const [hog, other] = [await keyFor('hog'), await keyFor('other')];
      const stream = (key: string) =>
        fetch(`${d.url}/v1/messages`, {
          method: 'POST',
          headers: { 'x-api-key': key, 'Content-Type': 'application/json' },
          body: JSON.stringify({ model: 'fake-model', max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
          signal: AbortSignal.timeout(15_000),
        });
      const started = await Promise.all([stream(hog), stream(hog)]);
      expect(started.map((r) => r.status)).toEqual([200, 200]);
      const refused = await stream(hog);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(await refused.json()).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
      const others = await stream(other);
      expect(others.status).toBe(200);
      await Promise.all([...started, others].map((r) => r.text()));
      const again = await stream(hog);
      expect(again.status).toBe(200);
      expect(await again.text()).toContain('message_stop');
    } finally {
      await d.stop();
      await slow.close();
    }
  });
});
