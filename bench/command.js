// A command (stdio) MCP server's tools/call through svc against the same server behind
// supergateway (stdio to Streamable HTTP, stateful: a process per session, as svc runs it), in
// one interleaved run; then what an idle process costs svc and svc's memory with 50 open sessions.
// supergateway is fetched from the npm registry into a temp folder the first time (SUPERGATEWAY=
// a path to its bin instead).
import { execFileSync } from 'node:child_process';
import { request as raw } from 'node:http';
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { adminClient, cpuMs, fmt, freePort, interleavedMany, request, startProcess, startSvc, stop, warmUp } from './lib/harness.js';

export const name = 'command';
export const description = 'tools/call to a command MCP server through svc against supergateway, idle CPU and memory with 50 sessions';

const TARGETS = { p50OverSupergatewayMs: 0.2, rssFor50MiB: 30 };
const SERVER = path.resolve('bench/lib/mcp-stdio-server.js');
const call = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'add', arguments: { a: 2, b: 3 } } });
const init = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench', version: '1' } } });
const initialized = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' });
const mcpHeaders = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Protocol-Version': '2025-06-18' };

/** supergateway's entry script (run with this Node). */
function supergatewayScript() {
  if (process.env.SUPERGATEWAY) return process.env.SUPERGATEWAY;
  const prefix = path.join(os.tmpdir(), 'svc-bench-supergateway');
  const script = path.join(prefix, 'node_modules', 'supergateway', 'dist', 'index.js');
  if (!existsSync(script)) execFileSync('npm', ['install', '--prefix', prefix, '--no-save', '--no-audit', '--no-fund', '--no-package-lock', 'supergateway@3'], { stdio: 'ignore' });
  return script;
}

function rssMiB(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)[1]) / 1024;
}

/** A session on `url`: initialize, then the initialized notification; answers the headers its calls carry. */
async function openSession(url, headers) {
  const sessionId = await new Promise((resolve, reject) => {
    const req = raw(url, { method: 'POST', headers: { ...headers, 'Content-Length': Buffer.byteLength(init) } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve(res.headers['mcp-session-id']) : reject(new Error(`initialize answered ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(init);
  });
  const withSession = { ...headers, 'Mcp-Session-Id': sessionId };
  await request(url, { method: 'POST', headers: withSession, body: initialized });
  return withSession;
}

async function svcWithCommandServer() {
  // 50 sessions and the latency one: past the default of 16 processes an instance
  const svc = await startSvc({ env: { SVC_STDIO_MAX_PROCESSES: '60' } });
  const admin = await adminClient(svc.base, svc.password);
  const made = await admin.call('POST', '/svc/v1/mcps', { name: 'bench-stdio', command: { command: process.execPath, args: [SERVER] } });
  if (made.status !== 201) throw new Error(`adding the command server answered ${made.status}: ${await made.text()}`);
  const { instance } = await made.json();
  const key = await admin.call('POST', '/svc/v1/keys', { name: 'bench', mcp_servers: [{ url: instance.url, instance_ids: [instance.id] }] });
  if (key.status !== 201) throw new Error(`making the key answered ${key.status}: ${await key.text()}`);
  const secret = (await key.json()).key;
  return { ...svc, url: `${svc.base}/svc/v1/apps/mcps/${instance.id}/mcp`, headers: { ...mcpHeaders, Authorization: `Bearer ${secret}` } };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export default async function runCommandBench(report) {
  const quick = process.env.BENCH_QUICK === '1';
  const rounds = quick ? 300 : 1500;
  const port = await freePort();
  const sg = await startProcess([supergatewayScript(), '--stdio', `${process.execPath} ${SERVER}`, '--outputTransport', 'streamableHttp', '--stateful', '--port', String(port), '--logLevel', 'info'], {
    ready: /Listening on port/,
  });
  const svc = await svcWithCommandServer();
  try {
    const viaSg = { url: `http://127.0.0.1:${port}/mcp`, headers: await openSession(`http://127.0.0.1:${port}/mcp`, mcpHeaders) };
    const viaSvc = { url: svc.url, headers: await openSession(svc.url, svc.headers) };
    await warmUp([viaSg, viaSvc], call);
    const { p50, p99, errors } = await interleavedMany({ supergateway: viaSg, svc: viaSvc }, call, rounds);
    report.line(`  ${rounds} interleaved tools/call rounds on one session each, ${errors} errors`);
    report.stat('p99 (ms)', `supergateway ${fmt(p99.supergateway)}, svc ${fmt(p99.svc)}`);

    // an idle process: what svc spends while its session waits
    await sleep(1000);
    const idleFrom = cpuMs(svc.pid);
    await sleep(5000);
    const idleCpu = cpuMs(svc.pid) - idleFrom;
    report.stat('svc CPU over 5 s with one idle command session', fmt(idleCpu, 0), 'ms');

    const before = rssMiB(svc.pid);
    for (let i = 0; i < 50; i++) await openSession(svc.url, svc.headers);
    await sleep(2000);
    const after = rssMiB(svc.pid);
    report.stat('svc RSS, one session / 51 sessions', `${fmt(before, 1)} / ${fmt(after, 1)}`, 'MiB');
    const added = p50.svc - p50.supergateway;
    return [
      {
        label: 'tools/call p50, svc over supergateway (ms)',
        value: `${fmt(added)} (supergateway ${fmt(p50.supergateway)}, svc ${fmt(p50.svc)})`,
        target: `<= ${TARGETS.p50OverSupergatewayMs}`,
        pass: added <= TARGETS.p50OverSupergatewayMs && errors === 0,
      },
      { label: 'idle command session, svc CPU in 5 s (ms)', value: fmt(idleCpu, 0), target: '0 (one 10 ms tick at most)', pass: idleCpu <= 10 },
      { label: 'svc RSS added by 50 more command sessions (MiB)', value: fmt(after - before, 1), target: `<= ${TARGETS.rssFor50MiB}`, pass: after - before <= TARGETS.rssFor50MiB },
    ];
  } finally {
    await svc.close();
    await stop(sg.child);
  }
}
