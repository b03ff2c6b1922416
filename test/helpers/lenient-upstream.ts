import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An OpenAI-format chat server that reads body keys without regard to case, the last spelling
 * winning, as Go's encoding/json does (Ollama's OpenAI layer): `"Stream": true` streams and
 * `"Model"` picks the model. Models: `no-usage` answers whole without usage; `slow` waits for
 * the next `release()` and then answers what its max_tokens allowed (or 1,000 tokens) and 10 in. Streams
 * send usage only when `stream_options.include_usage` asks for it.
 */
export async function startLenientUpstream() {
  const seen: Record<string, unknown>[] = [];
  let waiting: (() => void)[] = [];
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>;
    const body: Record<string, any> = {};
    for (const [k, v] of Object.entries(raw)) body[k.toLowerCase().replace(/ſ/g, 's').replace(/\u212a/g, 'k')] = v;
    seen.push(raw);
    if (body.model === 'slow') await new Promise<void>((r) => waiting.push(r));
    const out = Number(body.max_tokens ?? body.max_completion_tokens ?? 1000);
    const usage = { prompt_tokens: 10, completion_tokens: out, total_tokens: 10 + out };
    if (body.stream === true) {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      for (let i = 0; i < 3; i++) res.write(`data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: body.model, choices: [{ index: 0, delta: { content: `p${i}` }, finish_reason: null }] })}\n\n`);
      if (body.stream_options?.include_usage === true) res.write(`data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: body.model, choices: [], usage })}\n\n`);
      res.end('data: [DONE]\n\n');
      return;
    }
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(
      JSON.stringify({
        id: 'c',
        object: 'chat.completion',
        created: 1,
        model: body.model,
        choices: [{ index: 0, message: { role: 'assistant', content: 'x'.repeat(400) }, finish_reason: 'stop' }],
        ...(body.model === 'no-usage' ? {} : { usage }),
      }),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    seen,
    /** how many `slow` calls wait */
    waiting: () => waiting.length,
    /** lets every waiting `slow` call answer (a later one waits for the next release) */
    release() {
      for (const r of waiting) r();
      waiting = [];
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
