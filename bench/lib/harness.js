// Shared pieces of the benchmarks: child processes, a real svc daemon with a real app token,
// a keep-alive HTTP client, and statistics.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as oidc from 'openid-client';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Starts a node script and resolves with the first stdout line that matches `ready`. */
export function startProcess(args, { env = {}, ready = /^(\d+)$/m, stdin = false } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env }, stdio: [stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
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
 * A real `svc serve` (its own process, temp data dir, file-held master key). `password` is the
 * admin's, when this start printed one (a team replica joining a database set up by another does not).
 */
export async function startSvc({ env = {}, nodeArgs = [], bin = 'bin/svc.js' } = {}) {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-'));
  // BENCH_PROFILE=<dir>: the daemon writes a CPU and a heap-sampling profile there when it stops
  // (summarised by `node bench/lib/profile-summary.js <dir>`).
  // BENCH_NODE_ARGS: extra Node flags for the daemon alone (e.g. to compare V8 heap settings in one run of the rest).
  if (process.env.BENCH_NODE_ARGS) nodeArgs = [...nodeArgs, ...process.env.BENCH_NODE_ARGS.split(' ').filter(Boolean)];
  if (process.env.BENCH_PROFILE) nodeArgs = [...nodeArgs, '--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`, '--heap-prof', `--heap-prof-dir=${process.env.BENCH_PROFILE}`];
  const daemon = await startProcess([...nodeArgs, bin, 'serve', '--port', '0', '--data-dir', dataDir, '--log-level', 'warn'], {
    env: { SVC_KEYCHAIN: 'file', SVC_RATE_LIMIT_CLIENT: '0', SVC_RATE_LIMIT_ADDRESS: '0', ...env },
    ready: /svc listening on (http:\/\/\S+)/,
  });
  return {
    base: daemon.match[1],
    pid: daemon.child.pid,
    /** what the daemon printed so far (stdout and stderr) */
    output: daemon.output,
    password: /^\s{4}(\S+)$/m.exec(daemon.output())?.[1] ?? null,
    async close() {
      await stop(daemon.child);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A cookie-keeping client of svc at `base` (a daemon or a balancer), logged in as the admin. */
export async function adminClient(base, password) {
  const jar = new Map();
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  const keep = (res) => {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const at = pair.indexOf('=');
      if (pair.slice(at + 1)) jar.set(pair.slice(0, at), pair.slice(at + 1));
    }
    return res;
  };
  const call = async (method, p, body, extra = {}) =>
    keep(
      await fetch(base + p, {
        method,
        redirect: 'manual',
        headers: { ...(body ? { 'Content-Type': 'application/json' } : {}), Cookie: cookie(), ...extra },
        body: body ? JSON.stringify(body) : undefined,
      }),
    );
  const login = await call('POST', '/svc/v1/auth/login', { username: 'admin', password });
  if (!login.ok) throw new Error(`login on ${base}: ${login.status}`);
  /** the session's headers, for a JSON request sent another way */
  const headers = () => ({ 'Content-Type': 'application/json', Cookie: cookie() });
  return { base, call, cookie, keep, headers };
}

/** An OAuth client registered by `admin`, with its discovered configuration. */
export async function oauthClient(admin) {
  const redirect = 'http://127.0.0.1:65011/cb';
  const client = await (await admin.call('POST', '/admin/v1/clients', { name: 'bench', redirect_uris: [redirect] })).json();
  const config = await oidc.discovery(new URL(`${admin.base}/oauth`), client.client.client_id, undefined, oidc.ClientSecretBasic(client.client_secret), { execute: [oidc.allowInsecureRequests] });
  return { clientId: client.client.client_id, redirect, config };
}

/**
 * An access request for `client` approved by `admin`, and an access token for it from the real
 * authorization-code flow; answers the token and the access request's id.
 */
export async function grantToken(admin, client, { role = 'scope_user_user', mcpUrl, instanceId } = {}) {
  const created = await (await admin.call('POST', '/svc/v1/apps/request-access', { app_client_id: client.clientId, flow_type: 'popup', requested_role: role, requested: { version: '1', mcp_servers: mcpUrl ? [{ url: mcpUrl }] : [] } })).json();
  const approved = await (
    await admin.call('PUT', `/svc/v1/access-requests/${created.id}/approve`, { approved_role: role, approved: { version: '1', mcp_servers: mcpUrl ? [{ url: mcpUrl, instance_ids: [instanceId] }] : [] } })
  ).json();
  const verifier = oidc.randomPKCECodeVerifier();
  const { config, redirect } = client;
  let url = oidc.buildAuthorizationUrl(config, { redirect_uri: redirect, scope: approved.access_request_scope, code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256' }).href;
  while (!url.startsWith(redirect)) {
    const res = admin.keep(await fetch(url, { redirect: 'manual', headers: { Cookie: admin.cookie() } }));
    url = new URL(res.headers.get('location'), url).href;
  }
  const tokens = await oidc.authorizationCodeGrant(config, new URL(url), { pkceCodeVerifier: verifier });
  return { token: tokens.access_token, requestId: created.id };
}

/** Through `admin`: a provider at `upstreamUrl` and an MCP server at `mcpUrl` (each when given), and an app token. */
export async function setUpApp(admin, { upstreamUrl, mcpUrl, role = 'scope_user_user' } = {}) {
  if (upstreamUrl) await admin.call('POST', '/svc/v1/providers', { name: 'bench', base_url: upstreamUrl });
  const instanceId = mcpUrl ? (await (await admin.call('POST', '/svc/v1/mcps', { name: 'bench', url: mcpUrl })).json()).instance.id : undefined;
  const client = await oauthClient(admin);
  const { token } = await grantToken(admin, client, { role, mcpUrl, instanceId });
  return { token, instanceId };
}

/**
 * A real `svc serve` (see startSvc) with a provider, an OAuth client, an approved grant and an
 * access token from the real authorization-code flow.
 */
export async function startSvcWithToken({ upstreamUrl, mcpUrl, role = 'scope_user_user', env = {}, nodeArgs = [], bin }) {
  const svc = await startSvc({ env, nodeArgs, bin });
  try {
    const { token, instanceId } = await setUpApp(await adminClient(svc.base, svc.password), { upstreamUrl, mcpUrl, role });
    return { ...svc, token, instanceId };
  } catch (err) {
    await svc.close();
    throw err;
  }
}

/**
 * How many calls each path gets before anything is timed (`BENCH_WARM`). A daemon runs for months,
 * so what counts is its code once V8 has compiled it, and svc's is much more code than the floor
 * proxy's: counted with `--trace-opt`, a chat path still had 179 TurboFan compilations (440 ms of
 * a helper thread's CPU, 146 µs a call) in the 3,000 calls after a warm-up of 500, 26 after 3,000,
 * 4 after 10,000 and none after 30,000; an MCP `tools/call` 27 after 3,000 and 1 after 15,000.
 * Timed after a short warm-up, svc's CPU a call read 831 µs against 456 after 30,000 calls, in
 * the same run (the floor proxy's 231). 20,000 leaves a compilation or two, a few µs a call.
 */
export const WARM_CALLS = Number(process.env.BENCH_WARM ?? (process.env.BENCH_QUICK === '1' ? 2000 : 20_000));

/** Calls every target `calls` times, in turns, before anything is timed (see WARM_CALLS). */
export async function warmUp(targets, body, calls = WARM_CALLS) {
  for (let i = 0; i < calls; i++) {
    for (const t of targets) {
      const r = await request(t.url, { method: 'POST', headers: t.headers, body: t.body ?? body });
      if (r.status !== 200) throw new Error(`${t.label ?? t.url} answered ${r.status} while warming up`);
    }
  }
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
      // `calls`: this many in a row each round (a balancer over two daemons gets two, so that each
      // daemon serves as many calls a round as a daemon called alone)
      for (let c = 0; c < (p.calls ?? 1); c++) {
        const r = await request(p.url, { method: 'POST', headers: p.headers, body });
        if (r.status !== 200) errors++;
        samples[name].push(r[metric]);
      }
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

/**
 * bench/lib/balancer.js in its own process (as the floor proxy runs in its own). It listens at
 * once; `route(targets)` gives it the daemons to take turns on, once they run.
 */
export async function startBalancer() {
  const proc = await startProcess(['bench/lib/balancer.js'], { stdin: true });
  return {
    base: `http://127.0.0.1:${proc.match[1]}`,
    child: proc.child,
    route(targets) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`the balancer did not take its targets:\n${proc.output()}`)), 10_000);
        const heard = () => {
          if (!/^targets \d+$/m.test(proc.output())) return;
          clearTimeout(timer);
          proc.child.stdout.off('data', heard);
          resolve();
        };
        proc.child.stdout.on('data', heard);
        proc.child.stdin.write(`${targets.join(',')}\n`);
      });
    },
  };
}

/**
 * CPU time a process has used so far, in ms (Linux; NaN elsewhere): the scheduler's own count of
 * each of its threads' run time, in nanoseconds (`/proc/<pid>/task/<tid>/schedstat`), where the
 * kernel keeps it; else user + system time from `/proc/<pid>/stat`. The latter is charged in whole
 * ticks to whatever runs when a tick falls, so a block of a few hundred calls (tens of ms) read
 * that way is off by a tick or more: two copies of one build read tens of µs a call apart.
 */
export function cpuMs(pid) {
  const scheduled = scheduledMs(pid);
  return Number.isFinite(scheduled) ? scheduled : tickedMs(pid);
}

/** The sum of the threads' run time the scheduler counted (ns), in ms; NaN where it is not kept. */
function scheduledMs(pid) {
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      } catch {
        // a thread that ended meanwhile
      }
    }
    // a kernel without schedstats reads 0 for every thread
    return ns > 0 ? ns / 1e6 : NaN;
  } catch {
    return NaN;
  }
}

/** User + system time from /proc/<pid>/stat, in ms (10 ms ticks); the time of ended threads included. */
function tickedMs(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // the fields after the command name, which may itself hold spaces and parentheses
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return NaN;
  }
}

/** A loopback port free a moment ago, for a server that must be told its port before it starts. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}
