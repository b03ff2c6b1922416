import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, createBody, userApi } from './helpers/http.js';

describe('security: CSRF, open redirects, Host tricks, brute force, oversize and slow clients', () => {
  let d: TestDaemon;
  let admin: Api;

  beforeAll(async () => {
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
  });
  afterAll(() => d.stop());

  const draft = async () => (await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ requested_role: 'scope_user_user' }))).body.id as string;
  const crossSite: Record<string, string>[] = [
    { Origin: 'http://evil.example' },
    { 'Sec-Fetch-Site': 'cross-site' },
    { Origin: 'null' },
    { Origin: 'http://127.0.0.1:1' },
  ];

  it('refuses cross-site approve, deny and revoke carrying the session cookie', async () => {
    const id = await draft();
    for (const headers of crossSite) {
      const approve = await admin.put(`/svc/v1/access-requests/${id}/approve`, { approved_role: 'scope_user_user' }, headers);
      expect(approve.status, JSON.stringify(headers)).toBe(403);
      expect(approve.body.error.code).toBe('cross_origin');
      expect((await admin.post(`/svc/v1/access-requests/${id}/deny`, undefined, headers)).status).toBe(403);
    }
    expect((await new Api(d.url).get(`/svc/v1/apps/access-requests/${id}?app_client_id=demo-app`)).body.status).toBe('draft');
    const approved = await admin.put(`/svc/v1/access-requests/${id}/approve`, { approved_role: 'scope_user_user' }, { Origin: d.baseUrl, 'Sec-Fetch-Site': 'same-origin' });
    expect(approved.status).toBe(200);
    for (const headers of crossSite) expect((await admin.post(`/svc/v1/access-requests/${id}/revoke`, undefined, headers)).status).toBe(403);
    expect((await new Api(d.url).get(`/svc/v1/apps/access-requests/${id}?app_client_id=demo-app`)).body.status).toBe('approved');
  });

  it('refuses cross-site logins, JSON and form alike, and a form without its CSRF token', async () => {
    const json = await new Api(d.url).post('/svc/v1/auth/login', { username: 'admin', password: d.adminPassword }, { Origin: 'http://evil.example' });
    expect(json.status).toBe(403);
    expect(json.headers.get('set-cookie')).toBeNull();
    const form = await new Api(d.url).request('POST', '/ui/login', `username=admin&password=${encodeURIComponent(d.adminPassword)}&next=%2Fui`, {
      'Content-Type': 'application/x-www-form-urlencoded',
      'Sec-Fetch-Site': 'cross-site',
    });
    expect(form.status).toBe(403);
    const noToken = await new Api(d.url).request('POST', '/ui/login', `username=admin&password=${encodeURIComponent(d.adminPassword)}&next=%2Fui`, {
      'Content-Type': 'application/x-www-form-urlencoded',
    });
    expect(noToken.status).toBe(403);
    expect(noToken.headers.get('set-cookie') ?? '').not.toMatch(/svc_session=[^;]/);
  });

  it('refuses form-encoded bodies on the JSON API', async () => {
    const res = await new Api(d.url).request('POST', '/svc/v1/apps/request-access', 'app_client_id=x&flow_type=popup&requested_role=scope_user_user&requested[version]=1', {
      'Content-Type': 'application/x-www-form-urlencoded',
    });
    expect(res.status).toBe(400);
  });

  it('never redirects off-origin after login', async () => {
    for (const next of ['//evil.example/x', 'https://evil.example/', '/\\evil.example', 'javascript:alert(1)', '%2F%2Fevil.example', '/ui/../..//evil.example']) {
      const page = new Api(d.url);
      const form = await page.get(`/ui/login?next=${encodeURIComponent(next)}`);
      const csrf = /name="_csrf" value="([^"]+)"/.exec(form.text)![1];
      const res = await page.request('POST', '/ui/login', new URLSearchParams({ username: 'admin', password: d.adminPassword, next, _csrf: csrf }).toString(), {
        'Content-Type': 'application/x-www-form-urlencoded',
      });
      expect(res.status, next).toBe(303);
      const location = new URL(res.headers.get('location')!, d.baseUrl);
      expect(location.origin, next).toBe(new URL(d.baseUrl).origin);
    }
  });

  /** fetch will not send a forged Host header; node:http will. */
  function withHost(host: string, body: unknown): Promise<{ status: number; body: any }> {
    const { port } = new URL(d.url);
    const payload = JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = http.request(
        { host: '127.0.0.1', port, path: '/svc/v1/apps/request-access', method: 'POST', setHost: false, headers: { Host: host, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) } },
        (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  }

  it('builds review_url from the base URL whatever the Host header says, and refuses unknown hosts', async () => {
    const port = new URL(d.url).port;
    const viaLocalhost = await withHost(`localhost:${port}`, createBody());
    expect(viaLocalhost.status).toBe(201);
    expect(viaLocalhost.body.review_url.startsWith(`${d.baseUrl}/ui/`)).toBe(true);
    for (const host of ['evil.example', `evil.example:${port}`, `127.0.0.1.evil.example:${port}`, `127.0.0.1:${Number(port) + 1}`]) {
      const res = await withHost(host, createBody());
      expect(res.status, host).toBe(400);
      expect(res.body.error.code).toBe('invalid_host');
    }
  });

  it('rate-limits login failures per username and per address', async () => {
    const victim = await userApi(d.url, admin, 'victim', 'user');
    void victim;
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) statuses.push((await new Api(d.url).post('/svc/v1/auth/login', { username: 'victim', password: `wrong-${i}` })).status);
    expect(statuses.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(statuses.slice(5)).toEqual([429, 429]);
    const limited = await new Api(d.url).post('/svc/v1/auth/login', { username: 'victim', password: 'pw-victim-12345' });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(limited.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited' });
    // another account is not locked out by this one
    expect((await new Api(d.url).post('/svc/v1/auth/login', { username: 'admin', password: d.adminPassword })).status).toBe(200);
  });

  it('answers oversize bodies with 413 and oversize headers without a crash', async () => {
    const big = await new Api(d.url).post('/svc/v1/apps/request-access', createBody({ app_client_id: 'x'.repeat(2 * 1024 * 1024) }));
    expect(big.status).toBe(413);
    expect(big.body.error.code).toBe('payload_too_large');
    const headers = await fetch(`${d.url}/svc/v1/health`, { headers: { 'X-Big': 'y'.repeat(64 * 1024) } }).then((r) => r.status, () => 0);
    expect([0, 431]).toContain(headers);
    expect((await new Api(d.url).get('/svc/v1/health')).status).toBe(200);
  });

  it('keeps serving others while slow clients trickle their headers (bounded)', async () => {
    const { port } = new URL(d.url);
    const sockets: net.Socket[] = [];
    for (let i = 0; i < 40; i++) {
      const s = net.connect(Number(port), '127.0.0.1');
      s.on('error', () => undefined);
      s.write(`GET /svc/v1/health HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n`);
      sockets.push(s);
    }
    const trickle = setInterval(() => {
      for (const s of sockets) if (!s.destroyed) s.write('X-Slow: 1\r\n');
    }, 200);
    try {
      const started = Date.now();
      for (let i = 0; i < 10; i++) expect((await new Api(d.url).get('/svc/v1/health')).status).toBe(200);
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      clearInterval(trickle);
      for (const s of sockets) s.destroy();
    }
  });
});
