/**
 * No secret in plaintext (decisions: Storage): an MCP header value, the admin password, a user's
 * password and the raw session cookies never appear in any file of the data dir, in a log line or
 * in an API response, however they are encoded; the data dir is 0700 and every file in it 0600.
 */
import { randomBytes } from 'node:crypto';
import { lstat, readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storedOnDisk } from './helpers/store.js';
import { loadCliSession } from '../src/cli/credentials.js';
import { noKeychain, startTestDaemon, tempDir, type TestDaemon } from './helpers/daemon.js';
import { Api, type ApiResponse, createBody } from './helpers/http.js';

const MCP_URL = 'http://127.0.0.1:9/mcp';

/** Every file under `dir`, with its bytes and mode; directories with their mode. */
async function walk(dir: string): Promise<{ files: { file: string; bytes: Buffer; mode: number }[]; dirs: { dir: string; mode: number }[] }> {
  const files: { file: string; bytes: Buffer; mode: number }[] = [];
  const dirs: { dir: string; mode: number }[] = [{ dir, mode: (await lstat(dir)).mode & 0o777 }];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      const sub = await walk(full);
      files.push(...sub.files);
      dirs.push(...sub.dirs);
    } else {
      // the CLI's socket holds no bytes to read; its mode is checked like a file's
      const bytes = entry.isSocket() ? Buffer.alloc(0) : await readFile(full);
      files.push({ file: full, bytes, mode: (await lstat(full)).mode & 0o777 });
    }
  }
  return { files, dirs };
}

/** The forms a secret could be written in without being encrypted. */
function spellings(secret: string): Buffer[] {
  const raw = Buffer.from(secret, 'utf8');
  return [
    raw,
    Buffer.from(JSON.stringify(secret).slice(1, -1), 'utf8'),
    Buffer.from(raw.toString('base64').replace(/=+$/, '')),
    Buffer.from(raw.toString('base64url')),
    Buffer.from(raw.toString('hex')),
    Buffer.from(encodeURIComponent(secret)),
  ];
}

const leaks = (haystack: Buffer | string, secret: string) => {
  const h = typeof haystack === 'string' ? Buffer.from(haystack, 'utf8') : haystack;
  return spellings(secret).some((s) => h.includes(s));
};

