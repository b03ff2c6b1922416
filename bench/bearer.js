// The Bearer check (decisions: Tokens) on a real daemon: BearerVerifier.verify with a warm signature
// cache (the per-call cost every app request pays), with a cold cache (a token never seen before:
// full ES256 verification), and the whole HTTP round trip of GET /svc/v1/apps/mcps for context.
// Tokens are signed with the daemon's own access-token key, opened from its store, and carry the
// claims the embedded issuer puts in its RFC 9068 tokens.
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { importJWK, SignJWT } from 'jose';
import { resolveConfig } from '../dist/config.js';
import { startDaemon } from '../dist/daemon.js';
import { createLogger } from '../dist/log.js';

export const name = 'bearer';
export const description = 'BearerVerifier.verify on a real daemon (signature cache + grant record check)';

const WARM_TARGET_US = 50;
const WARM_BUDGET_MS = 1000;
const COLD_TOKENS = 500;
const HTTP_BUDGET_MS = 1000;
const HTTP_MAX = 2000;

/** Runs `fn` until `budgetMs` passes or `max` calls; answers each call's duration in µs. */
async function timed(fn, { budgetMs, max = Infinity }) {
  const samples = [];
  const end = performance.now() + budgetMs;
  let i = 0;
  while (i < max && (i % 256 !== 0 || performance.now() < end)) {
    const t0 = performance.now();
    await fn(i);
    samples.push((performance.now() - t0) * 1000);
    i++;
  }
  return samples;
}

function summary(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  const mean = samples.reduce((s, x) => s + x, 0) / samples.length;
  return { n: samples.length, mean, p50: at(0.5), p99: at(0.99) };
}

const us = (x) => x.toFixed(1);

async function json(res) {
  const text = await res.text();
  if (!res.ok) throw new Error(`${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

export default async function bearer(report) {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'svc-bench-'));
  const config = resolveConfig({ host: '127.0.0.1', port: 0, dataDir, keychain: 'file', logLevel: 'silent' }, {});
  const t0 = performance.now();
  const d = await startDaemon({ config, logger: createLogger('silent'), notify: () => undefined });
  report.stat('daemon start (fresh data dir)', (performance.now() - t0).toFixed(0), 'ms');
  try {
    // an approved grant for an app, approved by the first admin
    const login = await fetch(`${d.url}/svc/v1/auth/login`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ username: 'admin', password: d.initialAdminPassword }),
    });
    const me = await json(login);
    const cookie = login.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
    const session = { 'Content-Type': 'application/json', Cookie: cookie };
    const mcpUrl = 'http://127.0.0.1:9/mcp';
    const instance = await json(await fetch(`${d.url}/svc/v1/mcps`, { method: 'POST', headers: session, body: JSON.stringify({ name: 'bench', url: mcpUrl }) }));
    const clientId = 'bench-app';
    const created = await json(
      await fetch(`${d.url}/svc/v1/apps/request-access`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ app_client_id: clientId, flow_type: 'popup', requested_role: 'scope_user_user', requested: { version: '1', mcp_servers: [{ url: mcpUrl }] } }),
      }),
    );
    const approved = await json(
      await fetch(`${d.url}/svc/v1/access-requests/${created.id}/approve`, {
        method: 'PUT',
        headers: session,
        body: JSON.stringify({ approved_role: 'scope_user_user', approved: { version: '1', mcp_servers: [{ url: mcpUrl, instance_ids: [instance.instance.id] }] } }),
      }),
    );

    const jwks = JSON.parse(d.deps.box.open('oauth_signing_keys', 'jwks', await d.deps.repos.signingKeys.get()));
    const jwk = jwks.find((k) => k.alg === 'ES256');
    const key = await importJWK(jwk, 'ES256');
    const mint = () => {
      const iat = Math.floor(Date.now() / 1000);
      return new SignJWT({ scope: approved.access_request_scope, client_id: clientId, jti: randomUUID() })
        .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: jwk.kid })
        .setIssuer(`${d.baseUrl}/oauth`)
        .setAudience(d.baseUrl)
        .setSubject(me.user.id)
        .setIssuedAt(iat)
        .setExpirationTime(iat + 600)
        .sign(key);
    };
    const verifier = d.app.verifier;
    const token = await mint();
    const grant = await verifier.verify(token);
    if (grant.record.id !== created.id) throw new Error('the bench token does not verify');

    // warm: the signature is cached by token hash; each call hashes the token and checks the record
    for (let i = 0; i < 2000; i++) await verifier.verify(token);
    const warm = summary(await timed(() => verifier.verify(token), { budgetMs: WARM_BUDGET_MS }));
    report.line('verify, warm cache (same token):');
    report.stat('calls', warm.n);
    report.stat('mean / p50 / p99', `${us(warm.mean)} / ${us(warm.p50)} / ${us(warm.p99)}`, 'µs');

    // cold: every token is new, so each call is a full ES256 verification plus the record check
    const fresh = [];
    for (let i = 0; i < COLD_TOKENS; i++) fresh.push(await mint());
    for (let i = 0; i < 50; i++) await verifier.verify(await mint()); // JIT warm-up on the cold path
    const cold = summary(await timed((i) => verifier.verify(fresh[i]), { budgetMs: 60_000, max: fresh.length }));
    report.line('verify, cold cache (a new token each call):');
    report.stat('calls', cold.n);
    report.stat('mean / p50 / p99', `${us(cold.mean)} / ${us(cold.p50)} / ${us(cold.p99)}`, 'µs');

    // context: the whole request through Koa, over loopback HTTP with keep-alive
    const headers = { Authorization: `Bearer ${token}` };
    const get = async () => {
      const res = await fetch(`${d.url}/svc/v1/apps/mcps`, { headers });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`GET /svc/v1/apps/mcps answered ${res.status}`);
    };
    for (let i = 0; i < 100; i++) await get();
    const rt = summary(await timed(get, { budgetMs: HTTP_BUDGET_MS, max: HTTP_MAX }));
    report.line('GET /svc/v1/apps/mcps round trip (fetch, keep-alive, one at a time):');
    report.stat('requests', rt.n);
    report.stat('mean / p50 / p99', `${us(rt.mean)} / ${us(rt.p50)} / ${us(rt.p99)}`, 'µs');
    report.stat('share of it spent in the warm Bearer check', `${((warm.mean / rt.mean) * 100).toFixed(1)}`, '%');

    return [
      { label: 'warm-cache Bearer check, mean per call', value: `${us(warm.mean)} µs`, target: `< ${WARM_TARGET_US} µs`, pass: warm.mean < WARM_TARGET_US },
    ];
  } finally {
    await d.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}
