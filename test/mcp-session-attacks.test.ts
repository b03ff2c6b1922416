/**
 * Attacks on the binding of MCP sessions to the grant that began them (src/mcp/session-ids.ts),
 * through the real daemon: header tricks that could make svc check one id and send another
 * upstream, the server's own id reaching the app through some other answer, an id carried to
 * another instance or grant, and a client holding an id from before ids were wrapped.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { startMcpServer } from './helpers/mcp-servers.js';
import { authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { startRiskyServer } from './helpers/risky-mcp.js';
import { eventually } from './helpers/wait.js';

const PROTOCOL = '2025-11-25';
const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
const PING = { jsonrpc: '2.0', id: 2, method: 'ping' };

/**
 * An upstream that names sessions as a test wants: a fresh id on every answer (`/rotating`), one
 * on an error answer (`/error-400`, `/error-404`), one with a byte outside ASCII (`/latin1`).
 * It records the session id each request carried.
 */
async function startNamingServer() {
  const received: { path: string; method: string; session: string | string[] | undefined }[] = [];
  let n = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received.push({ path: req.url ?? '', method: req.method ?? '', session: req.headers['mcp-session-id'] });
      const id = `srv-${req.url?.slice(1)}-${++n}`;
      const json = (status: number, sid: string, body: unknown) => res.writeHead(status, { 'Content-Type': 'application/json', 'Mcp-Session-Id': sid }).end(JSON.stringify(body));
      if (req.url === '/error-400') json(400, id, { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'bad' } });
      else if (req.url === '/error-404') json(404, id, { jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } });
      else if (req.url === '/latin1') json(200, 'caf\u00e9', { jsonrpc: '2.0', id: 1, result: {} });
      else if (req.method === 'GET') {
        res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Mcp-Session-Id': id });
        // an event whose data takes two lines, with an id
        res.end(': hello\n\nid: ev-1\ndata: {"jsonrpc":"2.0",\ndata: "method":"notifications/message"}\n\n');
      } else if (req.method === 'DELETE') res.writeHead(200, { 'Mcp-Session-Id': id }).end();
      else json(200, id, { jsonrpc: '2.0', id: 1, result: {} });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: (path: string) => `${base}${path}`,
    received,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** A raw request, so a test can send a header twice or with bytes fetch would refuse. */
