// temporary: heap spaces of svc under 16-in-flight load, read through the inspector
import { readFileSync } from 'node:fs';
import WebSocket from 'ws';
import { request, startProcess, startSvcWithToken, stop } from './lib/harness.js';
const body = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'hi' }] });
const rss = (pid) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
const upstream = await startProcess(['bench/lib/upstream-server.js'], { env: { CHUNKS: '8', CHUNK_MS: '2' } });
const upstreamUrl = `http://127.0.0.1:${upstream.match[1]}/v1`;
const svc = await startSvcWithToken({ upstreamUrl, nodeArgs: ['--inspect=127.0.0.1:9339'], env: process.env.OFF ? { SVC_ACTIVITY: '0' } : {} });
const list = await (await fetch('http://127.0.0.1:9339/json/list')).json();
console.log('targets', list.length, list.map((t) => t.title));
const ws = new WebSocket(list[0].webSocketDebuggerUrl);
await new Promise((r) => ws.once('open', r));
let id = 0;
const call = (method, params = {}) => new Promise((resolve) => { const my = ++id; const on = (m) => { const msg = JSON.parse(m); if (msg.id === my) { ws.off('message', on); resolve(msg.result); } }; ws.on('message', on); ws.send(JSON.stringify({ id: my, method, params })); });
const MB = (n) => (n / 1048576).toFixed(1);
const sample = async (label) => {
  const r = await call('Runtime.evaluate', { expression: `JSON.stringify({m: process.memoryUsage(), s: require('v8').getHeapSpaceStatistics().map(s => [s.space_name, s.space_size, s.space_used_size])})`, returnByValue: true, includeCommandLineAPI: true });
  const v = JSON.parse(r.result.value);
  console.log(`${label}: rss ${MB(v.m.rss)} heapTotal ${MB(v.m.heapTotal)} heapUsed ${MB(v.m.heapUsed)} external ${MB(v.m.external)} arrayBuffers ${MB(v.m.arrayBuffers)} | ` + v.s.filter(([, size]) => size > 1048576).map(([n, size, used]) => `${n.replace('_space','')} ${MB(size)}/${MB(used)}`).join(' '));
};
console.log('svc pid', svc.pid, (await call('Runtime.evaluate', { expression: 'process.pid', returnByValue: true })).result.value);
await new Promise((r) => setTimeout(r, 20_000));
await sample('idle');
const url = `${svc.base}/v1/chat/completions`;
const headers = { 'Content-Type': 'application/json', Authorization: `Bearer ${svc.token}` };
let n = 0;
const until = performance.now() + 8000;
const load = Promise.all(Array.from({ length: 16 }, async () => { while (performance.now() < until) { await request(url, { method: 'POST', headers, body }); n++; } }));
for (let i = 0; i < 6; i++) { await new Promise((r) => setTimeout(r, 1200)); await sample(`load ${i}`); }
await load;
await sample('after');
console.log('requests', n);
ws.close();
await svc.close();
await stop(upstream.child);
