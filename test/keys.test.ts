/**
 * API keys (decisions: API keys) end to end: keys made with the real `svc` binary against a real daemon on
 * 127.0.0.1, used by the official openai client and the MCP SDK client, then revoked both ways.
 * Tests in this file run in order and share the daemon and the CLI's login.
 */
import { createHash } from 'node:crypto';
import { storedOnDisk, storeFilesText } from './helpers/store.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { cleanEnv, runSvcInProcess } from './helpers/cli.js';
import { startTestDaemon, testClock, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { startMcpServer } from './helpers/mcp-servers.js';
import { startUpstream } from './helpers/upstream.js';

// Each test runs a few CLI processes; bound them generously (never asserted as timings).
vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const PROVIDER_KEY = `sk-provider-${Math.random().toString(36).slice(2)}`;
const KEY_FORMAT = /^svc_[A-Za-z0-9_-]{43}$/;
const ANY_KEY = /svc_[A-Za-z0-9_-]{20,}/;

let d: TestDaemon;
let clock: ReturnType<typeof testClock>;
let upstream: Awaited<ReturnType<typeof startUpstream>>;
let mcp: Awaited<ReturnType<typeof startMcpServer>>;
let admin: Api;
let alice: Api;
let bob: Api;
let aliceMcp: string;
let bobMcpOff: string;
let env: Record<string, string>;

const svc = (args: string[], input?: string) => runSvcInProcess(args, { env, input });
const openaiWith = (key: string) => new OpenAI({ baseURL: `${d.url}/v1`, apiKey: key, maxRetries: 0, timeout: 10_000 });
const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });
const counts = () => ({ keys: d.store.count('api_keys'), requests: d.store.count('access_requests') });

async function loginCli(username: string) {
  const r = await svc(['login', '--username', username, '--password-stdin'], `pw-${username}-12345\n`);
  expect(r.exitCode, r.stderr).toBe(0);
}

