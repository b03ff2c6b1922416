import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SeenRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: any;
}

/** The text the fake upstream answers to a Responses API `input` (a string or message items). */
function lastInputText(input: any): string {
  if (typeof input === 'string') return input;
  const last = Array.isArray(input) ? input[input.length - 1] : undefined;
  if (typeof last?.content === 'string') return last.content;
  if (Array.isArray(last?.content)) return last.content.map((p: any) => p?.text ?? '').join('');
  return '';
}

/**
 * A chat completion answer scripted for one model name: the whole answer (`answer`, as JSON, or a
 * string sent as it stands), or the chunks of its stream (`chunks`: each an object sent as a data
 * line, a string sent raw, `'stall'`, after which nothing more is sent, or a function whose promise
 * the stream waits for before its next chunk). A stream's chunks are
 * written one by one as they are; `usage` adds OpenAI's usage chunk when the request asks for it.
 */
export interface ChatScript {
  answer?: unknown;
  chunks?: (Record<string, unknown> | string | (() => Promise<unknown>))[];
  usage?: { prompt_tokens: number; completion_tokens: number };
}

/** A chunk of a chat stream: a delta and, for the last, its finish reason. */
export const chatChunk = (delta: Record<string, unknown>, finish: string | null = null, extra: Record<string, unknown> = {}) => ({
  id: 'chatcmpl-s',
  object: 'chat.completion.chunk',
  created: 1,
  model: 'scripted',
  choices: [{ index: 0, delta, finish_reason: finish, ...extra }],
});

/** A piece of a streamed tool call: the first carries its id and name. */
export const toolChunk = (index: number, args: string, id?: string, name?: string) =>
  chatChunk({ tool_calls: [{ index, ...(id ? { id, type: 'function' } : {}), function: { ...(name ? { name } : {}), arguments: args } }] });

/**
 * A small real OpenAI-format model server on 127.0.0.1: models, chat completions, legacy
 * completions and the Responses API (each plain and SSE, with spacing between chunks; Responses
 * streams as typed events), embeddings; and misbehaviours picked by model name:
 * `stall` never answers, `break` cuts a stream mid-way, `fail500` / `fail400` answer errors,
 * `embed-floats` answers float arrays whatever `encoding_format` asks. `lacks` lists paths
 * (e.g. `/v1/responses`) it answers with a bare 404 like a server that does not have them.
 */
