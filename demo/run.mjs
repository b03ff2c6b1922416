#!/usr/bin/env node
// `npm run demo`: something to point svc at on a machine with no model server or MCP server yet.
// It starts a demo model server and a demo MCP server on 127.0.0.1, adds them to the running svc
// daemon of the data dir (as the provider `demo` and an MCP instance `demo-<port>`) through the
// CLI's own connection (the daemon's socket, with the CLI's login), prints what to try, and on
// Ctrl-C removes what it added.
import { parseArgs } from 'node:util';
import { CHAT_MODEL, EMBEDDING_MODEL, startModelServer } from './model-server.mjs';
import { DESTRUCTIVE_TOOL, READ_TOOL, startMcpServer } from './mcp-server.mjs';

let cli;
try {
  cli = await import('../dist/cli/client.js');
} catch {
  console.error('svc demo: the build is missing; run `npm run build` (npm ci does it) and try again.');
  process.exit(1);
}
const { DaemonClient } = cli;

let values;
try {
  ({ values } = parseArgs({ options: { 'data-dir': { type: 'string' } } }));
} catch (err) {
  // node's own words for the mistake, never its stack
  process.stderr.write(`svc demo: ${err.message} (it takes only --data-dir DIR)\n`);
  process.exit(2);
}
const PROVIDER = 'demo';

const say = (text) => process.stdout.write(`${text}\n`);
const fail = (text) => {
  process.stderr.write(`svc demo: ${text}\n`);
  process.exitCode = 1;
};
/** What the daemon or the CLI said, as the CLI would say it. */
const why = (err) => `${err?.message ?? err}${err?.code === 'login_required' ? ' (run `svc login`)' : ''}`;

const client = await DaemonClient.connect(values['data-dir'] ? { dataDir: values['data-dir'] } : {}, process.env);
let me;
try {
  me = (await client.request('GET', '/svc/v1/auth/me')).body.user;
} catch (err) {
  fail(why(err));
  process.exit();
}

const [model, mcp] = await Promise.all([startModelServer(), startMcpServer()]);
const added = { provider: false, instance: null };
let stopping = false;

/** Removes what the demo added, stops its servers; says what it could not remove. */
async function stop(signal) {
  if (stopping) return;
  stopping = true;
  const left = [];
  if (added.instance) {
    await client.request('DELETE', `/svc/v1/mcps/${added.instance.id}`).then(
      () => say(`Removed the MCP instance ${added.instance.name}.`),
      (err) => left.push([`the MCP instance ${added.instance.name} (${why(err)})`, `svc mcp remove ${added.instance.id}`]),
    );
  }
  if (added.provider) {
    await client.request('DELETE', `/svc/v1/providers/${PROVIDER}`).then(
      () => say(`Removed the provider ${PROVIDER}.`),
      (err) => left.push([`the provider ${PROVIDER} (${why(err)})`, `svc providers remove ${PROVIDER}`]),
    );
  }
  await Promise.all([model.close(), mcp.close()]);
  for (const [what, how] of left) fail(`left ${what}; remove it with: ${how}`);
  if (signal) say('The demo servers stopped.');
}
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.once(signal, () => void stop(signal).finally(() => process.exit()));

try {
  // The name is the demo's: one an earlier run left behind (a crash, a kill -9) is replaced.
  const existing = (await client.request('GET', '/svc/v1/providers')).body.data.find((p) => p.name === PROVIDER);
  if (existing) {
    await client.request('DELETE', `/svc/v1/providers/${PROVIDER}`);
    say(`Replaced the provider ${PROVIDER} (at ${existing.base_url}) that an earlier demo left.`);
  }
  const provider = (await client.request('POST', '/svc/v1/providers', { name: PROVIDER, base_url: model.url })).body.provider;
  added.provider = true;
  if (provider.discovery_error) throw new Error(`svc could not list the demo models: ${provider.discovery_error}`);
  const port = new URL(mcp.url).port;
  added.instance = (await client.request('POST', '/svc/v1/mcps', { name: `demo-${port}`, url: mcp.url })).body.instance;
} catch (err) {
  fail(`could not set the demo up: ${why(err)}`);
  await stop();
  process.exit();
}

const i = added.instance;
say(`svc demo is running, added to the svc at ${client.info?.base_url ?? client.url} for ${me.username}:

  model server  ${model.url}  (provider ${PROVIDER}: models ${CHAT_MODEL}, ${EMBEDDING_MODEL})
  MCP server    ${mcp.url}  (instance ${i.name}, id ${i.id.slice(0, 8)}: tools ${READ_TOOL} read-only, ${DESTRUCTIVE_TOOL} destructive)

Try it from another terminal (the first line sets where things are):

  SVC=$(svc status --url) MCP=${mcp.url} INSTANCE=${i.id}
  KEY=$(svc keys create demo --mcp "$MCP=$INSTANCE" --expires 1h)
  curl -s "$SVC/v1/chat/completions" -H "Authorization: Bearer $KEY" \\
    -H 'Content-Type: application/json' -d '{"model":"${CHAT_MODEL}","messages":[{"role":"user","content":"Hello"}]}'
  curl -s -X POST "$SVC/svc/v1/apps/mcps/$INSTANCE/tools/${READ_TOOL}/execute" -H "Authorization: Bearer $KEY" \\
    -H 'Content-Type: application/json' -d '{"params":{}}'

An MCP host connects to ${i.proxy_url}
(it signs in through svc; you approve it on the review page or with \`svc review\`).

Ctrl-C stops the demo and removes the provider and the MCP instance (keys you made stay: svc keys list).`);
