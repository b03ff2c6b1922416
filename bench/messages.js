// Anthropic's /v1/messages translated onto the upstream's chat completions, against svc's own
// /v1/chat/completions on the same upstream and daemon, in one interleaved run.
import { cpuMs, fmt, interleavedMany, request, startProcess, startSvcWithToken, stop, WARM_CALLS, warmUp } from './lib/harness.js';

// The targets: what translating adds over the chat path it shares.
const TARGETS = { p50AddedMs: 0.05, ttfcAddedMs: 0.05, cpuRatio: 1.15 };
// One body fits both formats: a model, max_tokens and one user message of text.
const body = JSON.stringify({ model: 'bench-model', max_tokens: 64, messages: [{ role: 'user', content: 'Say hello.' }] });
const streamBody = JSON.stringify({ model: 'bench-model', max_tokens: 64, messages: [{ role: 'user', content: 'Say hello.' }], stream: true });

/** CPU per call of `n` calls of one path in a row, in ms. */
async function cpuPerCall(pid, path, body, n) {
  const before = cpuMs(pid);
  for (let i = 0; i < n; i++) await request(path.url, { method: 'POST', headers: path.headers, body });
  return (cpuMs(pid) - before) / n;
}

export const name = 'messages';
export const description = '/v1/messages translated against /v1/chat/completions, same upstream and daemon, one interleaved run';

export default async function runMessagesBench(report, { quick = process.env.BENCH_QUICK === '1' } = {}) {
  const upstream = await startProcess(['bench/lib/upstream-server.js'], { env: { CHUNKS: '8', CHUNK_MS: '2' } });
  const svc = await startSvcWithToken({ upstreamUrl: `http://127.0.0.1:${upstream.match[1]}/v1` });
  const headers = { 'Content-Type': 'application/json', Authorization: `Bearer ${svc.token}` };
  const chat = { url: `${svc.base}/v1/chat/completions`, headers };
  const messages = { url: `${svc.base}/v1/messages`, headers };
  const rounds = quick ? 500 : 3000;
  const results = [];
  try {
    // until V8 has compiled what each path runs (harness.js, WARM_CALLS), the streams too
    await warmUp([chat, messages], body);
    await warmUp([chat, messages], streamBody, Math.ceil(WARM_CALLS / 20));
    const { p50, p99, errors } = await interleavedMany({ chat, messages }, body, rounds);
    const { p50: ttfc, errors: streamErrors } = await interleavedMany({ chat, messages }, streamBody, quick ? 100 : 400, 'firstByte');
    // CPU in alternating blocks, so neither path gets the quieter machine
    const cpu = { chat: 0, messages: 0 };
    const blocks = quick ? 2 : 4;
    for (let b = 0; b < blocks; b++) {
      cpu.chat += (await cpuPerCall(svc.pid, chat, body, 500)) / blocks;
      cpu.messages += (await cpuPerCall(svc.pid, messages, body, 500)) / blocks;
    }
    const row = (label, value, target, pass) => results.push({ label, value, target, pass });
    row('p50, messages over chat (ms)', `${fmt(p50.messages - p50.chat)}  (chat ${fmt(p50.chat)}, messages ${fmt(p50.messages)}; p99 chat ${fmt(p99.chat)}, messages ${fmt(p99.messages)}), errors ${errors}`, `<= ${TARGETS.p50AddedMs}`, p50.messages - p50.chat <= TARGETS.p50AddedMs && errors === 0);
    row('first streamed event p50, messages over chat (ms)', `${fmt(ttfc.messages - ttfc.chat)}  (chat ${fmt(ttfc.chat)}, messages ${fmt(ttfc.messages)}), errors ${streamErrors}`, `<= ${TARGETS.ttfcAddedMs}`, ttfc.messages - ttfc.chat <= TARGETS.ttfcAddedMs && streamErrors === 0);
    row('CPU per request, messages / chat', `${fmt(cpu.messages / cpu.chat, 2)} (chat ${fmt(cpu.chat * 1000, 0)} µs, messages ${fmt(cpu.messages * 1000, 0)} µs)`, `<= ${TARGETS.cpuRatio}`, cpu.messages / cpu.chat <= TARGETS.cpuRatio);
  } finally {
    await svc.close();
    await stop(upstream.child);
  }
  report?.line(`  ${rounds} interleaved latency rounds on one daemon; the chat body carries max_tokens too, so both reserve alike`);
  return results;
}
