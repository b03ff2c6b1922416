// A team server (svc on PostgreSQL) against the file store, in one run: what a chat pays over the
// floor proxy on each (interleaved, same upstream), and the p99 of the control plane's writes
// (create a request, approve it, revoke it) on each.
import { randomBytes } from 'node:crypto';
import { fmt, interleavedMany, percentile, request, startProcess, startSvcWithToken, stop } from './lib/harness.js';
import { benchPostgres } from './lib/postgres.js';

const TARGETS = { chatOverFileMs: 0.1, writeP99Ms: 15 };
const body = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'Say hello.' }] });

export const name = 'team';
export const description = 'a team server on PostgreSQL against the file store: chat overhead over the floor, create/approve/revoke p99';

/** A logged-in admin session on `base` (the password is the one the first start printed). */
async function adminSession(base, password) {
  const res = await fetch(`${base}/svc/v1/auth/login`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ username: 'admin', password }) });
  if (!res.ok) throw new Error(`login: ${res.status}`);
  return { 'Content-Type': 'application/json', Cookie: res.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ') };
}

/** Each of create, approve and revoke `rounds` times, one after the other; answers each one's p50 and p99 (ms). */
async function writes(base, session, rounds) {
  const times = { create: [], approve: [], revoke: [] };
  const timed = async (what, url, opts) => {
    const r = await request(url, opts);
    if (r.status >= 300) throw new Error(`${what}: ${r.status}`);
    times[what].push(r.total);
  };
  for (let i = 0; i < rounds; i++) {
    const created = await fetch(`${base}/svc/v1/apps/request-access`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ app_client_id: `bench-${i}`, flow_type: 'popup', requested_role: 'scope_user_user', requested: { version: '1', mcp_servers: [] } }),
    });
    if (created.status !== 201) throw new Error(`create: ${created.status}`);
    const { id } = await created.json();
    // the create above warms the path; the timed ones follow the same way
    await timed('create', `${base}/svc/v1/apps/request-access`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ app_client_id: `bench-b-${i}`, flow_type: 'popup', requested_role: 'scope_user_user', requested: { version: '1', mcp_servers: [] } }) });
    await timed('approve', `${base}/svc/v1/access-requests/${id}/approve`, { method: 'PUT', headers: session, body: JSON.stringify({ approved_role: 'scope_user_user', approved: { version: '1', mcp_servers: [] } }) });
    await timed('revoke', `${base}/svc/v1/access-requests/${id}/revoke`, { method: 'POST', headers: session });
  }
  const out = {};
  for (const [k, list] of Object.entries(times)) {
    list.sort((a, b) => a - b);
    out[k] = { p50: percentile(list, 50), p99: percentile(list, 99) };
  }
  return out;
}

export default async function runTeamBench(report, { quick = process.env.BENCH_QUICK === '1' } = {}) {
  const cluster = await benchPostgres();
  if (!cluster) {
    report.line('  skipped: no PostgreSQL server (install postgresql, or set SVC_BENCH_DATABASE_URL)');
    return [];
  }
  const upstream = await startProcess(['bench/lib/upstream-server.js'], { env: { CHUNKS: '8', CHUNK_MS: '2' } });
  const upstreamBase = `http://127.0.0.1:${upstream.match[1]}/v1`;
  const teamEnv = { SVC_DATABASE_URL: await cluster.createDatabase(), SVC_MASTER_KEY: randomBytes(32).toString('base64url'), SVC_MAX_DRAFTS: '1000000', SVC_MAX_DRAFTS_PER_CLIENT: '1000000' };
  const fileEnv = { SVC_MAX_DRAFTS: '1000000', SVC_MAX_DRAFTS_PER_CLIENT: '1000000' };
  const file = await startSvcWithToken({ upstreamUrl: upstreamBase, env: fileEnv });
  const team = await startSvcWithToken({ upstreamUrl: upstreamBase, env: teamEnv });
  const floorProc = await startProcess(['bench/lib/floor-proxy.js'], { env: { UPSTREAM: upstreamBase } });
  const results = [];
  const rounds = quick ? 500 : 2000;
  try {
    const paths = {
      floor: { url: `http://127.0.0.1:${floorProc.match[1]}/chat/completions`, headers: { 'Content-Type': 'application/json' } },
      file: { url: `${file.base}/v1/chat/completions`, headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${file.token}` } },
      team: { url: `${team.base}/v1/chat/completions`, headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${team.token}` } },
    };
    for (let i = 0; i < 300; i++) for (const p of Object.values(paths)) await request(p.url, { method: 'POST', headers: p.headers, body });
    const { p50, p99, errors } = await interleavedMany(paths, body, rounds);
    const row = (label, value, target, pass) => results.push({ label, value, target, pass });
    const overFile = p50.team - p50.floor - (p50.file - p50.floor);
    row('chat p50 over the floor, team minus file store (ms)', `${fmt(overFile)} (floor ${fmt(p50.floor)}, file ${fmt(p50.file)}, team ${fmt(p50.team)}; p99 file ${fmt(p99.file)}, team ${fmt(p99.team)}), errors ${errors}`, `<= ${TARGETS.chatOverFileMs}`, overFile <= TARGETS.chatOverFileMs && errors === 0);
    const writeRounds = quick ? 100 : 300;
    for (const [label, svc] of [['file store', file], ['team', team]]) {
      const w = await writes(svc.base, await adminSession(svc.base, svc.password), writeRounds);
      const worst = Math.max(w.create.p99, w.approve.p99, w.revoke.p99);
      const text = ['create', 'approve', 'revoke'].map((k) => `${k} p50 ${fmt(w[k].p50, 2)} p99 ${fmt(w[k].p99, 2)}`).join('; ');
      row(`create/approve/revoke on the ${label} (ms)`, text, `p99 < ${TARGETS.writeP99Ms}`, worst < TARGETS.writeP99Ms);
    }
  } finally {
    await file.close();
    await team.close();
    await stop(floorProc.child);
    await stop(upstream.child);
    await cluster.close();
  }
  report.line(`  ${rounds} interleaved chat rounds (floor, file store, team); PostgreSQL ${process.env.SVC_BENCH_DATABASE_URL ? 'given' : 'started for the run, fsync on'} on loopback`);
  return results;
}
