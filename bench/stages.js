// The hot-path budget (`npm run bench -- --stages`): what each stage of a /v1 chat call and of an
// MCP tools/call costs in CPU, read by building the pieces up. Each stage is a server of its own
// process, all in front of the same upstream, called one request at a time in blocks that take
// turns (interleaved, so all see the same machine); each one's CPU (user + system, from /proc) is
// divided by the calls it served. A stage's cost is its figure minus the one before it.
import { cpuMs, fmt, freePort, request, startProcess, startSvcWithToken, stop, warmUp } from './lib/harness.js';

const cpuUs = (pid) => cpuMs(pid) * 1000;

export const name = 'stages';
export const description = 'CPU per call of each stage of the hot path, built up piece by piece (interleaved, one in flight)';

const chatBody = JSON.stringify({ model: 'bench-model', max_tokens: 64, messages: [{ role: 'user', content: 'Say hello.' }] });
const mcpBody = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'add', arguments: { a: 2, b: 3 } } });
const mcpHeaders = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Protocol-Version': '2025-06-18' };
const json = { 'Content-Type': 'application/json' };

async function stageServer(stage, upstream) {
  const port = await freePort();
  const proc = await startProcess(['bench/lib/stage-server.js', stage], { env: { UPSTREAM: upstream, STAGE_PORT: String(port) } });
  return { proc, pid: proc.child.pid, url: `http://127.0.0.1:${port}/v1/chat/completions` };
}

/** The stages of each path, in build-up order, each `{ label, pid, url, headers, body }`. */
async function startStages(chatUpstream, mcpUpstream, closers) {
  const floorProc = await startProcess(['bench/lib/floor-proxy.js'], { env: { UPSTREAM: chatUpstream } });
  closers.push(() => stop(floorProc.child));
  const undici = await stageServer('undici', chatUpstream);
  const koa = await stageServer('koa', chatUpstream);
  const common = await stageServer('koa+common', chatUpstream);
  closers.push(() => stop(undici.proc.child), () => stop(koa.proc.child), () => stop(common.proc.child));
  const off = await startSvcWithToken({ upstreamUrl: chatUpstream, mcpUrl: mcpUpstream, env: { SVC_ACTIVITY: '0' } });
  closers.push(() => off.close());
  const on = await startSvcWithToken({ upstreamUrl: chatUpstream, mcpUrl: mcpUpstream });
  closers.push(() => on.close());
  const messages = await startSvcWithToken({ upstreamUrl: chatUpstream });
  closers.push(() => messages.close());
  const mcpFloorProc = await startProcess(['bench/lib/floor-proxy.js'], { env: { UPSTREAM: new URL(mcpUpstream).origin } });
  closers.push(() => stop(mcpFloorProc.child));
  const bearer = (svc) => ({ ...json, Authorization: `Bearer ${svc.token}` });
  const mcpOf = (svc) => ({ url: `${svc.base}/svc/v1/apps/mcps/${svc.instanceId}/mcp`, headers: { ...mcpHeaders, Authorization: `Bearer ${svc.token}` }, body: mcpBody });
  return {
    chat: [
      { label: 'floor proxy (node:http pass-through)', pid: floorProc.child.pid, url: `http://127.0.0.1:${floorProc.match[1]}/chat/completions`, headers: json, body: chatBody },
      { label: '+ undici client, body and answer parsed', pid: undici.pid, url: undici.url, headers: json, body: chatBody },
      { label: '+ Koa and @koa/router', pid: koa.pid, url: koa.url, headers: json, body: chatBody },
      { label: "+ svc's common middleware", pid: common.pid, url: common.url, headers: json, body: chatBody },
      { label: '+ Bearer, grant, limits, validation, forward (svc, activity off)', pid: off.pid, url: `${off.base}/v1/chat/completions`, headers: bearer(off), body: chatBody },
      { label: '+ activity recording (svc as shipped)', pid: on.pid, url: `${on.base}/v1/chat/completions`, headers: bearer(on), body: chatBody },
    ],
    messages: [{ label: '/v1/messages translated (svc as shipped)', pid: messages.pid, url: `${messages.base}/v1/messages`, headers: bearer(messages), body: chatBody }],
    mcp: [
      { label: 'floor proxy (node:http pass-through)', pid: mcpFloorProc.child.pid, url: `http://127.0.0.1:${mcpFloorProc.match[1]}/mcp`, headers: mcpHeaders, body: mcpBody },
      { label: '+ svc, activity off', pid: off.pid, ...mcpOf(off) },
      { label: '+ activity recording (svc as shipped)', pid: on.pid, ...mcpOf(on) },
    ],
  };
}

