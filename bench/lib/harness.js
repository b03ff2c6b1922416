// Shared pieces of the benchmarks: child processes, a real svc daemon with a real app token,
// a keep-alive HTTP client, and statistics.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as oidc from 'openid-client';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Starts a node script and resolves with the first stdout line that matches `ready`. */
export function startProcess(args, { env = {}, ready = /^(\d+)$/m } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${args.join(' ')} did not start:\n${out}`)), 20_000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = ready.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, match: m, output: () => out });
      }
    });
    child.stderr.on('data', (d) => (out += d));
    child.on('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}:\n${out}`)));
  });
}

export function stop(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 5000).unref();
  });
}

/** Peak resident memory (VmHWM) of a process, in MiB. */
export function peakRssMiB(pid) {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** One HTTP request; resolves with status, the time to the first body byte and the total time (ms). */
export function request(url, { method = 'GET', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const req = http.request(url, { method, headers: body ? { ...headers, 'Content-Length': Buffer.byteLength(body) } : headers, agent }, (res) => {
      let first = null;
      res.on('data', () => {
        if (first === null) first = performance.now() - start;
      });
      res.on('end', () => resolve({ status: res.statusCode, firstByte: first ?? performance.now() - start, total: performance.now() - start }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export const fmt = (n, digits = 3) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

/**
 * A real `svc serve` (its own process, temp data dir, file-held master key) with a provider,
 * an OAuth client, an approved grant and an access token from the real authorization-code flow.
 */
export async function startSvcWithToken({ upstreamUrl, mcpUrl, role = 'scope_user_user', env = {}, nodeArgs = [] }) {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-'));
  // BENCH_PROFILE=<dir>: the daemon writes a CPU and a heap-sampling profile there when it stops
  // (summarised by `node bench/lib/profile-summary.js <dir>`).
  // BENCH_NODE_ARGS: extra Node flags for the daemon alone (e.g. to compare V8 heap settings in one run of the rest).
  if (process.env.BENCH_NODE_ARGS) nodeArgs = [...nodeArgs, ...process.env.BENCH_NODE_ARGS.split(' ').filter(Boolean)];
  if (process.env.BENCH_PROFILE) nodeArgs = [...nodeArgs, '--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`, '--heap-prof', `--heap-prof-dir=${process.env.BENCH_PROFILE}`];
  const daemon = await startProcess([...nodeArgs, 'bin/svc.js', 'serve', '--port', '0', '--data-dir', dataDir, '--log-level', 'warn'], {
    env: { SVC_KEYCHAIN: 'file', SVC_RATE_LIMIT_CLIENT: '0', SVC_RATE_LIMIT_ADDRESS: '0', ...env },
    ready: /svc listening on (http:\/\/\S+)/,
  });
  const base = daemon.match[1];
  const password = /^\s{4}(\S+)$/m.exec(daemon.output())[1];
  const jar = new Map();
  const call = async (method, p, body, extra = {}) => {
    const res = await fetch(base + p, {
      method,
      redirect: 'manual',
      headers: { ...(body ? { 'Content-Type': 'application/json' } : {}), Cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; '), ...extra },
      body: body ? JSON.stringify(body) : undefined,
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const at = pair.indexOf('=');
      if (pair.slice(at + 1)) jar.set(pair.slice(0, at), pair.slice(at + 1));
    }
    return res;
  };
  await call('POST', '/svc/v1/auth/login', { username: 'admin', password });
  if (upstreamUrl) await call('POST', '/svc/v1/providers', { name: 'bench', base_url: upstreamUrl });
  const instanceId = mcpUrl ? (await (await call('POST', '/svc/v1/mcps', { name: 'bench', url: mcpUrl })).json()).instance.id : undefined;
  const redirect = 'http://127.0.0.1:65011/cb';
  const client = await (await call('POST', '/admin/v1/clients', { name: 'bench', redirect_uris: [redirect] })).json();
  const created = await (await call('POST', '/svc/v1/apps/request-access', { app_client_id: client.client.client_id, flow_type: 'popup', requested_role: role, requested: { version: '1', mcp_servers: mcpUrl ? [{ url: mcpUrl }] : [] } })).json();
  const approved = await (
    await call('PUT', `/svc/v1/access-requests/${created.id}/approve`, { approved_role: role, approved: { version: '1', mcp_servers: mcpUrl ? [{ url: mcpUrl, instance_ids: [instanceId] }] : [] } })
  ).json();
  const config = await oidc.discovery(new URL(`${base}/oauth`), client.client.client_id, undefined, oidc.ClientSecretBasic(client.client_secret), { execute: [oidc.allowInsecureRequests] });
  const verifier = oidc.randomPKCECodeVerifier();
  let url = oidc.buildAuthorizationUrl(config, { redirect_uri: redirect, scope: approved.access_request_scope, code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256' }).href;
  while (!url.startsWith(redirect)) {
    const res = await fetch(url, { redirect: 'manual', headers: { Cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') } });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const at = pair.indexOf('=');
      if (pair.slice(at + 1)) jar.set(pair.slice(0, at), pair.slice(at + 1));
    }
    url = new URL(res.headers.get('location'), url).href;
  }
  const tokens = await oidc.authorizationCodeGrant(config, new URL(url), { pkceCodeVerifier: verifier });
  return {
    base,
    pid: daemon.child.pid,
    password,
    token: tokens.access_token,
    instanceId,
    async close() {
      await stop(daemon.child);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * The same POST sent to both paths in turn, `rounds` times, so both see the same machine state.
 * Answers the p50 and p99 of `metric` ('total' or 'firstByte') for each path, and the errors.
 */
export async function interleaved(direct, proxied, body, rounds, metric = 'total') {
  const d = [];
  const s = [];
  let errors = 0;
  for (let i = 0; i < rounds; i++) {
    const a = await request(direct.url, { method: 'POST', headers: direct.headers, body });
    const b = await request(proxied.url, { method: 'POST', headers: proxied.headers, body });
    if (a.status !== 200 || b.status !== 200) errors++;
    d.push(a[metric]);
    s.push(b[metric]);
  }
  d.sort((x, y) => x - y);
  s.sort((x, y) => x - y);
  return {
    p50: { direct: percentile(d, 50), svc: percentile(s, 50) },
    p99: { direct: percentile(d, 99), svc: percentile(s, 99) },
    errors,
  };
}

/**
 * The same POST sent to every path in turn, `rounds` times, so all see the same machine state.
 * Answers the p50 and p99 of `metric` per path name, and the errors.
 */
export async function interleavedMany(paths, body, rounds, metric = 'total') {
  const samples = Object.fromEntries(Object.keys(paths).map((k) => [k, []]));
  let errors = 0;
  for (let i = 0; i < rounds; i++) {
    for (const [name, p] of Object.entries(paths)) {
      const r = await request(p.url, { method: 'POST', headers: p.headers, body });
      if (r.status !== 200) errors++;
      samples[name].push(r[metric]);
    }
  }
  const p50 = {};
  const p99 = {};
  for (const [name, list] of Object.entries(samples)) {
    list.sort((x, y) => x - y);
    p50[name] = percentile(list, 50);
    p99[name] = percentile(list, 99);
  }
  return { p50, p99, errors };
}