async function createKeyJson(args: string[]) {
  const r = await svc(['keys', 'create', ...args, '--json']);
  expect(r.exitCode, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { id: string; key: string; access_request_id: string; name: string; role: string; expires_at: string | null; status: string };
}

async function expectInvalidToken(key: string, why: RegExp) {
  const err = await openaiWith(key).models.list().catch((e) => e);
  expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
  expect(err.status).toBe(401);
  expect(err.error).toMatchObject({ type: 'authentication_error', code: 'invalid_token' });
  expect(err.message).toMatch(why);
  expect(err.headers.get('www-authenticate')).toMatch(/^Bearer error="invalid_token", resource_metadata="/);
}

beforeAll(async () => {
  [upstream, mcp] = await Promise.all([startUpstream({ apiKey: PROVIDER_KEY, chunks: 3 }), startMcpServer({ stateful: true })]);
  clock = testClock();
  d = await startTestDaemon({ clock, config: { rateLimitClient: 0, rateLimitAddress: 0 } });
  env = cleanEnv({ SVC_KEYCHAIN: 'file', SVC_HOME: d.dataDir, NO_COLOR: '1' });
  admin = await new Api(d.url).login('admin', d.adminPassword);
  alice = await userApi(d.url, admin, 'alice', 'power_user');
  bob = await userApi(d.url, admin, 'bob', 'user');
  const provider = await alice.post('/svc/v1/providers', { name: 'local', base_url: upstream.url, api_key: PROVIDER_KEY, timeout_ms: 2000 });
  expect(provider.status, provider.text).toBe(201);
  const inst = await alice.post('/svc/v1/mcps', { name: 'tools', url: mcp.url });
  expect(inst.status, inst.text).toBe(201);
  aliceMcp = inst.body.instance.id;
  const off = await bob.post('/svc/v1/mcps', { name: 'off', url: mcp.url, enabled: false });
  expect(off.status, off.text).toBe(201);
  bobMcpOff = off.body.instance.id;
});

afterAll(async () => {
  await d?.stop();
  await Promise.all([upstream?.close(), mcp?.close()]);
});

describe('a key from `svc keys create`, used by the openai client', () => {
  let key: string;
  let keyId: string;
  let requestId: string;
  let created: Awaited<ReturnType<typeof svc>>;

  // The key every test here uses, made once: the tests run in any order.
  beforeAll(async () => {
    await loginCli('alice'); // the CLI's login is the data dir's: another describe may have left bob's
    created = await svc(['keys', 'create', 'Open WebUI', '--mcp', `${mcp.url}=${aliceMcp}`]);
    key = created.stdout.trim();
    keyId = d.store.all('api_keys').find((k) => k.name === 'Open WebUI')!.id;
    requestId = d.store.get('api_keys', keyId)!.access_request_id;
  });

  it('prints the key once, on stdout alone, and stores only its sha256', async () => {
    const r = created;
    expect(r.exitCode, r.stderr).toBe(0);
    expect(key).toMatch(KEY_FORMAT);
    expect(r.stdout).toBe(`${key}\n`);
    expect(r.stderr).toMatch(/Created API key [0-9a-f-]{36} \(scope_user_user, no expiry; access request [0-9a-f-]{36}\)/);
    expect(r.stderr).not.toContain(key);
    const stored = d.store.get('api_keys', keyId)!;
    expect(stored.key_hash).toBe(createHash('sha256').update(key).digest('hex'));
    expect(stored.expires_at).toBeNull();
    expect(JSON.stringify(await storedOnDisk(d.dataDir))).not.toContain(key.slice(4));
    expect(await storeFilesText(d.dataDir)).not.toContain(key.slice(4));
  });

  it("the README's Claude Code line: `svc status --url` and `svc keys create claude-code` print exactly what ANTHROPIC_BASE_URL and ANTHROPIC_AUTH_TOKEN take", async () => {
    const status = await svc(['status', '--url']);
    expect(status.exitCode, status.stderr).toBe(0);
    const baseUrl = status.stdout.replace(/\n$/, '');
    expect(baseUrl).toBe(d.url);
    const created = await svc(['keys', 'create', 'claude-code']);
    expect(created.exitCode, created.stderr).toBe(0);
    const token = created.stdout.replace(/\n$/, '');
    expect(token).toMatch(KEY_FORMAT);
    // as Claude Code builds its client from the two variables
    const claude = new Anthropic({ baseURL: baseUrl, authToken: token, apiKey: null, maxRetries: 0, timeout: 10_000 });
    const message = await claude.messages.create({ model: 'fake-model', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] });
    expect(message.content).toEqual([{ type: 'text', text: 'echo: hi' }]);
  });

  it('lists models', async () => {
    const page = await openaiWith(key).models.list();
    expect(page.data.map((m) => m.id)).toEqual(expect.arrayContaining(['fake-model', 'embed-model']));
  });

  it('completes a chat; the provider gets its own key, never the API key', async () => {
    const before = upstream.seen.length;
    const res = await openaiWith(key).chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'hi' }] });
    expect(res.choices[0].message.content).toBe('echo: hi');
    const call = upstream.seen.slice(before).find((s) => s.path === '/v1/chat/completions')!;
    expect(call.headers.authorization).toBe(`Bearer ${PROVIDER_KEY}`);
    expect(JSON.stringify(call.headers)).not.toContain(key);
  });

  it('streams a chat', async () => {
    const stream = await openaiWith(key).chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'hi' }], stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    expect(text).toBe('part0 part1 part2 ');
  });

  it('embeds', async () => {
    const res = await openaiWith(key).embeddings.create({ model: 'embed-model', input: 'hello' });
    expect(res.data[0].embedding.map((x) => Math.round(x * 100) / 100)).toEqual([0.1, 0.2, 0.3]);
  });

  it('stands on an approved access request of client svc-key:<id>, shown by `svc requests list`', async () => {
    const r = await svc(['requests', 'list', '--json']);
    expect(r.exitCode, r.stderr).toBe(0);
    const row = (JSON.parse(r.stdout) as { id: string }[]).find((x) => x.id === requestId);
    expect(row).toMatchObject({
      app_client_id: `svc-key:${keyId}`,
      app_name: 'API key "Open WebUI"',
      status: 'approved',
      requested_role: 'scope_user_user',
      approved_role: 'scope_user_user',
      approved: { version: '1', mcp_servers: [{ url: mcp.url, instance_ids: [aliceMcp] }] },
      user: 'alice',
    });
  });

  it('opens the app MCP endpoints of its grant: REST, and the Streamable HTTP proxy through the MCP SDK client', async () => {
    const list = await new Api(d.url).get('/svc/v1/apps/mcps', bearer(key));
    expect(list.status, list.text).toBe(200);
    expect(list.body.data.map((m: { id: string }) => m.id)).toEqual([aliceMcp]);
    const client = new Client({ name: 'key-app', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${d.url}/svc/v1/apps/mcps/${aliceMcp}/mcp`), { requestInit: { headers: bearer(key) } }));
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).toContain('echo');
      const called = await client.callTool({ name: 'echo', arguments: { message: 'via key' } });
      expect((called.content as { text: string }[])[0].text).toBe('echo: via key');
    } finally {
      await client.close();
    }
    expect(JSON.stringify(mcp.seen.map((s) => s.headers))).not.toContain(key);
  });

  it('no app can pass for a key: app_client_id svc-key:... is refused at request-access', async () => {
    const res = await new Api(d.url).post('/svc/v1/apps/request-access', {
      app_client_id: `svc-key:${keyId}`,
      flow_type: 'popup',
      requested_role: 'scope_user_user',
      requested: { version: '1' },
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_body', param: 'app_client_id' });
  });

  it('`svc keys list` never shows a key, as a table or as JSON, nor does the API', async () => {
    const table = await svc(['keys', 'list']);
    expect(table.exitCode, table.stderr).toBe(0);
    const row = table.stdout.split('\n').find((l) => l.startsWith(keyId))!;
    expect(row.split('\t')).toEqual([keyId, 'Open WebUI', 'active', 'scope_user_user', '1', requestId, expect.any(String), 'never']);
    const json = await svc(['keys', 'list', '--json']);
    expect(JSON.parse(json.stdout)).toEqual(expect.arrayContaining([expect.objectContaining({ id: keyId, name: 'Open WebUI', status: 'active', access_request_id: requestId, expires_at: null, user: 'alice' })]));
    const api = await alice.get('/svc/v1/keys');
    for (const text of [table.stdout, table.stderr, json.stdout, json.stderr, api.text]) {
      expect(text).not.toContain(key);
      expect(text).not.toMatch(ANY_KEY);
      expect(text).not.toContain('key_hash');
    }
  });

  it('another user neither sees nor revokes it; an admin sees it', async () => {
    expect((await bob.get('/svc/v1/keys')).body.data).toEqual([]);
    const theirs = await bob.post(`/svc/v1/keys/${keyId}/revoke`);
    expect(theirs.status).toBe(404);
    expect((await admin.get('/svc/v1/keys')).body.data.map((k: { id: string }) => k.id)).toContain(keyId);
    expect((await openaiWith(key).models.list()).data.length).toBeGreaterThan(0);
  });

  it('`svc keys revoke` (by a unique 8-character prefix) ends it on its next call, and its access request with it', async () => {
    // a key of its own: the other tests keep theirs
    const own = await createKeyJson(['Revoked soon', '--mcp', `${mcp.url}=${aliceMcp}`]);
    const [key, keyId, requestId] = [own.key, own.id, own.access_request_id];
    expect((await openaiWith(key).models.list()).data.length).toBeGreaterThan(0);
    const r = await svc(['keys', 'revoke', keyId.slice(0, 8)]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toContain(`Revoked API key ${keyId} (access request ${requestId})`);
    await expectInvalidToken(key, /revoked/);
    const err = await openaiWith(key).chat.completions.create({ model: 'fake-model', messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
    expect(err.status).toBe(401);
    const mcpList = await new Api(d.url).get('/svc/v1/apps/mcps', bearer(key));
    expect(mcpList.status).toBe(401);
    expect(d.store.get('access_requests', requestId)?.status).toBe('revoked');
    const listed = JSON.parse((await svc(['keys', 'list', '--json'])).stdout) as { id: string; status: string; revoked_at: string | null }[];
    expect(listed.find((k) => k.id === keyId)).toMatchObject({ status: 'revoked', revoked_at: expect.any(String) });
    const again = await svc(['keys', 'revoke', keyId]);
    expect(again.exitCode).toBe(1);
    expect(again.stderr).toContain('already revoked');
  });
});

describe('other ways a key ends', () => {
  beforeAll(() => loginCli('alice'));
  it('`svc requests revoke <access_request_id>` ends a key on its next call', async () => {
    const created = await createKeyJson(['Continue', '--role', 'scope_user_power_user']);
    expect(created).toMatchObject({ name: 'Continue', role: 'scope_user_power_user', status: 'active', expires_at: null });
    expect(created.key).toMatch(KEY_FORMAT);
    // a power-user grant opens the power-user endpoints too
    expect((await new Api(d.url).get('/svc/v1/models', bearer(created.key))).status).toBe(200);
    expect((await openaiWith(created.key).models.list()).data.length).toBeGreaterThan(0);
    const r = await svc(['requests', 'revoke', created.access_request_id]);
    expect(r.exitCode, r.stderr).toBe(0);
    await expectInvalidToken(created.key, /not approved/);
    const listed = JSON.parse((await svc(['keys', 'list', '--json'])).stdout) as { id: string; status: string }[];
    expect(listed.find((k) => k.id === created.id)?.status).toBe('revoked');
  });

  it('an expired key is 401 invalid_token', async () => {
    const created = await createKeyJson(['short-lived', '--expires', '90m']);
    expect(Date.parse(created.expires_at!)).toBe(clock() + 90 * 60_000);
    expect((await openaiWith(created.key).models.list()).data.length).toBeGreaterThan(0);
    clock.advance(91 * 60_000);
    await expectInvalidToken(created.key, /expired/);
    const listed = JSON.parse((await svc(['keys', 'list', '--json'])).stdout) as { id: string; status: string }[];
    expect(listed.find((k) => k.id === created.id)?.status).toBe('expired');
  });

  it("never opens more than its owner may grant now: a demoted owner's power-user key acts as scope_user_user", async () => {
    const created = await alice.post('/svc/v1/keys', { name: 'power', role: 'scope_user_power_user' });
    expect(created.status, created.text).toBe(201);
    const key = created.body.key as string;
    expect((await new Api(d.url).get('/svc/v1/models', bearer(key))).status).toBe(200);
    expect((await admin.put('/svc/v1/users/alice/role', { role: 'user' })).status).toBe(200);
    try {
      const refused = await new Api(d.url).get('/svc/v1/models', bearer(key));
      expect(refused.status).toBe(403);
      expect(refused.body.error.code).toBe('insufficient_scope');
      expect((await openaiWith(key).models.list()).data.length).toBeGreaterThan(0);
    } finally {
      expect((await admin.put('/svc/v1/users/alice/role', { role: 'power_user' })).status).toBe(200);
    }
    expect((await alice.post(`/svc/v1/keys/${created.body.id}/revoke`)).status).toBe(200);
    await expectInvalidToken(key, /revoked/);
  });

  it('a key svc never made is 401 invalid_token', async () => {
    await expectInvalidToken(`svc_${'A'.repeat(43)}`, /not known/);
  });
});

describe('a key the person may not grant: a clear error, and nothing created', () => {
  beforeAll(() => loginCli('bob'));

  it('a plain user asking for scope_user_power_user: 403 privilege_escalation, exit 4', async () => {
    const before = counts();
    const r = await svc(['keys', 'create', 'too-much', '--role', 'scope_user_power_user']);
    expect(r.exitCode).toBe(4);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('can grant at most scope_user_user');
    const api = await bob.post('/svc/v1/keys', { name: 'too-much', role: 'scope_user_power_user' });
    expect(api.status).toBe(403);
    expect(api.body.error).toMatchObject({ type: 'forbidden_error', code: 'privilege_escalation' });
    expect(counts()).toEqual(before);
    expect((await bob.get('/svc/v1/keys')).body.data).toEqual([]);
    expect((await bob.get('/svc/v1/access-requests')).body.data.filter((x: { status: string }) => x.status !== 'draft')).toEqual([]);
  });

  it("another person's MCP instance: 403 mcp_instance_not_owned, exit 4; a disabled one: 400 mcp_instance_disabled, exit 1", async () => {
    const before = counts();
    const theirs = await svc(['keys', 'create', 'borrowed', '--mcp', `${mcp.url}=${aliceMcp}`]);
    expect(theirs.exitCode).toBe(4);
    expect(theirs.stderr).toContain('is not one of yours');
    const api = await bob.post('/svc/v1/keys', { name: 'borrowed', mcp_servers: [{ url: mcp.url, instance_ids: [aliceMcp] }] });
    expect(api.status).toBe(403);
    expect(api.body.error.code).toBe('mcp_instance_not_owned');
    const off = await svc(['keys', 'create', 'off', '--mcp', `${mcp.url}=${bobMcpOff}`]);
    expect(off.exitCode).toBe(1);
    expect(off.stderr).toContain('is disabled');
    const offApi = await bob.post('/svc/v1/keys', { name: 'off', mcp_servers: [{ url: mcp.url, instance_ids: [bobMcpOff] }] });
    expect(offApi.status).toBe(400);
    expect(offApi.body.error.code).toBe('mcp_instance_disabled');
    // an instance of another URL than the one named
    const wrongUrl = await bob.post('/svc/v1/keys', { name: 'x', mcp_servers: [{ url: 'http://127.0.0.1:9/mcp', instance_ids: [bobMcpOff] }] });
    expect(wrongUrl.status).toBe(403);
    expect(counts()).toEqual(before);
  });

  it('malformed input: usage errors (exit 2) in the CLI, 400 naming the field in the API, cross-site 403', async () => {
    const before = counts();
    for (const args of [
      ['keys', 'create', 'x', '--expires', '10 days'],
      ['keys', 'create', 'x', '--expires', '0d'],
      ['keys', 'create', 'x', '--role', 'admin'],
      ['keys', 'create', 'x', '--mcp', 'no-equals-sign'],
      ['keys', 'create'],
    ]) {
      const r = await svc(args);
      expect(r.exitCode, args.join(' ')).toBe(2);
    }
    const cases: [unknown, string][] = [
      [{}, 'name'],
      [{ name: '' }, 'name'],
      [{ name: 'a\u001b[31m' }, 'name'],
      [{ name: 'x', role: 'admin' }, 'role'],
      [{ name: 'x', expires_in: 5 }, 'expires_in'],
      [{ name: 'x', expires_in: 1e12 }, 'expires_in'],
      [{ name: 'x', mcp_servers: [{ url: 'file:///etc/passwd', instance_ids: ['a'] }] }, 'mcp_servers.0.url'],
      [{ name: 'x', key: 'svc_chosen' }, ''],
    ];
    for (const [body, param] of cases) {
      const res = await bob.post('/svc/v1/keys', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.code).toBe('invalid_body');
      if (param) expect(res.body.error.param).toBe(param);
    }
    const crossSite = await bob.post('/svc/v1/keys', { name: 'csrf' }, { Origin: 'http://evil.example' });
    expect(crossSite.status).toBe(403);
    expect(crossSite.body.error.code).toBe('cross_origin');
    expect((await new Api(d.url).post('/svc/v1/keys', { name: 'anon' })).status).toBe(401);
    expect((await bob.post('/svc/v1/keys/nope/revoke')).status).toBe(404);
    expect(counts()).toEqual(before);
  });
});
