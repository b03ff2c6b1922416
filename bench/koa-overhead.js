// What Koa itself costs a request, apart from what svc does in it: the same answer from a bare
// node:http handler, from Koa with five pass-through middleware, and from Koa with those and
// @koa/router holding the data plane's seven routes (and allowedMethods), each server in a
// process of its own, CPU read from /proc over the same sequential load, interleaved.
// Run: node bench/koa-overhead.js   (ROUNDS=N; Linux only)
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';

const ANSWER = JSON.stringify({ id: 'x', object: 'chat.completion', choices: [{ message: { role: 'assistant', content: 'hi' } }] });
const MODES = ['plain', 'koa', 'koa+router'];

function serve(mode) {
  const require = createRequire(import.meta.url);
  const answer = (res) => {
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(ANSWER) });
    res.end(ANSWER);
  };
  let handler;
  if (mode === 'plain') {
    handler = (req, res) => {
      req.resume();
      req.on('end', () => answer(res));
    };
  } else {
    const Koa = require('koa');
    const Router = require('@koa/router');
    const app = new Koa();
    // as svc's handlers do: read the body raw, then answer on the response itself
    const send = (ctx) =>
      new Promise((resolve) => {
        ctx.req.resume();
        ctx.req.on('end', () => {
          ctx.respond = false;
          answer(ctx.res);
          resolve();
        });
      });
    for (let i = 0; i < 5; i++) {
      app.use(async (ctx, next) => {
        ctx.set(`X-Step-${i}`, 'v');
        await next();
      });
    }
    if (mode === 'koa') app.use(send);
    else {
      const router = new Router();
      router.get('/v1/models', send);
      router.get('/v1/models/*id', send);
      for (const p of ['/v1/chat/completions', '/v1/embeddings', '/v1/completions', '/v1/responses', '/mcp/:id']) router.post(p, send);
      app.use(router.routes());
      app.use(router.allowedMethods());
    }
    handler = app.callback();
  }
  const server = http.createServer(handler);
  server.listen(0, '127.0.0.1', () => console.log(server.address().port));
}

function cpuMs(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function start(mode) {
  const child = spawn(process.execPath, [new URL(import.meta.url).pathname, 'serve', mode], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve) => child.stdout.once('data', (d) => resolve(Number(String(d).trim()))));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const call = () =>
    new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, path: '/v1/chat/completions', method: 'POST', agent, headers: { 'Content-Type': 'application/json' } }, (res) => {
        res.resume();
        res.on('end', resolve);
      });
      req.on('error', reject);
      req.end('{"model":"m","messages":[{"role":"user","content":"hi"}]}');
    });
  return { mode, child, call };
}

async function measure() {
  const rounds = Number(process.env.ROUNDS ?? 20_000);
  const servers = await Promise.all(MODES.map(start));
  for (let i = 0; i < 2000; i++) for (const s of servers) await s.call();
  const before = servers.map((s) => cpuMs(s.child.pid));
  for (let i = 0; i < rounds; i++) for (const s of servers) await s.call();
  const perCall = servers.map((s, i) => ((cpuMs(s.child.pid) - before[i]) * 1000) / rounds);
  for (const [i, s] of servers.entries()) {
    console.log(`${s.mode.padEnd(11)} ${perCall[i].toFixed(1).padStart(6)} µs a request${i ? ` (+${(perCall[i] - perCall[0]).toFixed(1)} over plain)` : ''}`);
    s.child.kill();
  }
}

if (process.argv[2] === 'serve') serve(process.argv[3]);
else await measure();
