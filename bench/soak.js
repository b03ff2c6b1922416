// A bounded soak: mixed chat, streamed chat, MCP tools/call and poll traffic at a fixed rate
// against one daemon, on loopback; reports errors and whether memory stays flat.
// `npm run bench -- --soak` (SOAK_SECONDS, default 120; SOAK_RATE requests/s, default 60).
import { readFileSync } from 'node:fs';
import { fmt, request, startProcess, startSvcWithToken, stop } from './lib/harness.js';

export const name = 'soak';
export const description = 'mixed traffic at a fixed rate for a bounded time: zero errors and flat memory';

const rssMiB = (pid) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;

export default async function runSoak(report) {
  const seconds = Number(process.env.SOAK_SECONDS ?? 120);
  const rate = Number(process.env.SOAK_RATE ?? 60);
  const upstream = await startProcess(['bench/lib/upstream-server.js'], { env: { CHUNKS: '8', CHUNK_MS: '5' } });
  const mcp = await startProcess(['bench/lib/mcp-server.js']);
  const svc = await startSvcWithToken({ upstreamUrl: `http://127.0.0.1:${upstream.match[1]}/v1`, mcpUrl: `http://127.0.0.1:${mcp.match[1]}/mcp` });
  const auth = { Authorization: `Bearer ${svc.token}`, 'Content-Type': 'application/json' };
  const chat = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'hi' }] });
  const streamed = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'hi' }], stream: true });
  const toolCall = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'add', arguments: { a: 1, b: 2 } } });
  const created = await (await fetch(`${svc.base}/svc/v1/apps/request-access`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ app_client_id: 'soak', flow_type: 'popup', requested_role: 'scope_user_user', requested: { version: '1' } }) })).json();
  const kinds = [
    () => request(`${svc.base}/v1/chat/completions`, { method: 'POST', headers: auth, body: chat }),
    () => request(`${svc.base}/v1/chat/completions`, { method: 'POST', headers: auth, body: streamed }),
    () => request(`${svc.base}/svc/v1/apps/mcps/${svc.instanceId}/mcp`, { method: 'POST', headers: { ...auth, Accept: 'application/json, text/event-stream' }, body: toolCall }),
    () => request(`${svc.base}/svc/v1/apps/access-requests/${created.id}?app_client_id=soak`),
  ];
  const counts = kinds.map(() => ({ ok: 0, errors: 0 }));
  const samples = [];
  const inflight = new Set();
  try {
    const started = performance.now();
    let sent = 0;
    let nextSample = 0;
    while (performance.now() - started < seconds * 1000) {
      const elapsed = performance.now() - started;
      if (elapsed >= nextSample) {
        samples.push({ t: elapsed / 1000, rss: rssMiB(svc.pid) });
        nextSample += 5000;
      }
      const due = Math.floor((elapsed / 1000) * rate);
      while (sent < due) {
        const k = sent % kinds.length;
        const p = kinds[k]()
          .then((r) => counts[k][r.status === 200 ? 'ok' : 'errors']++, () => counts[k].errors++)
          .finally(() => inflight.delete(p));
        inflight.add(p);
        sent++;
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    await Promise.all(inflight);
    samples.push({ t: (performance.now() - started) / 1000, rss: rssMiB(svc.pid) });
  } finally {
    await svc.close();
    await stop(upstream.child);
    await stop(mcp.child);
  }
  const errors = counts.reduce((a, c) => a + c.errors, 0);
  const total = counts.reduce((a, c) => a + c.ok + c.errors, 0);
  // memory after the first fifth (warm-up) against the end
  const warm = samples.filter((s) => s.t >= seconds / 5);
  const first = warm[0]?.rss ?? samples[0].rss;
  const last = samples[samples.length - 1].rss;
  const peak = Math.max(...samples.map((s) => s.rss));
  report?.stat('requests (chat / stream / mcp / poll)', counts.map((c) => `${c.ok}/${c.ok + c.errors}`).join('  '));
  report?.stat('RSS samples (MiB, every 5 s)', samples.map((s) => fmt(s.rss, 0)).join(' '));
  return [
    { label: `errors in ${total} requests over ${seconds} s at ${rate}/s`, value: String(errors), target: '0', pass: errors === 0 },
    { label: 'memory after warm-up: start -> end (MiB)', value: `${fmt(first, 1)} -> ${fmt(last, 1)} (peak ${fmt(peak, 1)})`, target: 'growth <= 15 MiB', pass: last - first <= 15 },
  ];
}
