// temporary experiment: peak RSS of svc under the proxy bench's 16-in-flight load, per V8 setting
import { readFileSync, writeFileSync } from 'node:fs';
import { peakRssMiB, request, startProcess, startSvcWithToken, stop } from './lib/harness.js';
const body = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'hi' }] });
const rss = (pid) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
const cpu = (pid) => { const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' '); return (Number(f[11]) + Number(f[12])) * 10; };
const upstream = await startProcess(['bench/lib/upstream-server.js'], { env: { CHUNKS: '8', CHUNK_MS: '2' } });
const upstreamUrl = `http://127.0.0.1:${upstream.match[1]}/v1`;
const variants = process.argv.slice(2).length ? process.argv.slice(2) : [''];
const daemons = [];
for (const v of variants) {
  const [root, flags] = v.split('|');
  const h = await import(`${root || '/work/main'}/bench/lib/harness.js`);
  daemons.push({ v, svc: await h.startSvcWithToken({ upstreamUrl, nodeArgs: flags ? flags.split(',') : [] }) });
}
await new Promise((r) => setTimeout(r, 20_000));
for (const d of daemons) { d.idle = rss(d.svc.pid); writeFileSync(`/proc/${d.svc.pid}/clear_refs`, '5'); d.cpu0 = cpu(d.svc.pid); d.n = 0; }
for (let round = 0; round < 4; round++) {
  for (const d of daemons) {
    const url = `${d.svc.base}/v1/chat/completions`;
    const headers = { 'Content-Type': 'application/json', Authorization: `Bearer ${d.svc.token}` };
    const until = performance.now() + 2500;
    await Promise.all(Array.from({ length: 16 }, async () => { while (performance.now() < until) { await request(url, { method: 'POST', headers, body }); d.n++; } }));
  }
}
for (const d of daemons) console.log(`${d.v || 'default'}: idle ${d.idle.toFixed(1)} MiB, peak under load ${peakRssMiB(d.svc.pid).toFixed(1)} MiB, now ${rss(d.svc.pid).toFixed(1)}, cpu/req ${((cpu(d.svc.pid) - d.cpu0) * 1000 / d.n).toFixed(0)} µs over ${d.n}`);
for (const d of daemons) await d.svc.close();
await stop(upstream.child);