describe('no secret in plaintext', () => {
  let d: TestDaemon;
  let dataDir: string;
  const responses: { what: string; res: ApiResponse }[] = [];
  const secrets: Record<string, string> = {};

  /** Records every response so its body can be searched afterwards. */
  const recorded = (api: Api): Api => {
    const request = api.request.bind(api);
    api.request = async (method: string, p: string, body?: unknown, headers?: Record<string, string>) => {
      const res = await request(method, p, body, headers);
      responses.push({ what: `${method} ${p} -> ${res.status}`, res });
      return res;
    };
    return api;
  };

  beforeAll(async () => {
    dataDir = await tempDir('svc-secrets-');
    d = await startTestDaemon({ dataDir });
    secrets.adminPassword = d.adminPassword;
    secrets.mcpHeader = `Bearer sekrit-${randomBytes(12).toString('hex')}`;
    secrets.mcpHeader2 = `key-${randomBytes(12).toString('hex')}`;
    secrets.mcpHeaderRotated = `Bearer rotated-${randomBytes(12).toString('hex')}`;
    secrets.alicePassword = `alice-pw-${randomBytes(12).toString('hex')}`;

    const admin = recorded(new Api(d.url));
    await admin.login('admin', d.adminPassword);
    const [sessionId, sessionSig] = ['svc_session', 'svc_session.sig'].map((name) => new RegExp(`(?:^|; )${name.replace('.', '\\.')}=([^;]+)`).exec(admin.cookieHeader)?.[1]);
    expect(sessionId).toBeTruthy();
    secrets.sessionId = sessionId!;
    secrets.sessionSig = sessionSig!;
    secrets.sessionCookie = admin.cookieHeader;

    // The local CLI's session, written at first start (sealed in cli-session.json).
    const cliCookie = await loadCliSession(dataDir, noKeychain);
    expect(cliCookie).toMatch(/svc_session=/);
    secrets.cliSessionId = /svc_session=([^;]+)/.exec(cliCookie!)![1];

    // An MCP instance with secret header values, then rotated.
    const created = await admin.post('/svc/v1/mcps', {
      name: 'files',
      url: MCP_URL,
      headers: [
        { name: 'Authorization', value: secrets.mcpHeader },
        { name: 'X-Api-Key', value: secrets.mcpHeader2 },
      ],
    });
    expect(created.status).toBe(201);
    const instanceId = created.body.instance.id as string;
    const second = await admin.post('/svc/v1/mcps', { name: 'files-2', url: MCP_URL, headers: [{ name: 'Authorization', value: secrets.mcpHeader }] });
    expect(second.status).toBe(201);
    expect((await admin.patch(`/svc/v1/mcps/${second.body.instance.id}`, { headers: [{ name: 'Authorization', value: secrets.mcpHeaderRotated }] })).status).toBe(200);

    // Bad input carrying the secret must not echo it back.
    expect((await admin.post('/svc/v1/mcps', { name: 'dup', url: MCP_URL, headers: [{ name: 'Authorization', value: secrets.mcpHeader }, { name: 'authorization', value: secrets.mcpHeader }] })).status).toBe(400);
    expect((await admin.post('/svc/v1/mcps', { name: 'nl', url: MCP_URL, headers: [{ name: 'Authorization', value: `${secrets.mcpHeader}\r\nX: y` }] })).status).toBe(400);
    expect((await admin.post('/svc/v1/mcps', { name: 'badname', url: MCP_URL, headers: [{ name: 'Bad Name', value: secrets.mcpHeader }] })).status).toBe(400);
    expect((await admin.post('/svc/v1/mcps', { name: 'extra', url: MCP_URL, headers: [{ name: 'Authorization', value: secrets.mcpHeader, extra: secrets.mcpHeader }] })).status).toBe(400);

    // A second user, with a password, who logs in (and fails once).
    expect((await admin.post('/svc/v1/users', { username: 'alice', role: 'power_user', password: secrets.alicePassword })).status).toBe(201);
    const alice = recorded(new Api(d.url));
    expect((await alice.post('/svc/v1/auth/login', { username: 'alice', password: `${secrets.alicePassword}x` })).status).toBe(401);
    await alice.login('alice', secrets.alicePassword);
    expect((await alice.put('/svc/v1/users/alice/password', { password: 'short' })).status).toBe(400);

    // The whole access-request flow: create, poll, review, approve, poll, list, revoke; deny another.
    const app = recorded(new Api(d.url));
    const req = await app.post('/svc/v1/apps/request-access', createBody({ requested: { version: '1', mcp_servers: [{ url: MCP_URL }] } }));
    expect(req.status).toBe(201);
    const id = req.body.id as string;
    expect((await app.get(`/svc/v1/apps/access-requests/${id}?app_client_id=demo-app`)).body.status).toBe('draft');
    const review = await admin.get(`/svc/v1/access-requests/${id}/review`);
    expect(review.status).toBe(200);
    expect(review.body.mcp_servers[0].instances.map((i: { id: string }) => i.id)).toContain(instanceId);
    const approved = await admin.put(`/svc/v1/access-requests/${id}/approve`, {
      approved_role: 'scope_user_user',
      approved: { version: '1', mcp_servers: [{ url: MCP_URL, instance_ids: [instanceId] }] },
    });
    expect(approved.status).toBe(200);
    expect((await app.get(`/svc/v1/apps/access-requests/${id}?app_client_id=demo-app`)).body.status).toBe('approved');
    expect((await admin.get('/svc/v1/access-requests')).status).toBe(200);
    expect((await admin.post(`/svc/v1/access-requests/${id}/revoke`)).status).toBe(200);
    const other = await app.post('/svc/v1/apps/request-access', createBody());
    expect((await alice.post(`/svc/v1/access-requests/${other.body.id}/deny`)).status).toBe(200);

    // Everything else a user can read.
    for (const p of ['/svc/v1/auth/me', '/svc/v1/users', '/svc/v1/mcps', `/svc/v1/mcps/${instanceId}`, '/svc/v1/openapi.json', '/ui']) {
      expect((await admin.get(p)).status).toBe(200);
    }
    await alice.post('/svc/v1/auth/logout');
  });

  afterAll(async () => {
    await d?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('the leak detector finds each secret in every spelling it checks', () => {
    for (const secret of Object.values(secrets)) {
      for (const spelling of spellings(secret)) expect(leaks(Buffer.concat([Buffer.from('{"x":"'), spelling, Buffer.from('"}')]), secret)).toBe(true);
    }
  });

  it('GET /svc/v1/mcps shows header names only', async () => {
    const list = responses.filter((r) => r.what.startsWith('GET /svc/v1/mcps ->')).at(-1)!.res;
    const files = list.body.data.find((m: { name: string }) => m.name === 'files');
    expect(files.header_names).toEqual(['Authorization', 'X-Api-Key']);
    expect(Object.keys(files)).not.toContain('headers');
    expect(JSON.stringify(list.body)).not.toContain('sekrit');
  });

  it('appears in no API response body', () => {
    expect(responses.length).toBeGreaterThan(20);
    for (const { what, res } of responses) {
      for (const [name, secret] of Object.entries(secrets)) {
        expect(leaks(res.text, secret), `${name} in the body of ${what}`).toBe(false);
      }
    }
  });

  it('appears in no log line', () => {
    const logs = d.logs.join('');
    expect(d.logs.length).toBeGreaterThan(20);
    for (const [name, secret] of Object.entries(secrets)) expect(leaks(logs, secret), `${name} in the logs`).toBe(false);
    // The first admin password is shown once, on the terminal, and only there.
    expect(d.notices.join('\n')).toContain(d.adminPassword);
  });

  it('appears in no file of the data dir, and every file is 0600 in a 0700 dir', async () => {
    // Also once the daemon has stopped and flushed everything.
    for (const phase of ['running', 'stopped']) {
      if (phase === 'stopped') await d.close();
      const { files, dirs } = await walk(dataDir);
      if (phase === 'running') console.info(`secrets: data dir holds ${files.map((f) => path.relative(dataDir, f.file)).join(', ')}`);
      expect(files.map((f) => path.basename(f.file))).toEqual(expect.arrayContaining(['db.json', 'master.key', 'cli-session.json']));
      for (const { file, bytes } of files) {
        for (const [name, secret] of Object.entries(secrets)) {
          expect(leaks(bytes, secret), `${name} in ${path.relative(dataDir, file)} (${phase})`).toBe(false);
        }
      }
      for (const { file, mode } of files) expect(mode.toString(8), `mode of ${path.relative(dataDir, file)} (${phase})`).toBe('600');
      for (const { dir, mode } of dirs) expect(mode.toString(8), `mode of ${dir} (${phase})`).toBe('700');
    }
    // The header values are in the store, sealed: the instance records carry them, just not readably.
    const db = await storedOnDisk(dataDir);
    const headers = db.mcp_instances.flatMap((m: { headers: { value: string }[] }) => m.headers.map((h) => h.value));
    expect(headers.length).toBe(3);
    for (const v of headers) expect(v).toMatch(/^sealed:v1:/);
  });
});
