#!/usr/bin/env node
// The demo third-party app: a static page on 127.0.0.1 that asks svc for access, has the user
// review it, gets a token with authorization code + PKCE, and uses it.
//
//   svc clients add "Demo App" --redirect-uri http://127.0.0.1:5173/callback --public
//   node examples/demo-app/server.mjs --svc http://127.0.0.1:7878 --client-id <client_id>
//
// Then open http://127.0.0.1:5173/.
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    svc: { type: 'string', default: process.env.SVC_URL ?? 'http://127.0.0.1:7878' },
    'client-id': { type: 'string', default: process.env.DEMO_CLIENT_ID ?? '' },
    port: { type: 'string', default: process.env.DEMO_PORT ?? '5173' },
  },
});

const files = { '/': 'index.html', '/app.js': 'app.js', '/callback': 'callback.html' };
const types = { html: 'text/html; charset=utf-8', js: 'text/javascript; charset=utf-8' };

const server = http.createServer(async (req, res) => {
  const path = new URL(req.url ?? '/', 'http://x').pathname;
  if (path === '/config.json') {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ svc: values.svc.replace(/\/$/, ''), clientId: values['client-id'], redirectUri: `http://127.0.0.1:${server.address().port}/callback` }));
    return;
  }
  const file = files[path];
  if (!file) {
    res.writeHead(404).end('not found');
    return;
  }
  res.writeHead(200, { 'Content-Type': types[file.split('.').pop()], 'Cache-Control': 'no-store' });
  res.end(await readFile(new URL(file, import.meta.url)));
});
server.listen(Number(values.port), '127.0.0.1', () => {
  console.log(`demo app on http://127.0.0.1:${server.address().port}/ (svc at ${values.svc}, client ${values['client-id'] || '(set --client-id)'})`);
});