// Calls go to one stage in blocks of this many in a row, the stages taking turns: a process that
// has just been idle runs the same code two to three times slower, so call-by-call interleaving
// would charge each stage for the others' turns.
const BLOCK = 250;

/** Calls every stage `rounds` times, in turns of a block each; answers each one's CPU per call in µs. */
async function cpuPerCall(stages, rounds) {
  const spent = stages.map(() => 0);
  for (let done = 0; done < rounds; done += BLOCK) {
    const n = Math.min(BLOCK, rounds - done);
    for (const [i, s] of stages.entries()) {
      const before = cpuUs(s.pid);
      for (let k = 0; k < n; k++) {
        const r = await request(s.url, { method: 'POST', headers: s.headers, body: s.body });
        if (r.status !== 200) throw new Error(`stage "${s.label}" answered ${r.status}`);
      }
      spent[i] += cpuUs(s.pid) - before;
    }
  }
  return spent.map((us) => us / rounds);
}

function printTable(report, title, stages, perCall, baseline = 0) {
  report.line(`  ${title}`);
  report.line(`  ${'stage'.padEnd(66)} ${'µs/call'.padStart(8)} ${'added'.padStart(8)}`);
  stages.forEach((s, i) => {
    const added = i === 0 ? perCall[i] - baseline : perCall[i] - perCall[i - 1];
    report.line(`  ${s.label.padEnd(66)} ${fmt(perCall[i], 1).padStart(8)} ${(i === 0 && !baseline ? '' : fmt(added, 1)).padStart(8)}`);
  });
}

export default async function runStagesBench(report) {
  const quick = process.env.BENCH_QUICK === '1';
  const rounds = Number(process.env.STAGES_ROUNDS ?? (quick ? 2000 : 10_000));
  const closers = [];
  const upstream = await startProcess(['bench/lib/upstream-server.js']);
  closers.push(() => stop(upstream.child));
  const mcp = await startProcess(['bench/lib/mcp-server.js']);
  closers.push(() => stop(mcp.child));
  try {
    const chatUpstream = `http://127.0.0.1:${upstream.match[1]}/v1`;
    const { chat, messages, mcp: mcpStages } = await startStages(chatUpstream, `http://127.0.0.1:${mcp.match[1]}/mcp`, closers);
    // the MCP stages share two of the chat stages' daemons, so they are read in rounds of their own
    const chatAll = [...chat, ...messages];
    // until V8 has compiled what each stage runs (harness.js, WARM_CALLS)
    await warmUp(chatAll);
    const chatCpu = await cpuPerCall(chatAll, rounds);
    await warmUp(mcpStages);
    const mcpCpu = await cpuPerCall(mcpStages, Math.round(rounds / 2));
    report.line(`  ${rounds} interleaved chat rounds and ${Math.round(rounds / 2)} MCP rounds, one call in flight, in blocks of ${BLOCK} per stage; CPU per call from /proc`);
    printTable(report, '/v1/chat/completions', chat, chatCpu.slice(0, chat.length));
    const shipped = chatCpu[chat.length - 1];
    report.line(`  ${messages[0].label.padEnd(66)} ${fmt(chatCpu[chat.length], 1).padStart(8)} ${fmt(chatCpu[chat.length] - shipped, 1).padStart(8)} (over chat)`);
    printTable(report, 'MCP tools/call', mcpStages, mcpCpu);
    return [];
  } finally {
    for (const close of closers.reverse()) await close().catch(() => undefined);
  }
}
