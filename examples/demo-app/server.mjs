#!/usr/bin/env node
// The demo third-party app: a static page on 127.0.0.1 that asks svc for access, has the user
// review it, gets a token with authorization code + PKCE, and uses it.
//
//   CLIENT=$(svc clients add "Demo App" --redirect-uri http://127.0.0.1:5173/callback --public)
//   node examples/demo-app/server.mjs --client-id "$CLIENT"
//
// Then open http://127.0.0.1:5173/. It finds the svc daemon of its data dir as the svc CLI does
// (--data-dir, else SVC_HOME, else $XDG_DATA_HOME/svc or ~/.local/share/svc), whatever its port;
// --svc URL (or SVC_URL) names one instead.
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

/** A mistake in how the demo app was started: one line, and exit 2 (as the svc CLI's usage errors). */
function usage(text) {
  console.error(`demo app: ${text}`);
  process.exit(2);
}

const GET_ONE = 'Get one with: CLIENT=$(svc clients add "Demo App" --redirect-uri http://127.0.0.1:5173/callback --public)';

let values;
try {
  ({ values } = parseArgs({
    options: {
      svc: { type: 'string', default: process.env.SVC_URL || undefined },
      'data-dir': { type: 'string', default: process.env.SVC_HOME || undefined },
      'client-id': { type: 'string', default: process.env.DEMO_CLIENT_ID ?? '' },
      port: { type: 'string', default: process.env.DEMO_PORT ?? '5173' },
    },
  }));
} catch (err) {
  // node's own words for the mistake ("Option '--client-id <value>' argument missing"), never its stack
  usage(`${err.message}${/client-id/.test(err.message) ? `. ${GET_ONE}` : ''}`);
}
values['client-id'] = values['client-id'].trim();
if (!values['client-id']) usage(`--client-id is empty: the app needs the client id svc gave it. ${GET_ONE}, then --client-id "$CLIENT".`);

/** The data dir the svc CLI would use, with the same settings. */
function dataDir() {
  if (values['data-dir']) return path.resolve(values['data-dir']);
  const xdg = process.env.XDG_DATA_HOME;
  return path.join(xdg && path.isAbsolute(xdg) ? xdg : path.join(os.homedir(), '.local', 'share'), 'svc');
}

/** Where browsers and apps reach the running daemon: the daemon.json it keeps in its data dir. */
async function findSvc() {
  if (values.svc) return values.svc.replace(/\/$/, '');
  const dir = dataDir();
  try {
    const info = JSON.parse(await readFile(path.join(dir, 'daemon.json'), 'utf8'));
    return String(info.base_url ?? info.url).replace(/\/$/, '');
  } catch {
    console.error(`demo app: no svc daemon runs for the data dir ${dir}. Start one with \`svc serve\` (or pass --svc URL, or --data-dir DIR).`);
    process.exit(1);
  }
}

const svc = await findSvc();

const files = { '/': 'index.html', '/app.js': 'app.js', '/callback': 'callback.html' };
const types = { html: 'text/html; charset=utf-8', js: 'text/javascript; charset=utf-8' };

const server = http.createServer(async (req, res) => {
  const path = new URL(req.url ?? '/', 'http://x').pathname;
  if (path === '/config.json') {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ svc, clientId: values['client-id'], redirectUri: `http://127.0.0.1:${server.address().port}/callback` }));
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
  console.log(`demo app on http://127.0.0.1:${server.address().port}/ (svc at ${svc}, client ${values['client-id']})`);
});
