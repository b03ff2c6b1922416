import { createHash, randomBytes } from 'node:crypto';
import { stat } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, runSvcInProcess } from './helpers/cli.js';
import { startTestDaemon, testClock, type TestDaemon } from './helpers/daemon.js';
import { Api, createBody, userApi } from './helpers/http.js';
import { approvedScope, authorize, oidcConfig, REDIRECT_URI, registerClient } from './helpers/oauth.js';
import { startUpstream } from './helpers/upstream.js';

/**
 * What an outside review got through, each reproduced
 * against the real daemon over HTTP (tokens from the real authorization code flow, the official
 * openai client, the real CLI binary).
 */

const FILE = randomBytes(3 * 1024 * 1024);
const SHA = createHash('sha256').update(FILE).digest('hex');

/**
 * A loopback file server: `/file/...` the 3 MiB file with a Content-Length, `/stream/...` a bit more
 * than that without one (chunked), `/redirect?to=URL` a 302. Every request's path is recorded.
 */
async function fileServer() {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    seen.push(req.url ?? '');
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/redirect') {
      res.writeHead(302, { Location: url.searchParams.get('to') ?? '/' });
      res.end();
    } else if (url.pathname.startsWith('/stream/')) {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
      res.write(FILE);
      res.end(randomBytes(64 * 1024));
    } else if (url.pathname.startsWith('/file/')) {
      res.writeHead(200, { 'Content-Length': FILE.length });
      res.end(FILE);
    } else {
      res.writeHead(404);
      res.end('nothing here');
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { base, port: (server.address() as AddressInfo).port, seen, close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }) };
}

async function finished(api: Api, id: string, headers: Record<string, string> = {}) {
  for (let i = 0; i < 400; i++) {
    const res = await api.get(`/svc/v1/models/files/pull/${id}`, headers);
    if (res.status !== 200) throw new Error(`poll ${id}: ${res.status} ${res.text}`);
    if (res.body.status === 'done' || res.body.status === 'failed') return res.body;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('download did not finish');
}

/** A power-user grant of `reviewer` to a registered client, and its access token. */
async function powerToken(d: TestDaemon, admin: Api, reviewer: Api, role: 'scope_user_user' | 'scope_user_power_user' = 'scope_user_power_user') {
  const { clientId, secret } = await registerClient(admin, { name: `App ${Math.random().toString(36).slice(2, 8)}` });
  const grant = await approvedScope(d, reviewer, clientId, role);
  const { tokens } = await authorize(await oidcConfig(d, clientId, secret), reviewer, grant.scope);
  return { token: tokens!.access_token, grantId: grant.id, auth: { Authorization: `Bearer ${tokens!.access_token}` } };
}

describe('item 4: a grant never outlives its approver\'s rights', () => {
  let d: TestDaemon;
  let admin: Api;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;

  beforeAll(async () => {
    upstream = await startUpstream();
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    expect((await admin.post('/svc/v1/providers', { name: 'local', base_url: upstream.url })).status).toBe(201);
  });
  afterAll(async () => {
    await d.stop();
    await upstream.close();
  });

  it('demoting the approver takes alias management and downloads from the app at once; chat still works; removing them ends the token', async () => {
    const bob = await userApi(d.url, admin, 'bob', 'power_user');
    const { token, auth } = await powerToken(d, admin, bob);
    expect((await new Api(d.url).get('/svc/v1/models', auth)).status).toBe(200);
    expect((await new Api(d.url).get('/svc/v1/models/files/pulls', auth)).status).toBe(200);

    expect((await admin.put('/svc/v1/users/bob/role', { role: 'user' })).status).toBe(200);
    for (const res of [
      await new Api(d.url).get('/svc/v1/models', auth),
      await new Api(d.url).put('/svc/v1/models/sneaky', { provider: 'local', model: 'fake-model' }, auth),
      await new Api(d.url).post('/svc/v1/models/files/pull', { url: 'https://models.example/m.gguf' }, auth),
      await new Api(d.url).get('/svc/v1/models/files/pulls', auth),
    ]) {
      expect(res.status).toBe(403);
      expect(res.body.error).toMatchObject({ type: 'forbidden_error', code: 'insufficient_scope' });
    }
    const openai = new OpenAI({ baseURL: `${d.url}/v1`, apiKey: token, maxRetries: 0, timeout: 10_000 });
    const chat = await openai.chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'still here' }] });
    expect(chat.choices[0].message.content).toBe('echo: still here');

    // promoted again, the grant is what it was approved as (never more)
    expect((await admin.put('/svc/v1/users/bob/role', { role: 'power_user' })).status).toBe(200);
    expect((await new Api(d.url).get('/svc/v1/models', auth)).status).toBe(200);

    expect((await admin.delete('/svc/v1/users/bob')).status).toBe(204);
    const gone = await new Api(d.url).get('/v1/models', auth);
    expect(gone.status).toBe(401);
    expect(gone.body.error.code).toBe('invalid_token');
  });
});