function raw(url: string, method: string, headers: http.OutgoingHttpHeaders, body?: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('attacks on the binding of MCP sessions to their grant', () => {
  let d: TestDaemon;
  let mcp: Awaited<ReturnType<typeof startMcpServer>>;
  let naming: Awaited<ReturnType<typeof startNamingServer>>;
  let risky: Awaited<ReturnType<typeof startRiskyServer>>;
  let alice: Api;
  let admin: Api;
  const ids: Record<string, string> = {};
  const keys: Record<string, string> = {};
  const keyIds: Record<string, string> = {};

  const proxy = (instance: string) => `${d.url}/svc/v1/apps/mcps/${ids[instance]}/mcp`;
  const post = (instance: string, key: string, sessionId: string | string[] | undefined, body: unknown = PING) =>
    raw(
      proxy(instance),
      'POST',
      {
        Authorization: `Bearer ${key}`,
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        'Mcp-Protocol-Version': PROTOCOL,
        ...(sessionId === undefined ? {} : { 'Mcp-Session-Id': sessionId }),
      },
      JSON.stringify(body),
    );
  /**
   * A session of `key` on `instance`, begun with raw requests (the SDK client would open a GET
   * stream of its own meanwhile): the app's id for it, and the server's.
   */
  async function session(instance: string, key: string) {
    const before = new Set(mcp.sessions.keys());
    const begun = await post(instance, key, undefined, INITIALIZE);
    expect(begun.status, begun.text).toBe(200);
    const appId = begun.headers['mcp-session-id'] as string;
    expect((await post(instance, key, appId, { jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(202);
    const serverId = [...mcp.sessions.keys()].find((k) => !before.has(k))!;
    expect(serverId).toBeTruthy();
    return { appId, serverId };
  }
  /** The session ids the SDK server was sent since `from`, in order. */
  const sentUpstream = (from: number) => mcp.seen.slice(from).map((s) => s.headers['mcp-session-id']);

  beforeAll(async () => {
    [mcp, naming, risky] = await Promise.all([startMcpServer({ stateful: true }), startNamingServer(), startRiskyServer({ sharedEvents: true })]);
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    alice = await userApi(d.url, admin, 'alice', 'user');
    const add = async (name: string, url: string) => (ids[name] = (await alice.post('/svc/v1/mcps', { name, url })).body.instance.id);
    await add('files', mcp.url);
    // a second instance of the very same server
    await add('files-again', mcp.url);
    for (const p of ['rotating', 'error-400', 'error-404', 'latin1']) await add(p, naming.url(`/${p}`));
    // a server that keeps the events of every session in one store
    await add('notes', risky.url);
    const servers = [
      { url: risky.url, instance_ids: [ids.notes] },
      { url: mcp.url, instance_ids: [ids.files, ids['files-again']] },
      ...['rotating', 'error-400', 'error-404', 'latin1'].map((p) => ({ url: naming.url(`/${p}`), instance_ids: [ids[p]] })),
    ];
    for (const name of ['a', 'b']) {
      const created = await alice.post('/svc/v1/keys', { name: `app ${name}`, mcp_servers: servers });
      expect(created.status, created.text).toBe(201);
      keys[name] = created.body.key;
      keyIds[name] = created.body.id;
    }
  }, 60_000);

  afterAll(async () => {
    await d?.stop();
    await Promise.all([mcp?.close(), naming?.close(), risky?.close()]);
  });

  it('a header given twice, joined by a comma, padded, respelt, empty, very long or not ASCII: never another grant\'s session upstream', async () => {
    const a = await session('files', keys.a);
    const b = await session('files', keys.b);
    const from = mcp.seen.length;
    const refused: [string, string | string[]][] = [
      ['twice, B first', [b.appId, a.appId]],
      ['twice, A first', [a.appId, b.appId]],
      ['comma-joined', `${b.appId}, ${a.appId}`],
      ['comma-joined, no space', `${b.appId},${a.appId}`],
      ['A inside padding', `${b.appId} ${a.appId}`],
      ['tab inside', `${a.appId}\t`.repeat(2)],
      ['upper case', a.appId.toUpperCase()],
      ['prefix in upper case', a.appId.replace(/^svc1/, 'SVC1')],
      ['the raw id', a.serverId],
      ['the raw id, then A', [a.serverId, a.appId]],
      ['base64 padding', `${a.appId}==`],
      ['latin-1 bytes', `${a.appId}\u00e9`],
      ['very long', `${a.appId}${'A'.repeat(12_000)}`],
    ];
    for (const [what, sid] of refused) {
      const res = await post('files', keys.b, sid);
      expect([404, 431], `${what}: ${res.status} ${res.text}`).toContain(res.status);
      expect(res.headers['mcp-session-id'], what).toBeUndefined();
    }
    // none of them went upstream at all
    expect(sentUpstream(from)).toEqual([]);

    // padding is trimmed by HTTP itself: B's own id, padded, is B's own session, and the server's id for it goes up
    const padded = await post('files', keys.b, ` ${b.appId} `);
    expect(padded.status, padded.text).toBe(200);
    // an empty value is no session: nothing of A's goes up (the server, stateful, refuses a request with none)
    await post('files', keys.b, '');
    expect(sentUpstream(from)).toEqual([b.serverId, undefined]);
  });

  it('an id carried to another instance of the same server, or to another grant, is unknown; the owner goes on', async () => {
    const a = await session('files', keys.a);
    const from = mcp.seen.length;
    expect((await post('files-again', keys.a, a.appId)).status).toBe(404);
    expect((await post('files-again', keys.b, a.appId)).status).toBe(404);
    expect((await post('files', keys.b, a.appId)).status).toBe(404);
    expect(sentUpstream(from)).toEqual([]);
    expect((await post('files', keys.a, a.appId)).status).toBe(200);
  });

  it("the server's own id reaches the app in no answer: not an answer's headers, a GET stream's, a DELETE's, nor the logs or the activity", async () => {
    const a = await session('files', keys.a);
    const headersSeen: (string | undefined)[] = [];
    const call = await post('files', keys.a, a.appId, { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'echo', arguments: { message: 'hi' } } });
    headersSeen.push(call.headers['mcp-session-id'] as string | undefined);
    // the GET stream: its headers are all a test needs
    const ac = new AbortController();
    const listen = await fetch(proxy('files'), { headers: { Authorization: `Bearer ${keys.a}`, Accept: 'text/event-stream', 'Mcp-Session-Id': a.appId, 'Mcp-Protocol-Version': PROTOCOL }, signal: ac.signal });
    expect(listen.status).toBe(200);
    headersSeen.push(listen.headers.get('mcp-session-id') ?? undefined);
    ac.abort();
    await listen.body?.cancel().catch(() => undefined);
    const end = await raw(proxy('files'), 'DELETE', { Authorization: `Bearer ${keys.a}`, 'Mcp-Session-Id': a.appId, 'Mcp-Protocol-Version': PROTOCOL });
    expect(end.status).toBe(200);
    headersSeen.push(end.headers['mcp-session-id'] as string | undefined);
    // the server names the session on each: the app gets its own wrapped id back, never the server's
    for (const seen of headersSeen) if (seen !== undefined) expect(seen).toBe(a.appId);
    expect(headersSeen.some((s) => s !== undefined)).toBe(true);
    // the server's own answer to an id it no longer knows (svc wraps nothing here)
    const gone = await post('files', keys.a, a.appId);
    expect(gone.status).toBe(404);
    expect(JSON.stringify(gone.headers) + gone.text).not.toContain(a.serverId);

    // REST tool endpoints run their own session; none of its ids reach the app
    const refresh = await raw(`${d.url}/svc/v1/apps/mcps/${ids.files}/tools/refresh`, 'POST', { Authorization: `Bearer ${keys.a}`, 'Content-Type': 'application/json' }, '{}');
    expect(refresh.status, refresh.text).toBe(200);
    expect(refresh.headers['mcp-session-id']).toBeUndefined();
    const execute = await raw(`${d.url}/svc/v1/apps/mcps/${ids.files}/tools/echo/execute`, 'POST', { Authorization: `Bearer ${keys.a}`, 'Content-Type': 'application/json' }, JSON.stringify({ params: { message: 'rest' } }));
    expect(execute.status, execute.text).toBe(200);
    expect(execute.headers['mcp-session-id']).toBeUndefined();
    for (const sid of mcp.sessions.keys()) expect(refresh.text + execute.text).not.toContain(sid);

    // the log lines and the activity name neither the server's ids nor the app's
    const activity = await eventually(async () => {
      const events = (await alice.get('/svc/v1/activity')).body.data as unknown[];
      return events.length > 0 ? JSON.stringify(events) : null;
    }, 'activity events');
    for (const text of [activity, d.logs.join('\n')]) {
      expect(text).not.toContain(a.serverId);
      expect(text).not.toContain(a.appId.split('.')[1]);
    }
  });

  it('a server that names a session on an error answer, or a new one mid-session: the app gets only ids bound to its grant', async () => {
    for (const [path, status] of [
      ['error-400', 400],
      ['error-404', 404],
    ] as const) {
      const res = await post(path, keys.a, undefined, INITIALIZE);
      expect(res.status).toBe(status);
      const given = res.headers['mcp-session-id'] as string;
      expect(given).toMatch(/^svc1\./);
      expect(given).not.toContain(`srv-${path}`);
      // and B cannot use what A was given
      const from = naming.received.length;
      expect((await post(path, keys.b, given)).status).toBe(404);
      expect(naming.received.length).toBe(from);
    }

    // a new id on every answer: each is wrapped for A, goes up as the server's, and is refused to B
    const first = await post('rotating', keys.a, undefined, INITIALIZE);
    const firstId = first.headers['mcp-session-id'] as string;
    const second = await post('rotating', keys.a, firstId);
    expect(second.status).toBe(200);
    const secondId = second.headers['mcp-session-id'] as string;
    expect(secondId).not.toBe(firstId);
    expect(secondId).toMatch(/^svc1\./);
    const from = naming.received.length;
    expect((await post('rotating', keys.a, secondId)).status).toBe(200);
    expect(naming.received.at(-1)!.session).toBe(Buffer.from(secondId.split('.')[1], 'base64url').toString());
    expect((await post('rotating', keys.b, secondId)).status).toBe(404);
    expect((await post('rotating', keys.b, firstId)).status).toBe(404);
    expect(naming.received.length).toBe(from + 1);
    // the GET stream and DELETE of the server name ids too: wrapped as well
    const listen = await raw(proxy('rotating'), 'GET', { Authorization: `Bearer ${keys.a}`, Accept: 'text/event-stream', 'Mcp-Session-Id': secondId });
    expect(listen.headers['mcp-session-id']).toMatch(/^svc1\./);
    // its event's id is bound too, and its data still reads as the two lines it came in
    expect(listen.text).toMatch(/^: hello\n\nid: svc1\.[\w-]+\.[\w-]+\ndata: \{"jsonrpc":"2.0",\ndata: "method":"notifications\/message"\}\n\n$/);
    const end = await raw(proxy('rotating'), 'DELETE', { Authorization: `Bearer ${keys.a}`, 'Mcp-Session-Id': secondId });
    expect(end.headers['mcp-session-id']).toMatch(/^svc1\./);
    for (const r of [first, second, listen, end]) expect(JSON.stringify(r.headers)).not.toContain('srv-');
  });

  it('a server id outside ASCII (which MCP does not allow) is wrapped and unwrapped to the same bytes upstream', async () => {
    const first = await post('latin1', keys.a, undefined, INITIALIZE);
    expect(first.status).toBe(200);
    const given = first.headers['mcp-session-id'] as string;
    expect(given).toMatch(/^svc1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    const again = await post('latin1', keys.a, given);
    expect(again.status, again.text).toBe(200);
    expect(Buffer.from(String(naming.received.at(-1)!.session), 'latin1')).toEqual(Buffer.from(String(naming.received.at(-2)!.session ?? 'caf\u00e9'), 'latin1'));
  });

  it('an id from before ids were wrapped (the server\'s own) is 404; the SDK client does not begin a new session by itself: the app must', async () => {
    const a = await session('files', keys.a);
    // an app that kept the server's id from an older svc, and resumes with it
    const stale = new Client({ name: 'old', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(proxy('files')), { sessionId: a.serverId, requestInit: { headers: { Authorization: `Bearer ${keys.a}` } } });
    // connect() with a session id skips initialize (a resumed session), so the first call shows the 404
    await stale.connect(transport);
    const failed = await stale.callTool({ name: 'echo', arguments: { message: 'old' } }).then(
      () => null,
      (err: unknown) => err,
    );
    expect(failed).toBeInstanceOf(StreamableHTTPError);
    expect((failed as StreamableHTTPError).code).toBe(404);
    // the transport still holds the stale id: the SDK leaves it to the app to start again
    expect(transport.sessionId).toBe(a.serverId);
    await stale.close();
    // a new client with no id begins a session of its own, which works
    const fresh = new Client({ name: 'new', version: '1.0.0' });
    const freshTransport = new StreamableHTTPClientTransport(new URL(proxy('files')), { requestInit: { headers: { Authorization: `Bearer ${keys.a}` } } });
    await fresh.connect(freshTransport);
    expect(freshTransport.sessionId).toMatch(/^svc1\./);
    expect(await fresh.callTool({ name: 'echo', arguments: { message: 'new' } })).toMatchObject({ content: [{ type: 'text', text: 'echo: new' }] });
    await fresh.close();
  });

  it("an event id of A's stream, given by B as its Last-Event-ID, does not replay A's stream to B; A resumes with it", async () => {
    const begin = async (key: string) => {
      const begun = await post('notes', key, undefined, INITIALIZE);
      const sid = begun.headers['mcp-session-id'] as string;
      expect((await post('notes', key, sid, { jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(202);
      return sid;
    };
    const [a, b] = [await begin(keys.a), await begin(keys.b)];
    const call = await post('notes', keys.a, a, { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'read_notes', arguments: {} } });
    expect(call.text).toContain('the notes');
    // the ids of A's events, as A's app got them: the first is the stream's priming event
    const eventIds = [...call.text.matchAll(/^id: ?(.*)$/gm)].map((m) => m[1].trim());
    expect(eventIds.length).toBeGreaterThan(1);
    const resume = (key: string, sid: string, lastEventId: string, signal?: AbortSignal) =>
      fetch(proxy('notes'), { headers: { Authorization: `Bearer ${key}`, Accept: 'text/event-stream', 'Mcp-Session-Id': sid, 'Mcp-Protocol-Version': PROTOCOL, 'Last-Event-ID': lastEventId }, signal });
    /** what a stream says until `wanted` is in it (or it ends) */
    const readUntil = async (res: Response, wanted: string) => {
      const reader = res.body!.getReader();
      let text = '';
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        text += Buffer.from(value).toString('utf8');
        if (text.includes(wanted)) break;
      }
      await reader.cancel().catch(() => undefined);
      return text;
    };

    // B, on its own session, names A's first event: svc knows no such event for B
    const ac = new AbortController();
    const stolen = await resume(keys.b, b, eventIds[0], ac.signal);
    const stolenText = stolen.status === 200 ? await readUntil(stolen, 'the notes') : await stolen.text();
    ac.abort();
    expect(stolenText).not.toContain('the notes');
    expect(stolen.status).toBe(404);
    // A resumes its own stream with the same id and gets what came after it
    const own = await resume(keys.a, a, eventIds[0]);
    expect(own.status).toBe(200);
    const ownText = await readUntil(own, 'the notes');
    expect(ownText).toContain('the notes');
    // the ids A is given again are bound to it too
    const again = [...ownText.matchAll(/^id: ?(.*)$/gm)].map((m) => m[1].trim());
    for (const id of [...eventIds, ...again]) expect(id).toMatch(/^svc1\./);
  });

  it("a held call's answer, plain or streamed, names the session as the app's id and its events by ids bound to the grant", async () => {
    const begun = await post('notes', keys.a, undefined, INITIALIZE);
    const sid = begun.headers['mcp-session-id'] as string;
    expect((await post('notes', keys.a, sid, { jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(202);
    const pending = (n: number) =>
      eventually(async () => {
        const list = (await alice.get('/svc/v1/calls?status=pending')).body.data as { id: string; arguments: { id: string } }[];
        return list.find((c) => c.arguments.id === `n${n}`);
      }, `the held call n${n}`);
    for (const [n, meta] of [
      [1, undefined],
      [2, { progressToken: 'p' }],
    ] as const) {
      const answer = post('notes', keys.a, sid, { jsonrpc: '2.0', id: 20 + n, method: 'tools/call', params: { name: 'delete_note', arguments: { id: `n${n}` }, ...(meta ? { _meta: meta } : {}) } });
      expect((await alice.post(`/svc/v1/calls/${(await pending(n)).id}/approve`, {})).status).toBe(200);
      const res = await answer;
      expect(res.text).toContain(`deleted n${n}`);
      // the plain answer is the upstream's, with its headers; the streamed one is svc's own stream
      expect(res.headers['mcp-session-id']).toBe(n === 1 ? sid : undefined);
      const eventIds = [...res.text.matchAll(/^id: ?(.*)$/gm)].map((m) => m[1]);
      expect(eventIds.length).toBeGreaterThan(0);
      for (const id of eventIds) expect(id).toMatch(/^svc1\./);
    }
  });

  it('two grants of the same app and person: a session of one is unknown to the other', async () => {
    const { clientId, secret } = await registerClient(admin, { name: 'Same App' });
    const grant = async () => {
      const created = await new Api(d.url).post('/svc/v1/apps/request-access', {
        app_client_id: clientId,
        flow_type: 'popup',
        requested_role: 'scope_user_user',
        requested: { version: '1', mcp_servers: [{ url: mcp.url }] },
      });
      expect(created.status, created.text).toBe(201);
      const approved = await alice.put(`/svc/v1/access-requests/${created.body.id}/approve`, {
        approved_role: 'scope_user_user',
        approved: { version: '1', mcp_servers: [{ url: mcp.url, instance_ids: [ids.files] }] },
      });
      expect(approved.status, approved.text).toBe(200);
      const { tokens } = await authorize(await oidcConfig(d, clientId, secret), alice, approved.body.access_request_scope);
      return tokens!.access_token as string;
    };
    const [first, second] = [await grant(), await grant()];
    const a = await session('files', first);
    const from = mcp.seen.length;
    expect((await post('files', second, a.appId)).status).toBe(404);
    expect(sentUpstream(from)).toEqual([]);
    expect((await post('files', first, a.appId)).status).toBe(200);
  });

  it("a revoked grant's session: its own key is refused, and no other grant can take the session over", async () => {
    const created = await alice.post('/svc/v1/keys', { name: 'short-lived', mcp_servers: [{ url: mcp.url, instance_ids: [ids.files] }] });
    const a = await session('files', created.body.key);
    expect((await alice.post(`/svc/v1/keys/${created.body.id}/revoke`)).status).toBe(200);
    const from = mcp.seen.length;
    expect((await post('files', created.body.key, a.appId)).status).toBe(401);
    expect((await post('files', keys.b, a.appId)).status).toBe(404);
    expect(sentUpstream(from)).toEqual([]);
  });
});
