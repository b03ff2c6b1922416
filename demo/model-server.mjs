// A small OpenAI-compatible model server for trying svc: GET /v1/models, POST /v1/chat/completions
// (streamed or not) and POST /v1/embeddings. No model behind it: the chat model answers with what
// it was told, the embedding model hashes the text, so every answer is the same for the same input.
import { createHash } from 'node:crypto';
import http from 'node:http';

export const CHAT_MODEL = 'demo-chat';
export const EMBEDDING_MODEL = 'demo-embed';
/** When these models were "made": OpenAI's `created`, Unix seconds. */
const CREATED = 1767225600;

/** The text of the last user message (a string, or OpenAI's content parts). */
function lastUserText(messages) {
  const last = [...(Array.isArray(messages) ? messages : [])].reverse().find((m) => m?.role === 'user');
  if (typeof last?.content === 'string') return last.content;
  if (Array.isArray(last?.content)) return last.content.map((p) => (typeof p?.text === 'string' ? p.text : '')).join('');
  return '';
}

export const replyTo = (messages) => `Hello from the svc demo model. You said: ${JSON.stringify(lastUserText(messages).slice(0, 500))}`;

/** Eight numbers from the text's hash, in [-1, 1]. */
function embed(text) {
  const hash = createHash('sha256').update(String(text)).digest();
  return Array.from({ length: 8 }, (_, i) => Math.round((hash.readInt16BE(i * 2) / 32768) * 1e6) / 1e6);
}

const error = (res, status, message, code) => {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ error: { message, type: 'invalid_request_error', code } }));
};

async function readJson(req) {
  const chunks = [];
  let size = 0;
  for await (const c of req) {
    if ((size += c.length) > 1024 * 1024) throw new Error('too large');
    chunks.push(c);
  }
  return JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
}

/** Starts it on 127.0.0.1 (port 0: a free one); answers its base URL (…/v1) and how to stop it. */
export async function startModelServer({ port = 0, chunkDelayMs = 15 } = {}) {
  let calls = 0;
  const server = http.createServer(async (req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    try {
      if (req.method === 'GET' && path === '/v1/models') {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ object: 'list', data: [CHAT_MODEL, EMBEDDING_MODEL].map((id) => ({ id, object: 'model', created: CREATED, owned_by: 'svc-demo' })) }));
        return;
      }
      if (req.method === 'POST' && path === '/v1/chat/completions') {
        const body = await readJson(req);
        if (body.model !== CHAT_MODEL) return error(res, 404, `The model ${JSON.stringify(body.model)} does not exist.`, 'model_not_found');
        calls++;
        const id = `chatcmpl-demo-${calls}`;
        const created = Math.floor(Date.now() / 1000);
        const text = replyTo(body.messages);
        if (body.stream !== true) {
          res.writeHead(200, { 'Content-Type': 'application/json' });
          res.end(JSON.stringify({
            id, object: 'chat.completion', created, model: CHAT_MODEL,
            choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
            usage: { prompt_tokens: 1, completion_tokens: text.split(' ').length, total_tokens: 1 + text.split(' ').length },
          }));
          return;
        }
        res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
        const chunk = (delta, finish = null) => `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: CHAT_MODEL, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
        res.write(chunk({ role: 'assistant', content: '' }));
        // a word at a time, so a stream is seen to arrive as it is made
        for (const word of text.split(/(?<= )/)) {
          if (res.destroyed) return;
          res.write(chunk({ content: word }));
          await new Promise((r) => setTimeout(r, chunkDelayMs));
        }
        res.end(`${chunk({}, 'stop')}data: [DONE]\n\n`);
        return;
      }
      if (req.method === 'POST' && path === '/v1/embeddings') {
        const body = await readJson(req);
        if (body.model !== EMBEDDING_MODEL) return error(res, 404, `The model ${JSON.stringify(body.model)} does not exist.`, 'model_not_found');
        const inputs = Array.isArray(body.input) ? body.input : [body.input];
        res.writeHead(200, { 'Content-Type': 'application/json' });
        // float arrays; svc turns them into base64 when the app asks for that (the openai client does)
        res.end(JSON.stringify({ object: 'list', model: EMBEDDING_MODEL, data: inputs.map((text, index) => ({ object: 'embedding', index, embedding: embed(typeof text === 'string' ? text : JSON.stringify(text)) })), usage: { prompt_tokens: inputs.length, total_tokens: inputs.length } }));
        return;
      }
      error(res, 404, `The demo model server has no ${req.method} ${path}.`, 'unknown_url');
    } catch {
      if (!res.headersSent) error(res, 400, 'The body is not JSON.', 'invalid_body');
      else res.destroy();
    }
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return {
    url: `http://127.0.0.1:${server.address().port}/v1`,
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
