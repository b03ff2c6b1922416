// One stage of the hot-path budget: a proxy of chat completions built up piece by piece, so that
// the difference between two stages is what the piece costs. Run by bench/stages.js as
// `node bench/lib/stage-server.js <stage>` with UPSTREAM set; prints its port.
//   undici      a node:http server; the body read whole and parsed, sent on with an undici Pool,
//               the answer read whole and its usage read, then written back (what any parsing
//               proxy on svc's client does)
//   koa         the same handler behind Koa and @koa/router holding the data plane's routes
//   koa+common  and behind svc's own common middleware (request id and log, error catch, security
//               headers, Host check, CORS), from dist/
import http from 'node:http';
import Router from '@koa/router';
import Koa from 'koa';
import { Pool } from 'undici';

const upstream = new URL(process.env.UPSTREAM);
const pool = new Pool(upstream.origin, { connections: 16 });
const stage = process.argv[2];

function readWhole(stream) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    stream.on('data', (c) => chunks.push(c));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}

/** The work every parsing proxy does: parse, forward, read the answer whole, read its usage, answer. */
async function forward(req, res) {
  const body = JSON.parse((await readWhole(req)).toString('utf8'));
  const answer = await pool.request({ path: `${upstream.pathname.replace(/\/$/, '')}/chat/completions`, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const whole = Buffer.from(await answer.body.arrayBuffer());
  JSON.parse(whole.toString('utf8')).usage;
  res.writeHead(answer.statusCode, { 'Content-Type': 'application/json', 'Content-Length': whole.length });
  res.end(whole);
}

async function koaHandler(withCommon) {
  const app = new Koa({ proxy: false });
  if (withCommon) {
    const { commonMiddleware } = await import('../../dist/app/planes.js');
    const { createLogger } = await import('../../dist/log.js');
    const hosts = new Set([`127.0.0.1:${process.env.STAGE_PORT ?? ''}`]);
    for (const mw of commonMiddleware(createLogger('warn'), 4 * 1024 * 1024, hosts)) app.use(mw);
  }
  const router = new Router();
  const send = async (ctx) => {
    ctx.respond = false;
    await forward(ctx.req, ctx.res);
  };
  router.get('/v1/models', send);
  for (const p of ['/v1/chat/completions', '/v1/embeddings', '/v1/completions', '/v1/responses', '/v1/messages', '/svc/v1/apps/mcps/:id/mcp']) router.post(p, send);
  app.use(router.routes());
  app.use(router.allowedMethods());
  return app.callback();
}

const handler =
  stage === 'undici'
    ? (req, res) => forward(req, res).catch(() => res.destroy())
    : await koaHandler(stage === 'koa+common');
const server = http.createServer(handler);
// the Host check needs the port before the first request; a fixed one keeps that simple
server.listen(Number(process.env.STAGE_PORT ?? 0), '127.0.0.1', () => console.log(server.address().port));
