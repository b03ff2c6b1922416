import { writeFileSync } from 'node:fs';
// svc's OpenAI-compatible proxy against the same upstream called directly, in one run.
import { cpuMs, fmt, interleavedMany, peakRssMiB, request, startProcess, startSvcWithToken, stop, WARM_CALLS, warmUp } from './lib/harness.js';

// The targets: p50, first chunk, CPU and throughput against the floor proxy (what no Node proxy
// can go below; the hot-path budget's, docs/performance.md), p99 over the upstream called directly.
const TARGETS = { p50OverFloorMs: 0.12, p99AddedMs: 1, throughputOverFloor: 1, ttfcOverFloorMs: 0.2, cpuOverFloor: 1.6, rssMiB: 140 };
const body = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'Say hello.' }] });
const streamBody = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'Say hello.' }], stream: true });


async function throughput(url, headers, inFlight, ms) {
  let ok = 0;
  let errors = 0;
  const until = performance.now() + ms;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < until) {
        const r = await request(url, { method: 'POST', headers, body }).catch(() => ({ status: 0 }));
        if (r.status === 200) ok++;
        else errors++;
      }
    }),
  );
  return { rps: ok / (ms / 1000), errors, requests: ok + errors };
}

export const name = 'proxy';
export const description = 'the OpenAI proxy against the same upstream called directly, in one run (interleaved)';