describe('item 5: one app cannot take from another', () => {
  let d: TestDaemon;
  let admin: Api;
  let alice: Api;
  let bob: Api;
  let aliceApp: Awaited<ReturnType<typeof powerToken>>;
  let bobApp: Awaited<ReturnType<typeof powerToken>>;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let files: Awaited<ReturnType<typeof fileServer>>;

  beforeAll(async () => {
    upstream = await startUpstream();
    files = await fileServer();
    // quota: one 3 MiB file each
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, downloadQuotaBytes: FILE.length } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    alice = await userApi(d.url, admin, 'alice', 'power_user');
    bob = await userApi(d.url, admin, 'bob', 'power_user');
    expect((await admin.post('/svc/v1/providers', { name: 'local', base_url: upstream.url })).status).toBe(201);
    aliceApp = await powerToken(d, admin, alice);
    bobApp = await powerToken(d, admin, bob);
  });
  afterAll(async () => {
    await d.stop();
    await upstream.close();
    await files.close();
  });

  describe('model aliases', () => {
    it("another user's app can neither replace nor remove an alias, and its user's session cannot either", async () => {
      const made = await new Api(d.url).put('/svc/v1/models/fast', { provider: 'local', model: 'fake-model', defaults: { temperature: 0.1 } }, aliceApp.auth);
      expect(made.status).toBe(200);

      const takeover = await new Api(d.url).put('/svc/v1/models/fast', { provider: 'local', model: 'embed-model' }, bobApp.auth);
      expect(takeover.status).toBe(409);
      expect(takeover.body.error).toMatchObject({ type: 'conflict_error', code: 'model_id_taken' });
      expect((await bob.put('/svc/v1/models/fast', { provider: 'local', model: 'embed-model' })).status).toBe(409);
      const removed = await new Api(d.url).delete('/svc/v1/models/fast', bobApp.auth);
      expect(removed.status).toBe(403);
      expect(removed.body.error.code).toBe('alias_not_owned');
      expect((await bob.delete('/svc/v1/models/fast')).status).toBe(403);
      expect(made.body.alias).toMatchObject({ id: 'fast', mine: true });

      const listed = await new Api(d.url).get('/svc/v1/models', bobApp.auth);
      expect(listed.body.data.find((a: { id: string }) => a.id === 'fast')).toMatchObject({ model: 'fake-model', mine: false });
      // the alias still routes to what alice chose
      const before = upstream.seen.length;
      const openai = new OpenAI({ baseURL: `${d.url}/v1`, apiKey: bobApp.token, maxRetries: 0, timeout: 10_000 });
      await openai.chat.completions.create({ model: 'fast', messages: [{ role: 'user', content: 'hi' }] });
      expect(upstream.seen.slice(before).find((s) => s.path === '/v1/chat/completions')?.body.model).toBe('fake-model');

      // alice's own app may change and remove it; an admin's session may manage any
      expect((await new Api(d.url).put('/svc/v1/models/fast', { provider: 'local', model: 'fake-model' }, aliceApp.auth)).status).toBe(200);
      expect((await admin.put('/svc/v1/models/fast', { provider: 'local', model: 'fake-model', defaults: { temperature: 0 } })).status).toBe(200);
      expect((await new Api(d.url).delete('/svc/v1/models/fast', aliceApp.auth)).status).toBe(204);
    });

    it("no app may shadow a model id that a provider serves; an alias made before the provider offered it yields to the provider", async () => {
      const shadow = await new Api(d.url).put('/svc/v1/models/fake-model', { provider: 'local', model: 'embed-model' }, bobApp.auth);
      expect(shadow.status).toBe(409);
      expect(shadow.body.error.code).toBe('model_id_taken');
      expect((await bob.put('/svc/v1/models/embed-model', { provider: 'local', model: 'fake-model' })).status).toBe(409);

      // bob's app reserves an id before any provider serves it...
      expect((await new Api(d.url).put('/svc/v1/models/upcoming', { provider: 'local', model: 'fake-model' }, bobApp.auth)).status).toBe(200);
      // ...then a provider starts serving that id: the provider wins for everyone
      expect((await admin.post('/svc/v1/providers', { name: 'second', base_url: upstream.url, models: ['upcoming'] })).status).toBe(201);
      const models = await new OpenAI({ baseURL: `${d.url}/v1`, apiKey: aliceApp.token, maxRetries: 0 }).models.list();
      expect(models.data.find((m) => m.id === 'upcoming')?.owned_by).toBe('second');
      const before = upstream.seen.length;
      await new OpenAI({ baseURL: `${d.url}/v1`, apiKey: aliceApp.token, maxRetries: 0, timeout: 10_000 }).chat.completions.create({ model: 'upcoming', messages: [{ role: 'user', content: 'x' }] });
      expect(upstream.seen.slice(before).find((s) => s.path === '/v1/chat/completions')?.body.model).toBe('upcoming');
    });
  });

  describe('model downloads', () => {
    it('an app may not download from loopback, private or unspecified IP literals (400), and nothing is fetched', async () => {
      const hosts = ['127.0.0.2', '[::1]', '0.0.0.0', '10.0.0.1', '192.168.1.1', '100.64.0.1', '169.254.169.254', '[fd00::1]', '[::ffff:127.0.0.2]', '224.0.0.1'];
      const before = files.seen.length;
      for (const host of hosts) {
        const res = await new Api(d.url).post('/svc/v1/models/files/pull', { url: `http://${host}:${files.port}/file/x.bin` }, aliceApp.auth);
        expect(res.status, host).toBe(400);
        expect(res.body.error.code, host).toBe('address_not_allowed');
      }
      expect(files.seen.length).toBe(before);
    });

    it('a host name that resolves to loopback is refused to an app when connecting (it learns only "failed"), not to the person', async () => {
      const before = files.seen.length;
      const res = await new Api(d.url).post('/svc/v1/models/files/pull', { url: `http://localhost:${files.port}/file/named.bin` }, bobApp.auth);
      expect(res.status).toBe(202);
      const job = await finished(new Api(d.url), res.body.id, bobApp.auth);
      expect(job).toMatchObject({ status: 'failed', error: 'the download failed', bytes_done: null, bytes_total: null, sha256: null });
      expect(files.seen.length).toBe(before);

      // the person may still pull from loopback through their own session
      const carol = await userApi(d.url, admin, 'carol', 'power_user');
      const own = await carol.post('/svc/v1/models/files/pull', { url: `http://localhost:${files.port}/file/carol.bin`, sha256: SHA });
      expect(own.status).toBe(202);
      expect((await finished(carol, own.body.id)).status).toBe('done');
    });

    it("downloads are visible only to their own user, in the list and by id", async () => {
      const dave = await userApi(d.url, admin, 'dave', 'power_user');
      const started = await dave.post('/svc/v1/models/files/pull', { url: `${files.base}/file/visible.bin`, sha256: SHA });
      expect(started.status).toBe(202);
      await finished(dave, started.body.id);
      const mine = (await dave.get('/svc/v1/models/files/pulls')).body.data.map((p: { id: string }) => p.id);
      expect(mine).toContain(started.body.id);
      for (const viewer of [alice, new Api(d.url)]) {
        const headers = viewer === alice ? {} : aliceApp.auth;
        const list = await viewer.get('/svc/v1/models/files/pulls', headers);
        expect(list.status).toBe(200);
        expect(list.body.data.map((p: { id: string }) => p.id)).not.toEqual(expect.arrayContaining([mine[0]]));
        expect(JSON.stringify(list.body)).not.toContain(files.base);
        expect((await viewer.get(`/svc/v1/models/files/pull/${mine[0]}`, headers)).status).toBe(404);
      }
    });

    it('each user has a disk quota: a download beyond it fails and keeps nothing; once used up, new ones are refused with 409', async () => {
      // users of its own, so that the quota it uses up is nobody else's, in any order
      const bob = await userApi(d.url, admin, 'quota-bob', 'power_user');
      const alice = await userApi(d.url, admin, 'quota-alice', 'power_user');
      // bob's own session may fetch from loopback; that file takes his whole quota
      const first = await bob.post('/svc/v1/models/files/pull', { url: `${files.base}/file/bobs.bin`, sha256: SHA });
      expect((await finished(bob, first.body.id)).status).toBe('done');
      const refused = await bob.post('/svc/v1/models/files/pull', { url: `${files.base}/file/more.bin` });
      expect(refused.status).toBe(409);
      expect(refused.body.error).toMatchObject({ type: 'conflict_error', code: 'download_quota_exceeded' });

      // alice: a stream without Content-Length is cut off when it passes the quota
      const streamed = await alice.post('/svc/v1/models/files/pull', { url: `${files.base}/stream/big.bin` });
      expect(streamed.status).toBe(202);
      const job = await finished(alice, streamed.body.id);
      expect(job.status).toBe('failed');
      expect(job.error).toMatch(/quota/);
      await expect(stat(path.join(d.dataDir, 'models', 'big.bin.part'))).rejects.toThrow();
      await expect(stat(path.join(d.dataDir, 'models', 'big.bin'))).rejects.toThrow();
      // and exactly the quota still fits
      const fits = await alice.post('/svc/v1/models/files/pull', { url: `${files.base}/file/fits.bin`, sha256: SHA });
      expect((await finished(alice, fits.body.id)).status).toBe('done');
    });
  });
});

