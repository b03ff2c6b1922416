/**
 * Open MCP streams at scale: more streams to one upstream than a shared connection pool holds all
 * get their headers (no stream waits behind another), a stream beyond the daemon's cap is refused
 * at once with 503 and Retry-After, and a chat goes through beside them.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { eventually } from './helpers/wait.js';

/** An upstream that answers every GET with an event stream it keeps open, and counts the ones open. */
async function streamingUpstream() {
  const open = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET') {
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"jsonrpc":"2.0","id":1,"result":{}}');
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
    res.write(': open\n\n');
    open.add(res);
    res.on('close', () => open.delete(res));
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    open,
    connections: () => new Promise<number>((r) => server.getConnections((_e, n) => r(n))),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe('open MCP streams at scale', () => {
  let d: TestDaemon;
  let upstream: Awaited<ReturnType<typeof streamingUpstream>>;
  let proxyUrl: string;
  let key: string;
  const CAP = 320;

  beforeAll(async () => {
    upstream = await streamingUpstream();
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, grantStreams: 0, maxStreams: CAP } });
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    const instance = (await admin.post('/svc/v1/mcps', { name: 'events', url: upstream.url })).body.instance.id as string;
    const created = await admin.post('/svc/v1/keys', { name: 'host', role: 'scope_user_user', mcp_servers: [{ url: upstream.url, instance_ids: [instance] }], expires_in: null });
    expect(created.status, created.text).toBe(201);
    key = created.body.key;
    proxyUrl = `${d.url}/svc/v1/apps/mcps/${instance}/mcp`;
  });
  afterAll(async () => {
    await d.stop();
    await upstream.close();
  });

  const openStream = async () => {
    const ac = new AbortController();
    const res = await fetch(proxyUrl, { headers: { Authorization: `Bearer ${key}`, Accept: 'text/event-stream' }, signal: ac.signal });
    return { res, close: () => ac.abort() };
  };

  it('more streams than a connection pool holds all open, one beyond the cap is refused at once, and closing leaves no upstream connection', async () => {
    // 300 streams: past the 256 connections a shared pool per origin would hold
    const streams = await Promise.all(Array.from({ length: 300 }, () => openStream()));
    try {
      expect(streams.map((s) => s.res.status).filter((s) => s !== 200)).toEqual([]);
      expect(upstream.open.size).toBe(300);
      // a chat-sized call to the same upstream goes straight through beside them
      const post = await fetch(proxyUrl, {
        method: 'POST',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
      });
      expect(post.status).toBe(200);
      // up to the cap, then a clear refusal, at once
      const more = await Promise.all(Array.from({ length: CAP - 300 }, () => openStream()));
      streams.push(...more);
      const started = Date.now();
      const refused = await openStream();
      expect(refused.res.status).toBe(503);
      expect(Date.now() - started).toBeLessThan(2000);
      expect(refused.res.headers.get('retry-after')).toBe('5');
      expect(await refused.res.json()).toMatchObject({ error: { code: 'too_many_streams' } });
      // one closes: there is room again
      streams.pop()!.close();
      const deadline = Date.now() + 5000;
      let again = await openStream();
      while (again.res.status === 503 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
        again = await openStream();
      }
      expect(again.res.status).toBe(200);
      streams.push(again);
    } finally {
      for (const s of streams) s.close();
    }
    await eventually(async () => upstream.open.size === 0 && (await upstream.connections()) === 0, 'every stream and connection to the upstream to close');
  });

  it("a stream's end work waits for its end: the grant's stream slot, its activity event and its log line", async () => {
    // a daemon of its own: one stream per grant, JSON log lines
    const own = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, grantStreams: 1, logFormat: 'json' } });
    try {
      const admin = await new Api(own.url).login('admin', own.adminPassword);
      const instance = (await admin.post('/svc/v1/mcps', { name: 'events', url: upstream.url })).body.instance.id as string;
      const created = await admin.post('/svc/v1/keys', { name: 'one stream', role: 'scope_user_user', mcp_servers: [{ url: upstream.url, instance_ids: [instance] }], expires_in: null });
      const grant = created.body.access_request_id as string;
      const url = `${own.url}/svc/v1/apps/mcps/${instance}/mcp`;
      const listen = (signal?: AbortSignal) => fetch(url, { headers: { Authorization: `Bearer ${created.body.key}`, Accept: 'text/event-stream' }, signal });
      const events = async () => ((await admin.get(`/svc/v1/activity?grant=${grant}`)).body.data as { endpoint: string; status: number; duration_ms: number }[]).filter((e) => e.endpoint.endsWith('/mcp') && e.status === 200);
      const streamLines = () => own.logs.filter((l) => l.includes('"msg":"request"') && l.includes('"method":"GET"') && l.includes('"status":200') && l.includes(`/mcps/${instance}/mcp`));

      const ac = new AbortController();
      const first = await listen(ac.signal);
      expect(first.status).toBe(200);
      // from when the app has the answer's head: svc began the request before that, so the whole
      // life it records is at least as long as the app sees it open, however slow the machine
      const opened = Date.now();
      // while it is open: its slot is taken, and neither its event nor its log line exists yet
      const second = await listen();
      expect(second.status).toBe(429);
      await second.text();
      expect(await events()).toEqual([]);
      expect(streamLines()).toEqual([]);
      // open long enough that its life is told apart from the time to its first byte
      await eventually(() => Date.now() - opened >= 300, 'the stream to be open for 300 ms');

      ac.abort();
      const closed = Date.now();
      // once it ended: the slot is free again, and the event and the line tell its whole life
      const third = await eventually(async () => {
        const res = await listen();
        if (res.status === 200) return res;
        await res.text();
        return undefined;
      }, 'the slot of the ended stream');
      await third.body!.cancel();
      // the oldest: the third stream, cancelled at once, may have ended and been listed since
      const event = (await eventually(async () => ((await events()).length > 0 ? events() : undefined), "the ended stream's activity event")).at(-1)!;
      expect(event.duration_ms).toBeGreaterThanOrEqual(closed - opened - 50);
      const line = JSON.parse(streamLines()[0]) as { ms: number; status: number };
      expect(line.status).toBe(200);
      expect(line.ms).toBeGreaterThanOrEqual(closed - opened - 50);
    } finally {
      await own.stop();
    }
  });
});
