import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { SeenRequest } from './upstream.js';

/**
 * A small real Anthropic Messages API server on 127.0.0.1, for svc's pass-through: GET /v1/models,
 * POST /v1/messages (whole, or Anthropic's event stream with input tokens in message_start and
 * output tokens in message_delta) and /v1/messages/count_tokens. It takes its key in `x-api-key`
 * (or `Authorization: Bearer` with `bearer`), and the model `leaky` answers a 400 that quotes it.
 */
export async function startMessagesUpstream(opts: { apiKey: string; bearer?: boolean }) {
  const seen: SeenRequest[] = [];
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const body = raw ? JSON.parse(raw) : undefined;
    const path = (req.url ?? '').replace(/\?.*$/, '');
    seen.push({ method: req.method ?? '', path, headers: req.headers, body: raw });
    const json = (status: number, value: unknown) => {
      res.writeHead(status, { 'Content-Type': 'application/json', 'request-id': 'req_upstream' });
      res.end(JSON.stringify(value));
    };
    const keyOk = opts.bearer ? req.headers.authorization === `Bearer ${opts.apiKey}` : req.headers['x-api-key'] === opts.apiKey;
    if (!keyOk) return json(401, { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } });
    if (req.method === 'GET' && path === '/v1/models') return json(200, { data: [{ type: 'model', id: 'claude-up', display_name: 'Claude Up', created_at: '2025-01-01T00:00:00Z' }], has_more: false });
    if (body?.model === 'leaky') return json(400, { type: 'error', error: { type: 'invalid_request_error', message: `bad request for key ${opts.apiKey}` } });
    if (req.method === 'POST' && path === '/v1/messages/count_tokens') return json(200, { input_tokens: 4242 });
    if (req.method !== 'POST' || path !== '/v1/messages') return json(404, { type: 'error', error: { type: 'not_found_error', message: 'no such route' } });
    const text = `upstream saw ${body.messages.length} message(s)`;
    const message = { id: 'msg_up', type: 'message', role: 'assistant', model: body.model, content: [{ type: 'text', text }], stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: 11, output_tokens: 13 } };
    if (!body.stream) return json(200, message);
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    const event = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
    res.write(event('message_start', { message: { ...message, content: [], stop_reason: null, usage: { input_tokens: 11, output_tokens: 1 } } }));
    res.write(event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }));
    res.write(event('ping', {}));
    res.write(event('content_block_delta', { index: 0, delta: { type: 'text_delta', text } }));
    res.write(event('content_block_stop', { index: 0 }));
    res.write(event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 13 } }));
    res.end(event('message_stop', {}));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    seen,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
