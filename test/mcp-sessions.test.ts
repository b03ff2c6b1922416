/**
 * An MCP session (2025-11-25 era) belongs to the grant that began it: another app's grant on the
 * same instance that learned its id cannot use it (it would read that app's stream), through the
 * real daemon and a stateful MCP SDK server on 127.0.0.1, driven by the MCP SDK client. The app
 * gets an id bound to its grant, never the server's, so the binding outlives a restart.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, tempDir, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { startMcpServer } from './helpers/mcp-servers.js';

describe('MCP sessions and the grants that began them', () => {
  let d: TestDaemon;
  let mcp: Awaited<ReturnType<typeof startMcpServer>>;
  let proxyUrl: string;
  let instance: string;
  let dataDir: string;
  const keys: Record<'a' | 'b', string> = { a: '', b: '' };

  beforeAll(async () => {
    dataDir = await tempDir();
    d = await startTestDaemon({ dataDir });
    mcp = await startMcpServer({ stateful: true });
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    const alice = await userApi(d.url, admin, 'alice', 'user');
    instance = (await alice.post('/svc/v1/mcps', { name: 'files', url: mcp.url })).body.instance.id as string;
    proxyUrl = `${d.url}/svc/v1/apps/mcps/${instance}/mcp`;
    // two apps' grants on the same instance: two API keys
    for (const name of ['a', 'b'] as const) {
      const created = await alice.post('/svc/v1/keys', { name: `app ${name}`, mcp_servers: [{ url: mcp.url, instance_ids: [instance] }] });
      expect(created.status, created.text).toBe(201);
      keys[name] = created.body.key;
    }
  });
  afterAll(async () => {
    await d?.stop();
    await mcp?.close();
  });

  const post = (key: string, sessionId: string, body: unknown) =>
    fetch(proxyUrl, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Session-Id': sessionId, 'Mcp-Protocol-Version': '2025-11-25' },
      body: JSON.stringify(body),
    });

  it("another grant cannot call, listen or end on a session app A began; A's session goes on", async () => {
    const client = new Client({ name: 'app-a', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(proxyUrl), { requestInit: { headers: { Authorization: `Bearer ${keys.a}` } } });
    await client.connect(transport);
    const sessionId = transport.sessionId!;
    expect(sessionId).toBeTruthy();
    // the app holds an id bound to its grant, not the server's own
    const [serverId] = [...mcp.sessions.keys()].slice(-1);
    expect(sessionId).not.toContain(serverId);
    const before = mcp.calls.length;

    const call = await post(keys.b, sessionId, { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'echo', arguments: { message: 'from b' } } });
    expect(call.status).toBe(404);
    expect((await call.json()).error.code).toBe('not_found');
    const listen = await fetch(proxyUrl, { headers: { Authorization: `Bearer ${keys.b}`, Accept: 'text/event-stream', 'Mcp-Session-Id': sessionId } });
    expect(listen.status).toBe(404);
    const end = await fetch(proxyUrl, { method: 'DELETE', headers: { Authorization: `Bearer ${keys.b}`, 'Mcp-Session-Id': sessionId } });
    expect(end.status).toBe(404);
    expect(mcp.calls.slice(before)).toEqual([]);
    // nor can A or B name the server's id, learned some other way: svc knows no such session
    for (const key of [keys.a, keys.b]) expect((await post(key, serverId, { jsonrpc: '2.0', id: 10, method: 'ping' })).status).toBe(404);

    // the session is still A's, and works
    expect(await client.callTool({ name: 'echo', arguments: { message: 'from a' } })).toMatchObject({ content: [{ type: 'text' }] });
    // B begins its own and uses it
    const other = new Client({ name: 'app-b', version: '1.0.0' });
    const otherTransport = new StreamableHTTPClientTransport(new URL(proxyUrl), { requestInit: { headers: { Authorization: `Bearer ${keys.b}` } } });
    await other.connect(otherTransport);
    expect(otherTransport.sessionId).not.toBe(sessionId);
    await other.callTool({ name: 'echo', arguments: { message: 'b again' } });
    await other.close();
    await client.close();
  });

  it('a session stays bound to its grant across a restart of svc: A goes on with it, B is still refused', async () => {
    const client = new Client({ name: 'app-a', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(proxyUrl), { requestInit: { headers: { Authorization: `Bearer ${keys.a}` } } });
    await client.connect(transport);
    const sessionId = transport.sessionId!;
    await d.stop();
    d = await startTestDaemon({ dataDir });
    proxyUrl = `${d.url}/svc/v1/apps/mcps/${instance}/mcp`;
    const call = { jsonrpc: '2.0', id: 11, method: 'tools/call', params: { name: 'echo', arguments: { message: 'after the restart' } } };
    const refused = await post(keys.b, sessionId, call);
    expect(refused.status).toBe(404);
    const goesOn = await post(keys.a, sessionId, call);
    expect(goesOn.status, await goesOn.clone().text()).toBe(200);
    expect(await goesOn.text()).toContain('after the restart');
  });
});