export default async function runProxyBench(report, { quick = process.env.BENCH_QUICK === '1' } = {}) {
  const upstream = await startProcess(['bench/lib/upstream-server.js'], { env: { CHUNKS: '8', CHUNK_MS: '2' } });
  const upstreamBase = `http://127.0.0.1:${upstream.match[1]}/v1`;
  const svc = await startSvcWithToken({ upstreamUrl: upstreamBase });
  // the same daemon with no activity recording, to show what recording costs in the same run
  const svcOff = await startSvcWithToken({ upstreamUrl: upstreamBase, env: { SVC_ACTIVITY: '0' } });
  const floorProc = await startProcess(['bench/lib/floor-proxy.js'], { env: { UPSTREAM: upstreamBase } });
  const floor = { url: `http://127.0.0.1:${floorProc.match[1]}/chat/completions`, headers: { 'Content-Type': 'application/json' } };
  const direct = { url: `${upstreamBase}/chat/completions`, headers: { 'Content-Type': 'application/json' } };
  const proxied = { url: `${svc.base}/v1/chat/completions`, headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${svc.token}` } };
  const unrecorded = { url: `${svcOff.base}/v1/chat/completions`, headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${svcOff.token}` } };
  const rounds = quick ? 500 : 3000;
  const results = [];
  try {
    // Serve as a daemon that has been running a while does: after an idle spell (the scrypt helper
    // of the token's login ends, the idle daemon hands memory back: src/store/memory.ts).
    const startupPeak = peakRssMiB(svc.pid);
    await new Promise((r) => setTimeout(r, quick ? 0 : 20_000));
    // warm every path until V8 has compiled what it runs (harness.js, WARM_CALLS), the streams too
    await warmUp([direct, floor, proxied, unrecorded], body);
    await warmUp([direct, floor, proxied, unrecorded], streamBody, Math.ceil(WARM_CALLS / 20));
    // Peak RSS while serving: forget the start-up peak (key generation, scrypt at login), keep the load's.
    try {
      writeFileSync(`/proc/${svc.pid}/clear_refs`, '5');
    } catch {
      /* not Linux, or not allowed: the lifetime peak is reported */
    }
    // latency and time to first streamed chunk, interleaved so the three paths see the same machine state
    // CPU per request over the whole timed load (latency, first chunk, throughput), svc against the floor
    const cpuBefore = { svc: cpuMs(svc.pid), floor: cpuMs(floorProc.child.pid) };
    const { p50, p99, errors: latencyErrors } = await interleavedMany({ direct, floor, svc: proxied, unrecorded }, body, rounds);
    const { p50: ttfc } = await interleavedMany({ direct, floor, svc: proxied, unrecorded }, streamBody, quick ? 100 : 400, 'firstByte');

    // throughput at 16 in flight, alternating slices so neither path gets the quieter machine
    const slice = quick ? 1000 : 2500;
    const tDirect = [];
    const tFloor = [];
    const tSvc = [];
    for (let i = 0; i < 2; i++) {
      tDirect.push(await throughput(direct.url, direct.headers, 16, slice));
      tFloor.push(await throughput(floor.url, floor.headers, 16, slice));
      tSvc.push(await throughput(proxied.url, proxied.headers, 16, slice));
    }
    const rpsDirect = tDirect.reduce((a, x) => a + x.rps, 0) / tDirect.length;
    const rpsFloor = tFloor.reduce((a, x) => a + x.rps, 0) / tFloor.length;
    const rpsSvc = tSvc.reduce((a, x) => a + x.rps, 0) / tSvc.length;
    const errors = tSvc.reduce((a, x) => a + x.errors, 0) + tDirect.reduce((a, x) => a + x.errors, 0) + latencyErrors;
    const rss = peakRssMiB(svc.pid);
    const served = rounds + (quick ? 100 : 400);
    const cpu = {
      svc: (cpuMs(svc.pid) - cpuBefore.svc) / (served + tSvc.reduce((a, x) => a + x.requests, 0)),
      floor: (cpuMs(floorProc.child.pid) - cpuBefore.floor) / (served + tFloor.reduce((a, x) => a + x.requests, 0)),
    };

    const row = (label, value, target, pass) => results.push({ label, value, target, pass });
    const over = (m) => `${fmt(m.svc - m.direct)}  (direct ${fmt(m.direct)}, floor proxy ${fmt(m.floor)}, svc ${fmt(m.svc)}; over the floor ${fmt(m.svc - m.floor)})`;
    const overFloor = (m) => `${fmt(m.svc - m.floor)}  (direct ${fmt(m.direct)}, floor proxy ${fmt(m.floor)}, svc ${fmt(m.svc)}; over direct ${fmt(m.svc - m.direct)})`;
    row('chat p50, svc over the floor proxy (ms)', overFloor(p50), `<= ${TARGETS.p50OverFloorMs}`, p50.svc - p50.floor <= TARGETS.p50OverFloorMs);
    row('chat p99 added latency (ms)', over(p99), `<= ${TARGETS.p99AddedMs}`, p99.svc - p99.direct <= TARGETS.p99AddedMs);
    row('throughput at 16 in flight (req/s)', `svc ${fmt(rpsSvc, 0)} vs direct ${fmt(rpsDirect, 0)}: ratio ${fmt(rpsSvc / rpsDirect, 2)} (floor proxy ${fmt(rpsFloor, 0)}: ratio ${fmt(rpsFloor / rpsDirect, 2)}; svc/floor ${fmt(rpsSvc / rpsFloor, 2)}), errors ${errors}`, `svc/floor >= ${TARGETS.throughputOverFloor} and 0 errors`, rpsSvc / rpsFloor >= TARGETS.throughputOverFloor && errors === 0);
    row('first streamed chunk p50, svc over the floor proxy (ms)', overFloor(ttfc), `<= ${TARGETS.ttfcOverFloorMs}`, ttfc.svc - ttfc.floor <= TARGETS.ttfcOverFloorMs);
    row('CPU per request, svc / floor proxy', `${fmt(cpu.svc / cpu.floor, 2)} (svc ${fmt(cpu.svc * 1000, 0)} µs, floor ${fmt(cpu.floor * 1000, 0)} µs)`, `<= ${TARGETS.cpuOverFloor}`, cpu.svc / cpu.floor <= TARGETS.cpuOverFloor);
    // what recording the activity costs: the same daemon without it, in the same interleaved rounds
    const recording = `p50 ${fmt(p50.svc - p50.unrecorded)}, p99 ${fmt(p99.svc - p99.unrecorded)}, first chunk ${fmt(ttfc.svc - ttfc.unrecorded)} (without recording: p50 ${fmt(p50.unrecorded)}, over the floor ${fmt(p50.unrecorded - p50.floor)})`;
    row('activity recording, added to svc (ms)', recording, '<= 0.05 at p50', p50.svc - p50.unrecorded <= 0.05);
    row('daemon peak RSS while serving (MiB)', `${fmt(rss, 1)} (start-up peak before the load ${fmt(startupPeak, 1)})`, `<= ${TARGETS.rssMiB}`, rss <= TARGETS.rssMiB);
  } finally {
    await svc.close();
    await svcOff.close();
    await stop(floorProc.child);
    await stop(upstream.child);
  }
  report?.line(`  ${rounds} interleaved latency rounds; each path measured with the same keep-alive client`);
  return results;
}