describe('item 5: downloads by apps through an allowed private mirror', () => {
  let d: TestDaemon;
  let admin: Api;
  let bob: Api;
  let bobApp: Awaited<ReturnType<typeof powerToken>>;
  let files: Awaited<ReturnType<typeof fileServer>>;

  beforeAll(async () => {
    files = await fileServer();
    // the loopback file server stands in for a LAN model mirror the operator allowed
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, downloadAllowNetworks: ['127.0.0.1/32'] } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    bob = await userApi(d.url, admin, 'bob', 'power_user');
    bobApp = await powerToken(d, admin, bob);
  });
  afterAll(async () => {
    await d.stop();
    await files.close();
  });

  it('redirects are followed, and every hop is checked: an allowed server cannot bounce an app to loopback', async () => {
    const ok = await new Api(d.url).post('/svc/v1/models/files/pull', { url: `${files.base}/redirect?to=%2Ffile%2Fok.bin`, filename: 'ok.bin', sha256: SHA }, bobApp.auth);
    expect((await finished(new Api(d.url), ok.body.id, bobApp.auth)).status).toBe('done');
    for (const to of [`http://[::1]:${files.port}/file/r.bin`, `http://0.0.0.0:${files.port}/file/r.bin`, `http://[::ffff:127.0.0.2]:${files.port}/file/r.bin`]) {
      const before = files.seen.length;
      const res = await new Api(d.url).post('/svc/v1/models/files/pull', { url: `${files.base}/redirect?to=${encodeURIComponent(to)}`, filename: 'r.bin' }, bobApp.auth);
      expect(res.status, to).toBe(202);
      const job = await finished(new Api(d.url), res.body.id, bobApp.auth);
      expect(job.status, to).toBe('failed');
      expect(files.seen.slice(before), to).toEqual([`/redirect?to=${encodeURIComponent(to)}`]);
    }
  });

  it('an app sees no status code, size or digest; its user sees the whole record', async () => {
    const missing = await new Api(d.url).post('/svc/v1/models/files/pull', { url: `${files.base}/absent/404.bin` }, bobApp.auth);
    const failed = await finished(new Api(d.url), missing.body.id, bobApp.auth);
    expect(failed).toMatchObject({ status: 'failed', error: 'the download failed', bytes_done: null, bytes_total: null });
    expect(JSON.stringify(failed)).not.toMatch(/404"|answered/);
    expect((await bob.get(`/svc/v1/models/files/pull/${missing.body.id}`)).body.error).toMatch(/answered 404/);

    // a wrong checksum: just "failed", never the digest of what was found
    const wrong = await new Api(d.url).post('/svc/v1/models/files/pull', { url: `${files.base}/file/wrong.bin`, sha256: 'ab'.repeat(32) }, bobApp.auth);
    const mismatch = await finished(new Api(d.url), wrong.body.id, bobApp.auth);
    expect(mismatch).toMatchObject({ status: 'failed', error: 'the download failed', sha256: 'ab'.repeat(32) });
    expect(JSON.stringify(mismatch)).not.toContain(SHA);

    // success says "done", with no size and no digest the app did not give
    const ok = await new Api(d.url).post('/svc/v1/models/files/pull', { url: `${files.base}/file/plain.bin` }, bobApp.auth);
    expect(ok.body).toMatchObject({ bytes_done: null, bytes_total: null });
    const done = await finished(new Api(d.url), ok.body.id, bobApp.auth);
    expect(done).toMatchObject({ status: 'done', sha256: null, bytes_done: null, bytes_total: null, error: null });
    expect((await new Api(d.url).get('/svc/v1/models/files/pulls', bobApp.auth)).body.data.find((p: { id: string }) => p.id === ok.body.id)).toMatchObject({ sha256: null, bytes_done: null });
    expect((await bob.get(`/svc/v1/models/files/pull/${ok.body.id}`)).body).toMatchObject({ status: 'done', sha256: SHA, bytes_done: FILE.length });
  });
});

