// How svc's costs grow with what its store holds. Grows a store to 1,000, 10,000 and
// 50,000 access requests (seeded into db.json, as history would leave them) and measures at each
// size, through the public API of a real `svc serve`: db.json size, start time, create and approve
// p50/p99, the longest event-loop stall and the peak RSS. Then a mixed run (chat calls and creates
// at fixed rates) on the largest store against the same run on an empty one.
// `npm run bench -- --store`; MIXED_SECONDS (default 60), STORE_SIZES (default 1000,10000,50000).
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { fmt, peakRssMiB, percentile, startProcess, stop } from './lib/harness.js';

const TARGETS = { createP99Ms: 10, stallMs: 20, startS: 1.5, rssFactor: 1.3, chatP99Factor: 2 };
const SIZES = (process.env.STORE_SIZES ?? '1000,10000,50000').split(',').map(Number);
const MIXED_SECONDS = Number(process.env.MIXED_SECONDS ?? 60);
const stallMonitor = fileURLToPath(new URL('./lib/stall-monitor.js', import.meta.url));

function seedRecords(n, now) {
  const statuses = ['approved', 'denied', 'expired', 'revoked', 'failed'];
  return Array.from({ length: n }, (_, i) => {
    const created = new Date(now - (i % 1000) * 60_000).toISOString();
    const status = statuses[i % statuses.length];
    return {
      id: randomUUID(),
      app_client_id: `seed-app-${i % 500}`,
      flow_type: 'popup',
      requested_role: 'scope_user_user',
      requested: { version: '1', mcp_servers: [{ url: `http://127.0.0.1:9/mcp/${i % 50}` }, { url: 'http://127.0.0.1:9/other' }] },
      redirect_url: null,
      status,
      created_at: created,
      expires_at: created,
      updated_at: created,
      approved_role: status === 'approved' || status === 'revoked' ? 'scope_user_user' : null,
      approved: status === 'approved' || status === 'revoked' ? { version: '1', mcp_servers: [] } : null,
      user_id: null,
      decided_at: created,
      revoked_at: status === 'revoked' ? created : null,
      revoked_by: null,
      failure_reason: null,
    };
  });
}

/** Writes `db` as db.json the way svc writes its snapshots (one record per line), as a store that lived would have it. */
async function writeSeed(file, db) {
  const { writeSnapshot } = await import('../dist/store/snapshot.js');
  const { COLLECTION_KEYS, isCollection } = await import('../dist/store/tables.js');
  const contents = { seq: db.journal_seq ?? 0, collections: new Map(), docs: new Map() };
  for (const [name, value] of Object.entries(db)) {
    if (name === 'journal_seq') continue;
    if (!isCollection(name)) contents.docs.set(name, value);
    else if (COLLECTION_KEYS[name] === null) contents.collections.set(name, new Map(Object.entries(value)));
    else contents.collections.set(name, new Map(value.map((r) => [COLLECTION_KEYS[name](r), r])));
  }
  const { open } = await import('node:fs/promises');
  const handle = await open(file, 'w', 0o600);
  try {
    await writeSnapshot(handle, contents, (h, buf) => h.write(buf));
  } finally {
    await handle.close();
  }
}

async function daemon(dataDir, stallFile) {
  const started = performance.now();
  const d = await startProcess(
    ['bin/svc.js', 'serve', '--port', '0', '--data-dir', dataDir, '--log-level', 'warn', '--log-format', 'json', '--max-drafts', '1000000', '--max-drafts-per-client', '1000000', '--rate-limit-client', '0', '--rate-limit-address', '0', '--request-retention-days', '0', '--revoked-retention-days', '0'],
    { env: { SVC_KEYCHAIN: 'file', NODE_OPTIONS: `--import=${stallMonitor}`, STALL_FILE: stallFile }, ready: /svc listening on (http:\/\/\S+)/ },
  );
  return { ...d, base: d.match[1], startS: (performance.now() - started) / 1000, password: /^\s{4}(\S+)$/m.exec(d.output())?.[1] };
}

