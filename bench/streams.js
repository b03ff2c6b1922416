// MCP GET streams at team scale (`npm run bench -- --streams`, STREAMS=N, default 2000): opens N
// streams through svc to one upstream and prints what each costs svc in memory, a chat's p50 with
// them open against without (interleaved in one run), and the upstream connections left once
// they are closed.
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { fmt, interleavedMany, startProcess, startSvcWithToken, stop } from './lib/harness.js';

export const name = 'streams';
export const description = 'N open MCP GET streams through svc: memory per stream, chat p50 beside them, connections left after';

const TARGETS = { kibPerStream: 30, p50AddedMs: 0.1 };
const rssKiB = (pid) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
const body = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'hi' }] });

function count(port) {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/count', agent: false }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve(JSON.parse(text)));
    }).on('error', reject);
  });
}

/** Opens one stream and resolves once its headers came; `close` ends it. */
function openStream(url, token, agent) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent, headers: { Authorization: `Bearer ${token}`, Accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        reject(new Error(`stream answered ${res.statusCode}`));
        return;
      }
      res.on('data', () => undefined);
      resolve({ close: () => req.destroy() });
    });
    req.on('error', reject);
  });
}

export default async function runStreamsBench(report) {
  const n = Number(process.env.STREAMS ?? 2000);
  const streamUp = await startProcess(['bench/lib/stream-upstream.js']);
  const chatUp = await startProcess(['bench/lib/upstream-server.js']);
  const streamPort = Number(streamUp.match[1]);
  const mcpUrl = `http://127.0.0.1:${streamPort}/mcp`;
  const svc = await startSvcWithToken({ upstreamUrl: `http://127.0.0.1:${chatUp.match[1]}/v1`, mcpUrl, env: { SVC_GRANT_STREAMS: '0', SVC_MAX_STREAMS: String(n + 100) } });
  const chat = { url: `${svc.base}/v1/chat/completions`, headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${svc.token}` } };
  const streamUrl = `${svc.base}/svc/v1/apps/mcps/${svc.instanceId}/mcp`;
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const streams = [];
  const results = [];
  try {
    const rounds = 1500;
    // warm, then a chat's p50 with no stream open
    await interleavedMany({ before: chat }, body, 300);
    const { p50: quiet } = await interleavedMany({ chat }, body, rounds);
    const before = rssKiB(svc.pid);
    const started = performance.now();
    for (let i = 0; i < n; i += 100) streams.push(...(await Promise.all(Array.from({ length: Math.min(100, n - i) }, () => openStream(streamUrl, svc.token, agent)))));
    const openMs = performance.now() - started;
    const held = await count(streamPort);
    const { p50: busy } = await interleavedMany({ chat }, body, rounds);
    const after = rssKiB(svc.pid);
    const perStream = (after - before) / n;
    for (const s of streams) s.close();
    streams.length = 0;
    let left = await count(streamPort);
    const deadline = Date.now() + 10_000;
    while ((left.open > 0 || left.connections > 0) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      left = await count(streamPort);
    }
    report?.stat(`streams opened (all at once, 100 at a time)`, `${n} in ${fmt(openMs / 1000, 1)} s`);
    report?.stat('streams the upstream held', held.open);
    report?.stat('svc RSS without streams / with them', `${fmt(before / 1024, 1)} / ${fmt(after / 1024, 1)} MiB`);
    results.push({ label: 'svc memory per open stream (KiB)', value: fmt(perStream, 1), target: `<= ${TARGETS.kibPerStream}`, pass: perStream <= TARGETS.kibPerStream && held.open === n });
    results.push({ label: `chat p50 beside ${n} open streams, added (ms)`, value: `${fmt(busy.chat - quiet.chat)} (without ${fmt(quiet.chat)}, with ${fmt(busy.chat)})`, target: `<= ${TARGETS.p50AddedMs}`, pass: busy.chat - quiet.chat <= TARGETS.p50AddedMs });
    results.push({ label: 'upstream streams and connections left after closing', value: `${left.open} streams, ${left.connections} connections`, target: '0 and 0', pass: left.open === 0 && left.connections === 0 });
  } finally {
    for (const s of streams) s.close();
    await svc.close();
    await stop(streamUp.child);
    await stop(chatUp.child);
  }
  return results;
}
