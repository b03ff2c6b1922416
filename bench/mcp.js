// A tools/call through svc's Streamable HTTP MCP proxy against the same MCP server called
// directly and through the floor proxy (a bare node:http pass-through), in one run, interleaved.
import { fmt, interleavedMany, startProcess, startSvcWithToken, stop, warmUp } from './lib/harness.js';

export const name = 'mcp';
export const description = 'tools/call through the MCP proxy against the same MCP SDK server called directly and through the floor proxy (interleaved)';

// the hot-path budget's: over the floor proxy (docs/performance.md), and the older bar over the server called directly
const TARGET_OVER_FLOOR_MS = 0.15;
const TARGET_P50_ADDED_MS = 0.3;
const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'add', arguments: { a: 2, b: 3 } } });
const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Protocol-Version': '2025-06-18' };

export default async function runMcpBench(report) {
  const quick = process.env.BENCH_QUICK === '1';
  const upstream = await startProcess(['bench/lib/mcp-server.js']);
  const mcpUrl = `http://127.0.0.1:${upstream.match[1]}/mcp`;
  const svc = await startSvcWithToken({ mcpUrl });
  const floorProc = await startProcess(['bench/lib/floor-proxy.js'], { env: { UPSTREAM: `http://127.0.0.1:${upstream.match[1]}` } });
  const floor = { url: `http://127.0.0.1:${floorProc.match[1]}/mcp`, headers };
  const direct = { url: mcpUrl, headers };
  const proxied = { url: `${svc.base}/svc/v1/apps/mcps/${svc.instanceId}/mcp`, headers: { ...headers, Authorization: `Bearer ${svc.token}` } };
  const rounds = quick ? 300 : 1500;
  try {
    // until V8 has compiled what each path runs (harness.js, WARM_CALLS)
    await warmUp([direct, floor, proxied], body);
    const { p50, p99, errors } = await interleavedMany({ direct, floor, svc: proxied }, body, rounds);
    report?.line(`  ${rounds} interleaved tools/call rounds, ${errors} errors`);
    report?.stat('p99 added (ms)', `${fmt(p99.svc - p99.direct)} (direct ${fmt(p99.direct)}, floor proxy ${fmt(p99.floor)}, svc ${fmt(p99.svc)}; over the floor ${fmt(p99.svc - p99.floor)})`);
    return [
      {
        label: 'tools/call p50 added latency (ms)',
        value: `${fmt(p50.svc - p50.direct)} (direct ${fmt(p50.direct)}, floor proxy ${fmt(p50.floor)}, svc ${fmt(p50.svc)}; over the floor ${fmt(p50.svc - p50.floor)})`,
        target: `<= ${TARGET_P50_ADDED_MS}`,
        pass: p50.svc - p50.direct <= TARGET_P50_ADDED_MS && errors === 0,
      },
      {
        label: 'tools/call p50 over the floor proxy (ms)',
        value: `${fmt(p50.svc - p50.floor)} (floor proxy ${fmt(p50.floor)}, svc ${fmt(p50.svc)})`,
        target: `<= ${TARGET_OVER_FLOOR_MS}`,
        pass: p50.svc - p50.floor <= TARGET_OVER_FLOOR_MS && errors === 0,
      },
    ];
  } finally {
    await svc.close();
    await stop(floorProc.child);
    await stop(upstream.child);
  }
}