describe('item 7: shared limits do not become a lockout', () => {
  it("one app's polls do not starve another app's polls; guessing ids is still bounded", async () => {
    const d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 10, rateLimitPoll: 5 } });
    try {
      const app = new Api(d.url);
      const a = (await app.post('/svc/v1/apps/request-access', createBody({ app_client_id: 'noisy-app' }))).body.id;
      const b = (await app.post('/svc/v1/apps/request-access', createBody({ app_client_id: 'quiet-app' }))).body.id;
      const noisy: number[] = [];
      for (let i = 0; i < 12; i++) noisy.push((await app.get(`/svc/v1/apps/access-requests/${a}?app_client_id=noisy-app`)).status);
      expect(noisy.slice(0, 5)).toEqual([200, 200, 200, 200, 200]);
      expect(noisy.slice(5).every((s) => s === 429)).toBe(true);
      const limited = await app.get(`/svc/v1/apps/access-requests/${a}?app_client_id=noisy-app`);
      expect(limited.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited' });
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
      // the other app on the same address still polls
      expect((await app.get(`/svc/v1/apps/access-requests/${b}?app_client_id=quiet-app`)).status).toBe(200);

      // guessing: misses spend the per-address budget, and then answer 429...
      const guesses: number[] = [];
      for (let i = 0; i < 14; i++) guesses.push((await app.get(`/svc/v1/apps/access-requests/00000000-0000-4000-8000-${String(i).padStart(12, '0')}?app_client_id=quiet-app`)).status);
      expect(guesses.slice(0, 10).every((s) => s === 404)).toBe(true);
      expect(guesses.slice(10).every((s) => s === 429)).toBe(true);
      // ...which still does not starve a good poll
      expect((await app.get(`/svc/v1/apps/access-requests/${b}?app_client_id=quiet-app`)).status).toBe(200);
    } finally {
      await d.stop();
    }
  });

  it('wrong passwords slow the guesser with a growing delay, but the owner\'s CLI on the same machine still logs in', async () => {
    const clock = testClock();
    const d = await startTestDaemon({ clock });
    try {
      const admin = await new Api(d.url).login('admin', d.adminPassword);
      await userApi(d.url, admin, 'other', 'user');
      const guess = (password = 'wrong-password') => new Api(d.url).post('/svc/v1/auth/login', { username: 'admin', password });
      const first: number[] = [];
      for (let i = 0; i < 6; i++) first.push((await guess()).status);
      expect(first).toEqual([401, 401, 401, 401, 401, 429]);
      const waits: number[] = [];
      for (let i = 0; i < 4; i++) {
        const refused = await guess();
        expect(refused.status).toBe(429);
        expect(refused.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited' });
        const wait = Number(refused.headers.get('retry-after'));
        waits.push(wait);
        clock.advance(wait * 1000 + 1);
        expect((await guess()).status).toBe(401);
      }
      // 1 s, 2 s, 4 s, 8 s: each failure past the free ones doubles the delay
      expect(waits).toEqual([1, 2, 4, 8]);
      // even the right password waits its turn from this address (else the delay tells nothing)...
      expect((await guess(d.adminPassword)).status).toBe(429);
      // ...another account is untouched...
      expect((await new Api(d.url).post('/svc/v1/auth/login', { username: 'other', password: 'pw-other-12345' })).status).toBe(200);
      // ...and the owner's CLI, which proves it runs beside the data dir, logs in at once
      const env = cleanEnv({ SVC_KEYCHAIN: 'file', SVC_HOME: d.dataDir, NO_COLOR: '1' });
      const cli = await runSvcInProcess(['login', '--username', 'admin', '--password-stdin'], { env, input: d.adminPassword });
      expect(cli.exitCode, cli.stderr).toBe(0);
      expect(cli.stderr).toContain('Logged in as admin');
      expect((await runSvcInProcess(['status', '--json'], { env })).stdout).toContain('"logged_in_as": "admin"');
      // a forged proof is no proof: it lands in the guesser's bucket
      const forged = await new Api(d.url).post('/svc/v1/auth/login', { username: 'admin', password: d.adminPassword }, { 'X-Svc-Local-Login': 'x'.repeat(43) });
      expect(forged.status).toBe(429);
    } finally {
      await d.stop();
    }
  });
});

