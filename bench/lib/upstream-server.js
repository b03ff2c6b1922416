// A minimal OpenAI-format upstream for benchmarks, run as its own process on 127.0.0.1.
// Prints its port on stdout. Non-streamed completions answer at once; streamed ones send
// CHUNKS chunks spaced by CHUNK_MS milliseconds.
import http from 'node:http';

const CHUNKS = Number(process.env.CHUNKS ?? 8);
const CHUNK_MS = Number(process.env.CHUNK_MS ?? 2);
const completion = JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  created: 1,
  model: 'bench-model',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello from the bench upstream.' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 },
});
const models = JSON.stringify({ object: 'list', data: [{ id: 'bench-model', object: 'model', created: 1, owned_by: 'bench' }] });

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    if (req.method === 'GET') {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(models) });
      res.end(models);
      return;
    }
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
    if (!body.stream) {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(completion) });
      res.end(completion);
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    res.flushHeaders();
    for (let i = 0; i < CHUNKS && !res.destroyed; i++) {
      res.write(`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"t${i} "}}]}\n\n`);
      await new Promise((r) => setTimeout(r, CHUNK_MS));
    }
    res.end('data: [DONE]\n\n');
  });
});
server.keepAliveTimeout = 30_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
process.on('SIGTERM', () => process.exit(0));
