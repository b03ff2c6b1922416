// Builds of svc in one interleaved run (`BENCH_BASELINE=<checkout>[,<checkout>...] npm run bench
// -- --ab`): each baseline checkout's daemon and this one's, in front of the same upstreams, called
// in turns of a block each (as the stages bench does), so all see the same machine. Several
// baselines (one per step of a change, oldest first) give each step's figure from one run. Prints each one's CPU
// per call and p50 for a chat call, a streamed chat call's first chunk, a `/v1/messages` call and
// an MCP `tools/call`. It is how a hot-path change is measured against what it changes: the
// baseline is any built checkout (`git worktree add /tmp/base <commit> && cd /tmp/base && npm ci
// && npm run build`, or a copy of `bin/`, `dist/` and `package.json` beside a `node_modules` link).
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuMs, fmt, percentile, request, startProcess, startSvcWithToken, stop, WARM_CALLS, warmUp } from './lib/harness.js';

export const name = 'ab';
export const description = 'a baseline build of svc against this one, interleaved (BENCH_BASELINE=<checkout>)';

const BLOCK = 250;
const chatBody = JSON.stringify({ model: 'bench-model', max_tokens: 64, messages: [{ role: 'user', content: 'Say hello.' }] });
const streamBody = JSON.stringify({ model: 'bench-model', max_tokens: 64, messages: [{ role: 'user', content: 'Say hello.' }], stream: true });
const mcpBody = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'add', arguments: { a: 2, b: 3 } } });
const mcpHeaders = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Protocol-Version': '2025-06-18' };

/**
 * Each target's CPU per call (µs) and p50 of `metric` (ms) over `rounds` calls, in turns of a
 * block. The CPU figure is the mean of the turns' CPU per call with the fifth highest and lowest
 * left out, so a burst of the machine's other work (this runs on shared virtual CPUs) costs little.
 */
async function measure(targets, rounds, metric = 'total') {
  const perBlock = targets.map(() => []);
  const times = targets.map(() => []);
  for (let done = 0; done < rounds; done += BLOCK) {
    const n = Math.min(BLOCK, rounds - done);
    for (const [i, t] of targets.entries()) {
      const before = cpuMs(t.pid);
      for (let k = 0; k < n; k++) {
        const r = await request(t.url, { method: 'POST', headers: t.headers, body: t.body });
        if (r.status !== 200) throw new Error(`${t.label} answered ${r.status}`);
        times[i].push(r[metric]);
      }
      perBlock[i].push(((cpuMs(t.pid) - before) * 1000) / n);
    }
  }
  const trimmedMean = (xs) => {
    const sorted = [...xs].sort((a, b) => a - b);
    const cut = Math.floor(sorted.length / 5);
    const kept = sorted.slice(cut, sorted.length - cut);
    return kept.reduce((a, x) => a + x, 0) / kept.length;
  };
  return targets.map((t, i) => ({ cpuUs: trimmedMean(perBlock[i]), p50: percentile(times[i].sort((a, b) => a - b), 50) }));
}

const PHASE_TAP = fileURLToPath(new URL('./lib/phase-tap.js', import.meta.url));
const PHASES = ['toUpstream', 'answer', 'after', 'inSvc'];

/** Each daemon's phase medians since the last ask (the tap writes them on SIGUSR2), by the kind of call. */
async function phasesOf(daemons) {
  const read = [];
  for (const d of daemons) {
    rmSync(d.phases, { force: true });
    process.kill(d.svc.pid, 'SIGUSR2');
    const until = Date.now() + 5000;
    while (!existsSync(d.phases)) {
      if (Date.now() > until) throw new Error(`${d.label}: no phases written`);
      await new Promise((r) => setTimeout(r, 20));
    }
    await new Promise((r) => setTimeout(r, 20));
    read.push(JSON.parse(readFileSync(d.phases, 'utf8')));
  }
  return read;
}

/** The medians of the phases of each build's calls of one path, in µs, each step beside the build before. */
function reportPhases(report, daemons, phases) {
  const kind = Object.keys(phases[0]).sort((a, b) => phases[0][b].calls - phases[0][a].calls)[0];
  if (!kind) return;
  report.line(`  ${''.padEnd(26)} phases inside the daemon, medians in µs (${kind}): ${PHASES.join(', ')}`);
  daemons.forEach((d, i) => {
    const p = phases[i][kind] ?? {};
    const cells = PHASES.map((k) => {
      const step = i > 0 && p[k] != null && phases[i - 1][kind]?.[k] != null ? ` (${p[k] - phases[i - 1][kind][k] >= 0 ? '+' : ''}${fmt(p[k] - phases[i - 1][kind][k], 1)})` : '';
      return `${fmt(p[k], 1)}${step}`.padStart(18);
    });
    report.line(`  ${''.padEnd(26)} ${d.label.padEnd(12)} ${cells.join('')}`);
  });
}