const json = (res) => res.json();
async function login(base, password) {
  const res = await fetch(`${base}/svc/v1/auth/login`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ username: 'admin', password }) });
  return res.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
}
const create = (base, i) =>
  fetch(`${base}/svc/v1/apps/request-access`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ app_client_id: `bench-${i}`, flow_type: 'popup', requested_role: 'scope_user_user', requested: { version: '1', mcp_servers: [{ url: 'http://127.0.0.1:9/mcp' }] } }),
  });
const readStall = (file) => {
  try {
    return Number(readFileSync(file, 'utf8'));
  } catch {
    return NaN;
  }
};
const resetStall = async (file) => {
  try {
    unlinkSync(file);
  } catch {
    /* not there yet */
  }
  await new Promise((r) => setTimeout(r, 600));
};

export const name = 'store';
export const description = 'costs as the store grows: 1k, 10k and 50k stored access requests, and a mixed run';

export default async function runStoreBench(report) {
  const root = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-store-'));
  const results = [];
  const rows = [];
  let password;
  try {
    // a first start makes the admin, the keys and the meta record; every size starts from a copy of it
    const template = path.join(root, 'template');
    const first = await daemon(template, path.join(root, 'stall-first'));
    password = first.password;
    await stop(first.child);
    const base = JSON.parse(readFileSync(path.join(template, 'db.json'), 'utf8'));
    const master = readFileSync(path.join(template, 'master.key'));
    const session = readFileSync(path.join(template, 'cli-session.json'));
    for (const size of SIZES) {
      const dir = path.join(root, `n${size}`);
      const stallFile = path.join(root, `stall-${size}`);
      rmSync(dir, { recursive: true, force: true });
      const db = { ...base, access_requests: seedRecords(size, Date.now()) };
      (await import('node:fs')).mkdirSync(dir, { recursive: true, mode: 0o700 });
      await writeSeed(path.join(dir, 'db.json'), db);
      writeFileSync(path.join(dir, 'master.key'), master, { mode: 0o600 });
      writeFileSync(path.join(dir, 'cli-session.json'), session, { mode: 0o600 });
      const d = await daemon(dir, stallFile);
      const cookie = await login(d.base, password);
      await resetStall(stallFile);
      const creates = [];
      const ids = [];
      for (let i = 0; i < 200; i++) {
        const t = performance.now();
        const res = await create(d.base, i);
        creates.push(performance.now() - t);
        ids.push((await json(res)).id);
      }
      const approves = [];
      for (const id of ids.slice(0, 100)) {
        const t = performance.now();
        await fetch(`${d.base}/svc/v1/access-requests/${id}/approve`, { method: 'PUT', headers: { 'Content-Type': 'application/json', Cookie: cookie, Origin: d.base }, body: JSON.stringify({ approved_role: 'scope_user_user' }) });
        approves.push(performance.now() - t);
      }
      await new Promise((r) => setTimeout(r, 600));
      const stall = readStall(stallFile);
      const rss = peakRssMiB(d.child.pid);
      await stop(d.child);
      creates.sort((a, b) => a - b);
      approves.sort((a, b) => a - b);
      const row = { size, mib: statSync(path.join(dir, 'db.json')).size / 2 ** 20, startS: d.startS, c50: percentile(creates, 50), c99: percentile(creates, 99), a50: percentile(approves, 50), a99: percentile(approves, 99), stall, rss };
      rows.push(row);
      report?.stat(`${size} requests: db.json ${fmt(row.mib, 1)} MiB, start ${fmt(row.startS, 2)} s`, `create p50/p99 ${fmt(row.c50, 1)}/${fmt(row.c99, 1)} ms, approve p50/p99 ${fmt(row.a50, 1)}/${fmt(row.a99, 1)} ms, longest stall ${fmt(row.stall, 1)} ms, peak RSS ${fmt(row.rss, 0)} MiB`);
      rmSync(dir, { recursive: true, force: true });
    }
    const largest = rows.at(-1);
    const smallest = rows[0];
    const push = (label, value, target, pass) => results.push({ label, value, target, pass });
    push(`create p99 at ${largest.size} stored (ms)`, fmt(largest.c99, 1), `<= ${TARGETS.createP99Ms}`, largest.c99 <= TARGETS.createP99Ms);
    push(`longest event-loop stall at ${largest.size} stored (ms)`, fmt(largest.stall, 1), `<= ${TARGETS.stallMs}`, largest.stall <= TARGETS.stallMs);
    push(`start at ${largest.size} stored (s)`, fmt(largest.startS, 2), `<= ${TARGETS.startS}`, largest.startS <= TARGETS.startS);
    push(`peak RSS at ${largest.size} vs ${smallest.size} stored`, `${fmt(largest.rss, 0)} vs ${fmt(smallest.rss, 0)} MiB (${fmt(largest.rss / smallest.rss, 2)}x)`, `<= ${TARGETS.rssFactor}x`, largest.rss <= TARGETS.rssFactor * smallest.rss);

    // mixed: 200 chat calls/s and 10 creates/s for MIXED_SECONDS, on the largest store and on an empty one
    const mixed = {};
    for (const [label, size] of [['empty', 0], [`${largest.size}`, largest.size]]) {
      const dir = path.join(root, `mixed-${size}`);
      (await import('node:fs')).mkdirSync(dir, { recursive: true, mode: 0o700 });
      await writeSeed(path.join(dir, 'db.json'), { ...base, access_requests: seedRecords(size, Date.now()) });
      writeFileSync(path.join(dir, 'master.key'), master, { mode: 0o600 });
      writeFileSync(path.join(dir, 'cli-session.json'), session, { mode: 0o600 });
      const upstream = await startProcess(['bench/lib/upstream-server.js']);
      const d = await daemon(dir, path.join(root, `stall-mixed-${size}`));
      const cookie = await login(d.base, password);
      const headers = { 'Content-Type': 'application/json', Cookie: cookie, Origin: d.base };
      await fetch(`${d.base}/svc/v1/providers`, { method: 'POST', headers, body: JSON.stringify({ name: 'bench', base_url: `http://127.0.0.1:${upstream.match[1]}/v1` }) });
      const key = (await json(await fetch(`${d.base}/svc/v1/keys`, { method: 'POST', headers, body: JSON.stringify({ name: 'bench' }) }))).key;
      const chatBody = JSON.stringify({ model: 'bench-model', messages: [{ role: 'user', content: 'hi' }] });
      const lat = [];
      let errors = 0;
      const inflight = new Set();
      const until = performance.now() + MIXED_SECONDS * 1000;
      let n = 0;
      while (performance.now() < until) {
        const tick = performance.now();
        for (let i = 0; i < 20; i++) {
          const t = performance.now();
          const p = fetch(`${d.base}/v1/chat/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` }, body: chatBody })
            .then(async (r) => {
              await r.arrayBuffer();
              if (r.status !== 200) errors++;
              lat.push(performance.now() - t);
            })
            .catch(() => errors++)
            .finally(() => inflight.delete(p));
          inflight.add(p);
        }
        const c = create(d.base, `mixed-${n++}`).then((r) => r.arrayBuffer().then(() => r.status !== 201 && errors++)).catch(() => errors++).finally(() => inflight.delete(c));
        inflight.add(c);
        await new Promise((r) => setTimeout(r, Math.max(0, 100 - (performance.now() - tick))));
      }
      await Promise.allSettled([...inflight]);
      lat.sort((a, b) => a - b);
      mixed[label] = { p99: percentile(lat, 99), calls: lat.length, errors };
      report?.stat(`mixed, ${label} store`, `chat p99 ${fmt(mixed[label].p99, 1)} ms over ${lat.length} calls, ${errors} errors`);
      await stop(d.child);
      await stop(upstream.child);
      rmSync(dir, { recursive: true, force: true });
    }
    const big = mixed[`${largest.size}`];
    push(`mixed run chat p99, ${largest.size} stored vs empty`, `${fmt(big.p99, 1)} vs ${fmt(mixed.empty.p99, 1)} ms (${fmt(big.p99 / mixed.empty.p99, 2)}x), errors ${big.errors + mixed.empty.errors}`, `<= ${TARGETS.chatP99Factor}x, 0 errors`, big.p99 <= TARGETS.chatP99Factor * mixed.empty.p99 && big.errors + mixed.empty.errors === 0);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  report?.line(`  ${MIXED_SECONDS} s mixed runs (200 chat calls/s + 10 creates/s); sizes ${SIZES.join(', ')}`);
  return results;
}
