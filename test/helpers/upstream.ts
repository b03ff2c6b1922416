import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SeenRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: any;
}

/**
 * A small real OpenAI-format model server on 127.0.0.1: models, chat completions (plain and SSE,
 * with spacing between chunks), embeddings; and misbehaviours picked by model name:
 * `stall` never answers, `break` cuts a stream mid-way, `fail500` / `fail400` answer errors.
 */
export async function startUpstream(opts: { apiKey?: string; chunkDelayMs?: number; chunks?: number } = {}) {
  const seen: SeenRequest[] = [];
  const aborted: string[] = [];
  const chunkDelay = opts.chunkDelayMs ?? 0;
  const chunkCount = opts.chunks ?? 3;
  const sockets = new Set<import('node:net').Socket>();
  const sentLast = { at: 0 };

  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    let body: any = undefined;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      body = raw;
    }
    const path = (req.url ?? '').replace(/\?.*$/, '');
    seen.push({ method: req.method ?? '', path, headers: req.headers, body });
    if (opts.apiKey && req.headers.authorization !== `Bearer ${opts.apiKey}`) {
      res.writeHead(401, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'bad key', type: 'invalid_request_error' } }));
      return;
    }
    const json = (status: number, value: unknown) => {
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    if (req.method === 'GET' && path === '/v1/models') {
      return json(200, { object: 'list', data: ['fake-model', 'embed-model', 'stall', 'break', 'fail500', 'fail400'].map((id) => ({ id, object: 'model', created: 1, owned_by: 'test' })) });
    }
    const model = body?.model;
    if (model === 'stall') {
      res.on('close', () => aborted.push(path));
      return; // never answers
    }
    if (model === 'fail500') return json(500, { error: { message: 'upstream exploded', type: 'server_error' } });
    if (model === 'fail400') return json(400, { error: { message: `context too long for key ${opts.apiKey ?? ''}`, type: 'invalid_request_error' } });
    if (req.method === 'POST' && path === '/v1/embeddings') {
      const inputs = Array.isArray(body.input) ? body.input : [body.input];
      const vector = [0.1, 0.2, 0.3];
      // Like OpenAI, honour encoding_format (the official client asks for base64 float32).
      const embedding = body.encoding_format === 'base64' ? Buffer.from(new Float32Array(vector).buffer).toString('base64') : vector;
      return json(200, { object: 'list', model, data: inputs.map((_: unknown, index: number) => ({ object: 'embedding', index, embedding })), usage: { prompt_tokens: 3, total_tokens: 3 } });
    }
    if (req.method === 'POST' && path === '/v1/chat/completions') {
      const last = body.messages?.[body.messages.length - 1]?.content ?? '';
      if (!body.stream) {
        return json(200, {
          id: 'chatcmpl-1',
          object: 'chat.completion',
          created: 1,
          model,
          choices: [{ index: 0, message: { role: 'assistant', content: `echo: ${last}` }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
          echo_fields: Object.keys(body).sort(),
        });
      }
      res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
      res.flushHeaders();
      let closed = false;
      res.on('close', () => {
        if (!res.writableFinished) {
          closed = true;
          aborted.push(path);
        }
      });
      for (let i = 0; i < chunkCount && !closed; i++) {
        const chunk = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model, choices: [{ index: 0, delta: { content: `part${i} ` }, finish_reason: null }] };
        res.write(`data: ${JSON.stringify(chunk)}\n\n`);
        if (model === 'break' && i === 1) {
          res.socket?.destroy();
          return;
        }
        if (chunkDelay) await new Promise((r) => setTimeout(r, chunkDelay));
      }
      if (closed) return;
      res.write(`data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`);
      sentLast.at = Date.now();
      res.end('data: [DONE]\n\n');
      return;
    }
    json(404, { error: { message: 'no such route', type: 'invalid_request_error' } });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return {
    url,
    seen,
    aborted,
    sentLast,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