describe('item 9: bad input and what the terminal shows', () => {
  let d: TestDaemon;
  let admin: Api;
  let env: Record<string, string>;

  beforeAll(async () => {
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    env = cleanEnv({ SVC_KEYCHAIN: 'file', SVC_HOME: d.dataDir, NO_COLOR: '1' });
  });
  afterAll(() => d.stop());

  it('a malformed % escape in a pull URL is a 400, not a 500', async () => {
    for (const url of ['http://127.0.0.1:9/models/%E0%A4%A', 'http://127.0.0.1:9/%', 'http://127.0.0.1:9/a%zz']) {
      const res = await admin.post('/svc/v1/models/files/pull', { url });
      expect(res.status, url).toBe(400);
      expect(res.body.error.code).toBe('invalid_body');
    }
  });

  it('redirect_url with control, whitespace or invisible characters is refused and nothing is stored', async () => {
    const before = (await admin.get('/svc/v1/access-requests')).body.data.length;
    for (const redirect_url of ['http://127.0.0.1:65010/cb\n', 'http://127.0.0.1:65010/c\tb', 'http://127.0.0.1:65010/cb\u0000', 'http://127.0.0.1:65010/cb\u001b[2J', ' http://127.0.0.1:65010/cb', 'http://127.0.0.1:65010/\u202ecb', 'http://127.0.0.1:65010/c\u200bb', 'http://127.0.0.1:65010/cb\u{E0041}', 'http://127.0.0.1:65010/c b']) {
      const res = await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ flow_type: 'redirect', redirect_url }));
      expect(res.status, JSON.stringify(redirect_url)).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_redirect_url', param: 'redirect_url' });
    }
    expect((await admin.get('/svc/v1/access-requests')).body.data.length).toBe(before);
  });

  it('svc requests show says where a redirect flow sends the person and that the app is unregistered', async () => {
    const target = 'https://app.example/after?x=1';
    const created = await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ app_client_id: 'nobody-knows-me', flow_type: 'redirect', redirect_url: target }));
    expect(created.status).toBe(201);
    const review = await admin.get(`/svc/v1/access-requests/${created.body.id}/review`);
    expect(review.body).toMatchObject({ app_registered: false, flow_type: 'redirect', redirect_url: target });
    const shown = await runSvcInProcess(['requests', 'show', created.body.id], { env });
    expect(shown.exitCode, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`redirects to\t${target}\n`);
    expect(shown.stdout).toMatch(/^registered\tno: not in the OAuth client registry/m);
    const listed = (await admin.get('/svc/v1/access-requests?status=draft')).body.data.find((r: { id: string }) => r.id === created.body.id);
    expect(listed).toMatchObject({ app_registered: false, redirect_url: target });

    // a registered client says nothing of the kind
    const { clientId } = await registerClient(admin, { name: 'Known App' });
    const known = await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ app_client_id: clientId, flow_type: 'redirect', redirect_url: REDIRECT_URI }));
    const knownShown = await runSvcInProcess(['requests', 'show', known.body.id], { env });
    expect(knownShown.stdout).not.toMatch(/^registered/m);
    expect(knownShown.stdout).toContain(`redirects to\t${REDIRECT_URI}\n`);
  });

  it('a client that registered itself (RFC 7591) and asks through request-access is not a registered app: the API, svc requests show and list say it registered itself, and its name comes without invisible characters', async () => {
    const reg = await new Api(d.url).post('/oauth/reg', { client_name: 'Known\u202eppA\u200b\u2066 App', redirect_uris: [REDIRECT_URI], token_endpoint_auth_method: 'none' });
    expect(reg.status, reg.text).toBe(201);
    const clientId = reg.body.client_id as string;
    const created = await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ app_client_id: clientId }));
    expect(created.status, created.text).toBe(201);
    const review = await admin.get(`/svc/v1/access-requests/${created.body.id}/review`);
    expect(review.body).toMatchObject({ app_client_id: clientId, app_registered: false, client_kind: 'dynamic' });
    expect(review.body.app_name).toBe('Known\uFFFDppA\uFFFD\uFFFD App');
    const listed = (await admin.get('/svc/v1/access-requests?status=draft')).body.data.find((r: { id: string }) => r.id === created.body.id);
    expect(listed).toMatchObject({ app_registered: false, client_kind: 'dynamic', app_name: review.body.app_name });
    const shown = await runSvcInProcess(['requests', 'show', created.body.id], { env });
    expect(shown.exitCode, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/^client\tregistered itself$/m);
    expect(shown.stdout).toMatch(/^registered\tno: it registered itself, so its name is its own claim$/m);
    const json = JSON.parse((await runSvcInProcess(['requests', 'list', '--json'], { env })).stdout) as { id: string; client_kind?: string }[];
    expect(json.find((r) => r.id === created.body.id)).toMatchObject({ client_kind: 'dynamic', app_registered: false });
    // an admin's client is registered, in request-access as at the authorization endpoint
    const { clientId: known } = await registerClient(admin, { name: 'Known App' });
    const made = await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ app_client_id: known }));
    expect((await admin.get(`/svc/v1/access-requests/${made.body.id}/review`)).body).toMatchObject({ app_registered: true, client_kind: 'registered', app_name: 'Known App' });
    expect((await runSvcInProcess(['requests', 'show', made.body.id], { env })).stdout).toMatch(/^client\tregistered by your admin$/m);
  });

  it('zero-width, bidi and Unicode tag characters in app strings never reach the terminal', async () => {
    const sneaky = ['\u200b', '\u200d', '\u2060', '\ufeff', '\u202e', '\u2066', '\u{E0001}', '\u{E0041}', '\u{E007F}'];
    const { clientId } = await registerClient(admin, { name: `Notes${sneaky.join('')}App`, description: `Harmless\u{E0049}\u{E0047}\u{E004E}\u200bnote` });
    const created = await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ app_client_id: clientId }));
    for (const args of [['requests', 'show', created.body.id], ['requests', 'list']]) {
      const r = await runSvcInProcess(args, { env });
      expect(r.exitCode, r.stderr).toBe(0);
      for (const c of sneaky) expect(r.stdout, `${args[1]} ${c.codePointAt(0)!.toString(16)}`).not.toContain(c);
    }
    expect((await runSvcInProcess(['requests', 'show', created.body.id], { env })).stdout).toContain('Notes\uFFFD');
  });
});