export async function startUpstream(opts: { apiKey?: string; chunkDelayMs?: number; chunks?: number; lacks?: string[]; scripts?: Record<string, ChatScript> } = {}) {
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
      return json(200, { object: 'list', data: ['fake-model', 'embed-model', 'embed-floats', 'stall', 'break', 'fail500', 'fail400', ...Object.keys(opts.scripts ?? {})].map((id) => ({ id, object: 'model', created: 1, owned_by: 'test' })) });
    }
    if (opts.lacks?.includes(path)) {
      res.writeHead(404, { 'Content-Type': 'text/plain' });
      res.end('404 page not found');
      return;
    }
    const model = body?.model;
    if (model === 'stall') {
      res.on('close', () => aborted.push(path));
      return; // never answers
    }
    const script = typeof model === 'string' ? opts.scripts?.[model] : undefined;
    if (script && req.method === 'POST' && path === '/v1/chat/completions') return playScript(script, body, res, aborted, path);
    if (model === 'fail500') return json(500, { error: { message: 'upstream exploded', type: 'server_error' } });
    if (model === 'fail400') return json(400, { error: { message: `context too long for key ${opts.apiKey ?? ''}`, type: 'invalid_request_error' } });
    if (req.method === 'POST' && path === '/v1/embeddings') {
      const inputs = Array.isArray(body.input) ? body.input : [body.input];
      const vector = [0.1, 0.2, 0.3];
      // Like OpenAI, honour encoding_format (the official client asks for base64 float32).
      const embedding = body.encoding_format === 'base64' && model !== 'embed-floats' ? Buffer.from(new Float32Array(vector).buffer).toString('base64') : vector;
      return json(200, { object: 'list', model, data: inputs.map((_: unknown, index: number) => ({ object: 'embedding', index, embedding })), usage: { prompt_tokens: 3, total_tokens: 3 } });
    }
    if (req.method === 'POST' && path === '/v1/chat/completions') {
      const content = body.messages?.[body.messages.length - 1]?.content ?? '';
      const last = typeof content === 'string' ? content : '[structured content]';
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
        // as OpenAI does when asked for usage: every chunk says `usage: null`, a last one carries it
        const withUsage = body.stream_options?.include_usage === true;
        const chunk = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model, choices: [{ index: 0, delta: { content: `part${i} ` }, finish_reason: null }], ...(withUsage ? { usage: null } : {}) };
        res.write(`data: ${JSON.stringify(chunk)}\n\n`);
        if (model === 'break' && i === 1) {
          res.socket?.destroy();
          return;
        }
        if (chunkDelay) await new Promise((r) => setTimeout(r, chunkDelay));
      }
      if (closed) return;
      const withUsage = body.stream_options?.include_usage === true;
      res.write(`data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], ...(withUsage ? { usage: null } : {}) })}\n\n`);
      if (withUsage) res.write(`data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model, choices: [], usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 } })}\n\n`);
      sentLast.at = Date.now();
      res.end('data: [DONE]\n\n');
      return;
    }
    // Streams with spacing between events; stops early (recording an abort) if svc hangs up.
    const streamEvents = async (events: string[]) => {
      res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
      res.flushHeaders();
      let closed = false;
      res.on('close', () => {
        if (!res.writableFinished) {
          closed = true;
          aborted.push(path);
        }
      });
      for (let i = 0; i < events.length && !closed; i++) {
        res.write(events[i]);
        if (model === 'break' && i === 2) {
          res.socket?.destroy();
          return;
        }
        if (chunkDelay && i < events.length - 1) await new Promise((r) => setTimeout(r, chunkDelay));
      }
      if (closed) return;
      sentLast.at = Date.now();
      res.end();
    };
    if (req.method === 'POST' && path === '/v1/completions') {
      const prompt = Array.isArray(body.prompt) ? body.prompt.join(' ') : String(body.prompt ?? '');
      const completion = (text: string, finish: string | null) => ({ id: 'cmpl-1', object: 'text_completion', created: 1, model, choices: [{ index: 0, text, logprobs: null, finish_reason: finish }] });
      if (!body.stream) return json(200, { ...completion(`echo: ${prompt}`, 'stop'), usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } });
      const parts = Array.from({ length: chunkCount }, (_, i) => `data: ${JSON.stringify(completion(`part${i} `, null))}\n\n`);
      return streamEvents([...parts, `data: ${JSON.stringify(completion('', 'stop'))}\n\ndata: [DONE]\n\n`]);
    }
    if (req.method === 'POST' && path === '/v1/responses') {
      const text = `echo: ${lastInputText(body.input)}`;
      const usage = { input_tokens: 1, input_tokens_details: { cached_tokens: 0 }, output_tokens: 2, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 3 };
      const message = (content: string, status: string) => ({
        id: 'msg_1',
        type: 'message',
        status,
        role: 'assistant',
        content: status === 'completed' ? [{ type: 'output_text', text: content, annotations: [], logprobs: [] }] : [],
      });
      const response = (status: string, output: unknown[]) => ({
        id: 'resp_1',
        object: 'response',
        created_at: 1,
        status,
        model,
        output,
        error: null,
        incomplete_details: null,
        instructions: null,
        parallel_tool_calls: true,
        tool_choice: 'auto',
        tools: [],
        temperature: 1,
        top_p: 1,
        usage: status === 'completed' ? usage : null,
        echo_fields: Object.keys(body).sort(),
      });
      if (!body.stream) return json(200, response('completed', [message(text, 'completed')]));
      const deltas = Array.from({ length: chunkCount }, (_, i) => `part${i} `);
      const full = deltas.join('');
      const at = { item_id: 'msg_1', output_index: 0, content_index: 0 };
      const typed = [
        { type: 'response.created', response: response('in_progress', []) },
        { type: 'response.in_progress', response: response('in_progress', []) },
        { type: 'response.output_item.added', output_index: 0, item: message('', 'in_progress') },
        { type: 'response.content_part.added', ...at, part: { type: 'output_text', text: '', annotations: [] } },
        ...deltas.map((delta) => ({ type: 'response.output_text.delta', ...at, delta, logprobs: [] })),
        { type: 'response.output_text.done', ...at, text: full, logprobs: [] },
        { type: 'response.content_part.done', ...at, part: { type: 'output_text', text: full, annotations: [] } },
        { type: 'response.output_item.done', output_index: 0, item: message(full, 'completed') },
        { type: 'response.completed', response: response('completed', [message(full, 'completed')]) },
      ];
      return streamEvents(typed.map((e, sequence_number) => `event: ${e.type}\ndata: ${JSON.stringify({ ...e, sequence_number })}\n\n`));
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

/** Answers a scripted model's chat completion (see ChatScript). */
async function playScript(script: ChatScript, body: any, res: http.ServerResponse, aborted: string[], path: string): Promise<void> {
  if (!body?.stream || !script.chunks) {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(typeof script.answer === 'string' ? script.answer : JSON.stringify(script.answer));
    return;
  }
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
  res.flushHeaders();
  res.on('close', () => {
    if (!res.writableFinished) aborted.push(path);
  });
  for (const chunk of script.chunks) {
    if (chunk === 'stall') return;
    if (typeof chunk === 'function') {
      await chunk();
      continue;
    }
    if (res.destroyed) return;
    res.write(typeof chunk === 'string' ? chunk : `data: ${JSON.stringify(chunk)}\n\n`);
    // each chunk its own write, as a real server's tokens come
    await new Promise((r) => setImmediate(r));
  }
  if (script.usage && body.stream_options?.include_usage === true) res.write(`data: ${JSON.stringify({ id: 'chatcmpl-s', object: 'chat.completion.chunk', created: 1, model: 'scripted', choices: [], usage: { ...script.usage, total_tokens: script.usage.prompt_tokens + script.usage.completion_tokens } })}\n\n`);
  res.end('data: [DONE]\n\n');
}