export default async function runAbBench(report) {
  const baseline = process.env.BENCH_BASELINE;
  if (!baseline) throw new Error('set BENCH_BASELINE to a built checkout of svc to compare with');
  const rounds = Number(process.env.AB_ROUNDS ?? 6000);
  const closers = [];
  try {
    const upstream = await startProcess(['bench/lib/upstream-server.js'], { env: { CHUNKS: '8', CHUNK_MS: '2' } });
    closers.push(() => stop(upstream.child));
    const mcp = await startProcess(['bench/lib/mcp-server.js']);
    closers.push(() => stop(mcp.child));
    const chatUpstream = `http://127.0.0.1:${upstream.match[1]}/v1`;
    const mcpUrl = `http://127.0.0.1:${mcp.match[1]}/mcp`;
    const baselines = baseline.split(',').filter(Boolean);
    const builds = [
      ...baselines.map((dir) => ({ label: baselines.length === 1 ? 'baseline' : path.basename(path.resolve(dir)), bin: path.resolve(dir, 'bin/svc.js') })),
      { label: 'this build', bin: 'bin/svc.js' },
    ];
    // AB_PHASES=1: each daemon also times the phases of its calls inside (bench/lib/phase-tap.js)
    const phasesDir = process.env.AB_PHASES ? mkdtempSync(path.join(os.tmpdir(), 'svc-phases-')) : null;
    if (phasesDir) closers.push(async () => rmSync(phasesDir, { recursive: true, force: true }));
    const daemons = [];
    for (const [i, b] of builds.entries()) {
      const phases = phasesDir ? path.join(phasesDir, `${i}.json`) : null;
      const tap = phases ? { nodeArgs: ['--import', PHASE_TAP], env: { SVC_BENCH_PHASES: phases } } : {};
      const svc = await startSvcWithToken({ upstreamUrl: chatUpstream, mcpUrl, bin: b.bin, ...tap });
      closers.push(() => svc.close());
      daemons.push({ ...b, svc, phases });
    }
    // the floor proxy (a bare node:http pass-through) in the same turns, so each build's CPU reads as a multiple of it
    const floorProc = await startProcess(['bench/lib/floor-proxy.js'], { env: { UPSTREAM: chatUpstream } });
    closers.push(() => stop(floorProc.child));
    const floor = { label: 'floor', pid: floorProc.child.pid, url: `http://127.0.0.1:${floorProc.match[1]}/chat/completions`, headers: { 'Content-Type': 'application/json' } };
    const auth = (svc) => ({ 'Content-Type': 'application/json', Authorization: `Bearer ${svc.token}` });
    const paths = {
      chat: (svc) => ({ url: `${svc.base}/v1/chat/completions`, headers: auth(svc), body: chatBody }),
      'chat stream, first chunk': (svc) => ({ url: `${svc.base}/v1/chat/completions`, headers: auth(svc), body: streamBody, metric: 'firstByte' }),
      messages: (svc) => ({ url: `${svc.base}/v1/messages`, headers: auth(svc), body: chatBody }),
      'mcp tools/call': (svc) => ({ url: `${svc.base}/svc/v1/apps/mcps/${svc.instanceId}/mcp`, headers: { ...mcpHeaders, Authorization: `Bearer ${svc.token}` }, body: mcpBody }),
    };
    report.line(`  ${rounds} rounds a path (streams: a sixth), one call in flight, blocks of ${BLOCK} taking turns; CPU from /proc (the scheduler's ns count of every thread)`);
    report.line(`  ${'path'.padEnd(26)} ${'build'.padEnd(12)} ${'µs CPU/call'.padStart(12)} ${'p50 ms'.padStart(8)}`);
    // AB_PATHS=chat,stream,messages,mcp: only these paths (by the first word of their names, `stream` for the streamed chat)
    const only = process.env.AB_PATHS?.split(',');
    const shortName = (label) => (label.startsWith('chat stream') ? 'stream' : label.split(' ')[0]);
    for (const [label, of] of Object.entries(paths).filter(([l]) => !only || only.includes(shortName(l)))) {
      const targets = daemons.map((d) => ({ label: `${d.label} ${label}`, pid: d.svc.pid, ...of(d.svc) }));
      const withFloor = label.startsWith('chat');
      if (withFloor) targets.push({ ...floor, body: targets[0].body, metric: targets[0].metric });
      const floorAt = daemons.length;
      const metric = targets[0].metric ?? 'total';
      const n = metric === 'firstByte' ? Math.round(rounds / 6) : rounds;
      // until V8 has compiled what each build runs (harness.js, WARM_CALLS)
      await warmUp(targets, undefined, metric === 'firstByte' ? Math.ceil(WARM_CALLS / 20) : WARM_CALLS);
      if (phasesDir) await phasesOf(daemons);
      const results = await measure(targets, n, metric);
      const phases = phasesDir ? await phasesOf(daemons) : null;
      results.forEach((r, i) => {
        const vsFloor = withFloor && i < floorAt ? `  (${fmt(r.cpuUs / results[floorAt].cpuUs, 2)}x the floor's CPU, +${fmt(r.p50 - results[floorAt].p50)} ms)` : '';
        const step = i > 0 && i < daemons.length ? `  step ${fmt(r.cpuUs - results[i - 1].cpuUs, 1)} µs, ${fmt(r.p50 - results[i - 1].p50)} ms` : '';
        report.line(`  ${(i === 0 ? label : '').padEnd(26)} ${(daemons[i]?.label ?? 'floor proxy').padEnd(12)} ${fmt(r.cpuUs, 1).padStart(12)} ${fmt(r.p50).padStart(8)}${vsFloor}${step}`);
      });
      const last = daemons.length - 1;
      report.line(`  ${''.padEnd(26)} ${'in all'.padEnd(12)} ${fmt(results[last].cpuUs - results[0].cpuUs, 1).padStart(12)} ${fmt(results[last].p50 - results[0].p50).padStart(8)}`);
      if (phases) reportPhases(report, daemons, phases);
    }
    return [];
  } finally {
    for (const close of closers.reverse()) await close().catch(() => undefined);
  }
}
