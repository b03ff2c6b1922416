/**
 * A provider's key against an upstream that echoes it in its response headers or answers with a
 * redirect to another server: the app never sees the key, and no other server is sent it.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, expectErrorShape, userApi } from './helpers/http.js';
import { approvedScope, authorize, oidcConfig, registerClient } from './helpers/oauth.js';

const KEY = `sk-proj-${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;

async function listen(handler: http.RequestListener) {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise<void>((r) => server.close(() => r())) };
}

describe('an upstream that echoes the key in headers or redirects elsewhere', () => {
  let d: TestDaemon;
  let elsewhere: Awaited<ReturnType<typeof listen>>;
  let upstream: Awaited<ReturnType<typeof listen>>;
  const reachedElsewhere: http.IncomingHttpHeaders[] = [];
  let token: string;

  beforeAll(async () => {
    elsewhere = await listen((req, res) => {
      reachedElsewhere.push(req.headers);
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{"object":"list","data":[]}');
    });
    upstream = await listen(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const model = req.method === 'POST' ? JSON.parse(Buffer.concat(chunks).toString('utf8')).model : '';
      const auth = String(req.headers.authorization ?? '');
      const echo = { 'X-Echo-Authorization': auth, 'Set-Cookie': `k=${auth.slice(7)}`, Link: `<https://x/?k=${auth.slice(7)}>` };
      if (model === 'redirect' || req.url === '/v1/models') {
        res.writeHead(307, { Location: `${elsewhere.origin}${req.url}`, ...echo });
        return res.end();
      }
      const stream = model === 'echo-stream';
      res.writeHead(200, { ...echo, 'Content-Type': `${stream ? 'text/event-stream' : 'application/json'}; charset=utf-8; authorization="${auth}"` });
      const chunk = { id: 'c', object: 'chat.completion.chunk', created: 1, model, choices: [{ index: 0, delta: { content: 'hi' }, finish_reason: 'stop' }] };
      if (stream) return res.end(`data: ${JSON.stringify(chunk)}\n\ndata: [DONE]\n\n`);
      res.end(JSON.stringify({ id: 'c', object: 'chat.completion', created: 1, model, choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1 } }));
    });
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    const alice = await userApi(d.url, admin, 'alice', 'power_user');
    const added = await alice.post('/svc/v1/providers', { name: 'remote', base_url: `${upstream.origin}/v1`, api_key: KEY, models: ['redirect', 'echo', 'echo-stream'] });
    expect(added.status).toBe(201);
    // discovery met the redirect and did not follow it
    expect(added.body.provider.discovery_error).toMatch(/307/);
    const { clientId, secret } = await registerClient(admin);
    const config = await oidcConfig(d, clientId, secret);
    const user = await approvedScope(d, alice, clientId, 'scope_user_user');
    token = (await authorize(config, alice, user.scope)).tokens!.access_token;
  });
  afterAll(async () => {
    await d?.stop();
    await upstream?.close();
    await elsewhere?.close();
  });

  const chat = (model: string, stream = false) =>
    fetch(`${d.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'x' }] }),
      signal: AbortSignal.timeout(8000),
    });
  const headersText = (res: Response) => [...res.headers].map(([k, v]) => `${k}: ${v}`).join('\n');

  it('a redirect is a 502 naming the provider; it is not followed, so no other server gets the key', async () => {
    const res = await chat('redirect');
    expect(res.status).toBe(502);
    const body = await res.json();
    expectErrorShape(body);
    expect(body.error.code).toBe('upstream_unavailable');
    expect(JSON.stringify(body) + headersText(res)).not.toContain(KEY);
    expect(reachedElsewhere).toEqual([]);
  });

  it('keeps the key out of the headers the app gets, whole answers and streams alike', async () => {
    for (const res of [await chat('echo'), await chat('echo-stream', true)]) {
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).toContain('hi');
      expect(headersText(res)).not.toContain(KEY);
      expect(res.headers.get('set-cookie')).toBeNull();
      expect(res.headers.get('x-echo-authorization')).toBeNull();
    }
  });
});
