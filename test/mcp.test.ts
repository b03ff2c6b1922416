import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { startEverything, startMcpServer } from './helpers/mcp-servers.js';
import { authorize, oidcConfig, registerClient } from './helpers/oauth.js';

const INSTANCE_SECRET = `Bearer inst-${Math.random().toString(36).slice(2)}`;

describe('MCP for apps: REST endpoints and the Streamable HTTP proxy, through the MCP SDK client', () => {
  let d: TestDaemon;
  let admin: Api;
  let alice: Api;
  let stateful: Awaited<ReturnType<typeof startMcpServer>>;
  let stateless: Awaited<ReturnType<typeof startMcpServer>>;
  let stalled: Awaited<ReturnType<typeof startMcpServer>>;
  let everything: Awaited<ReturnType<typeof startEverything>>;
  let everythingSse: Awaited<ReturnType<typeof startEverything>>;
  const ids: Record<string, string> = {};
  let token: string;
  let clientId: string;
  let secret: string | undefined;

  async function addInstance(name: string, url: string, extra: Record<string, unknown> = {}) {
    const res = await alice.post('/svc/v1/mcps', { name, url, ...extra });
    expect(res.status).toBe(201);
    ids[name] = res.body.instance.id;
    return res.body.instance.id as string;
  }

  async function tokenFor(grants: { url: string; instance_ids: string[] }[]) {
    const app = new Api(d.url);
    const created = await app.post('/svc/v1/apps/request-access', {
      app_client_id: clientId,
      flow_type: 'popup',
      requested_role: 'scope_user_user',
      requested: { version: '1', mcp_servers: grants.map((g) => ({ url: g.url })) },
    });
    const approved = await alice.put(`/svc/v1/access-requests/${created.body.id}/approve`, {
      approved_role: 'scope_user_user',
      approved: { version: '1', mcp_servers: grants },
    });
    expect(approved.status).toBe(200);
    const config = await oidcConfig(d, clientId, secret);
    const { tokens } = await authorize(config, alice, approved.body.access_request_scope);
    return { token: tokens!.access_token, id: created.body.id as string };
  }

  const proxyUrl = (id: string) => new URL(`${d.url}/svc/v1/apps/mcps/${id}/mcp`);
  async function sdkClient(id: string, bearer = token, capabilities = {}) {
    const client = new Client({ name: 'test-app', version: '1.0.0' }, { capabilities });
    await client.connect(new StreamableHTTPClientTransport(proxyUrl(id), { requestInit: { headers: { Authorization: `Bearer ${bearer}`, Cookie: 'app_cookie=should-not-pass' } } }));
    return client;
  }
  const bearer = (t = token) => ({ Authorization: `Bearer ${t}` });

  beforeAll(async () => {
    [stateful, stateless, stalled, everything, everythingSse] = await Promise.all([
      startMcpServer({ stateful: true }),
      startMcpServer({ stateful: false }),
      startMcpServer({ stateful: true, stall: true }),
      startEverything(),
      startEverything('sse'),
    ]);
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, mcpTimeoutMs: 1500 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    alice = await userApi(d.url, admin, 'alice', 'user');
    ({ clientId, secret } = await registerClient(admin));
    await addInstance('stateful', stateful.url, { headers: [{ name: 'Authorization', value: INSTANCE_SECRET }] });
    await addInstance('allowlisted', stateful.url, { allow_tools: ['echo', 'slow'] });
    await addInstance('stateless', stateless.url);
    await addInstance('stalled', stalled.url);
    await addInstance('everything', everything.url);
    await addInstance('sse-only', everythingSse.url);
    await addInstance('disabled', stateless.url);
    await addInstance('not-granted', stateless.url);
    const grant = await tokenFor([
      { url: stateful.url, instance_ids: [ids.stateful, ids.allowlisted] },
      { url: stateless.url, instance_ids: [ids.stateless, ids.disabled] },
      { url: stalled.url, instance_ids: [ids.stalled] },
      { url: everything.url, instance_ids: [ids.everything] },
      { url: everythingSse.url, instance_ids: [ids['sse-only']] },
    ]);
    token = grant.token;
    // disabled after it was granted: the grant names it, but calls must stop
    expect((await alice.patch(`/svc/v1/mcps/${ids.disabled}`, { enabled: false })).status).toBe(200);
  }, 60_000);

  afterAll(async () => {
    await d.stop();
    await Promise.all([stateful.close(), stateless.close(), stalled.close(), everything.close(), everythingSse.close()]);
  });

  it('lists and gets only the instances in the grant', async () => {
    const list = await new Api(d.url).get('/svc/v1/apps/mcps', bearer());
    const listed = list.body.data.map((m: { id: string }) => m.id).sort();
    expect(listed).toEqual([ids.stateful, ids.allowlisted, ids.stateless, ids.disabled, ids.stalled, ids.everything, ids['sse-only']].sort());
    expect(list.body.data.find((m: { id: string }) => m.id === ids.disabled).enabled).toBe(false);
    expect((await new Api(d.url).get(`/svc/v1/apps/mcps/${ids.stateful}`, bearer())).body).toMatchObject({ id: ids.stateful, name: 'stateful', enabled: true });
    const other = await new Api(d.url).get(`/svc/v1/apps/mcps/${ids['not-granted']}`, bearer());
    expect(other.status).toBe(404);
    expect(JSON.stringify(list.body)).not.toContain(INSTANCE_SECRET);
  });

  it('refreshes tools (allow-list applied) and executes them over REST', async () => {
    const all = await new Api(d.url).post(`/svc/v1/apps/mcps/${ids.stateful}/tools/refresh`, undefined, bearer());
    expect(all.status).toBe(200);
    expect(all.body.tools.map((t: { name: string }) => t.name)).toEqual(expect.arrayContaining(['echo', 'add', 'secret_tool']));
    expect(all.body.tools.find((t: { name: string }) => t.name === 'echo')).toMatchObject({ description: 'Echoes its message', input_schema: { type: 'object' } });
    const limited = await new Api(d.url).post(`/svc/v1/apps/mcps/${ids.allowlisted}/tools/refresh`, undefined, bearer());
    expect(limited.body.tools.map((t: { name: string }) => t.name).sort()).toEqual(['echo', 'slow']);
    const cached = await new Api(d.url).get(`/svc/v1/apps/mcps/${ids.allowlisted}`, bearer());
    expect(cached.body.tools.map((t: { name: string }) => t.name).sort()).toEqual(['echo', 'slow']);

    const ran = await new Api(d.url).post(`/svc/v1/apps/mcps/${ids.stateful}/tools/add/execute`, { params: { a: 2, b: 3 } }, bearer());
    expect(ran.status).toBe(200);
    expect(ran.body.result.content[0].text).toBe('5');
    const failed = await new Api(d.url).post(`/svc/v1/apps/mcps/${ids.stateful}/tools/fails/execute`, { params: {} }, bearer());
    expect(failed.status).toBe(200);
    expect(failed.body.result.isError).toBe(true);
    // the SDK server answers an unknown tool with an error result, and svc passes that on as it is
    const unknown = await new Api(d.url).post(`/svc/v1/apps/mcps/${ids.stateful}/tools/nope/execute`, { params: {} }, bearer());
    expect(unknown.status).toBe(200);
    expect(unknown.body.result.isError).toBe(true);
    const bad = await new Api(d.url).post(`/svc/v1/apps/mcps/${ids.stateful}/tools/add/execute`, { params: 'x' }, bearer());
    expect(bad.status).toBe(400);
  });

  it('falls back to the older HTTP+SSE transport for a server that only speaks that', async () => {
    const refreshed = await new Api(d.url).post(`/svc/v1/apps/mcps/${ids['sse-only']}/tools/refresh`, undefined, bearer());
    expect(refreshed.status).toBe(200);
    expect(refreshed.body.tools.map((t: { name: string }) => t.name)).toContain('echo');
    const ran = await new Api(d.url).post(`/svc/v1/apps/mcps/${ids['sse-only']}/tools/echo/execute`, { params: { message: 'old transport' } }, bearer());
    expect(ran.status).toBe(200);
    expect(ran.body.result.content[0].text).toBe('Echo: old transport');
  });

  it('refuses a disallowed tool over REST before anything goes upstream', async () => {
    const before = stateful.calls.length;
    const res = await new Api(d.url).post(`/svc/v1/apps/mcps/${ids.allowlisted}/tools/secret_tool/execute`, { params: {} }, bearer());
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('tool_not_allowed');
    expect(stateful.calls.slice(before)).not.toContain('secret_tool');
  });

  it('answers 504 for a stalled MCP server and 502 for one that is gone', async () => {
    const stall = await new Api(d.url).post(`/svc/v1/apps/mcps/${ids.stalled}/tools/refresh`, undefined, bearer());
    expect(stall.status).toBe(504);
    expect(stall.body.error.code).toBe('upstream_timeout');
    const gone = await startMcpServer({ stateful: false });
    await gone.close();
    const goneId = await addInstance('gone', gone.url);
    const g = await tokenFor([{ url: gone.url, instance_ids: [goneId] }]);
    const res = await new Api(d.url).post(`/svc/v1/apps/mcps/${goneId}/tools/refresh`, undefined, bearer(g.token));
    expect(res.status).toBe(502);
    expect(res.body.error.code).toBe('upstream_unavailable');
    expect(JSON.stringify(res.body)).not.toContain(gone.url);
  });

  it('carries the whole protocol to a stateful SDK server: tools, resources, prompts, progress, a server request, session end', async () => {
    const client = await sdkClient(ids.stateful, token, { sampling: {} });
    client.setRequestHandler(CreateMessageRequestSchema, async () => ({ role: 'assistant', content: { type: 'text', text: 'hi from the app' }, model: 'm' }));
    const tools = await client.listTools();
    expect(tools.tools.map((t) => t.name)).toEqual(expect.arrayContaining(['echo', 'add', 'slow', 'ask_llm']));
    const echoed = await client.callTool({ name: 'echo', arguments: { message: 'through svc' } });
    expect((echoed.content as { text: string }[])[0].text).toBe('echo: through svc');
    const resource = await client.readResource({ uri: 'test://readme' });
    expect((resource.contents[0] as { text: string }).text).toBe('read me');
    const prompt = await client.getPrompt({ name: 'greet', arguments: { name: 'Ada' } });
    expect((prompt.messages[0].content as { text: string }).text).toBe('Hello Ada');
    const progress: number[] = [];
    await client.callTool({ name: 'slow', arguments: { steps: 3 } }, undefined, { onprogress: (p) => progress.push(p.progress) });
    expect(progress).toEqual([1, 2, 3]);
    const asked = await client.callTool({ name: 'ask_llm', arguments: {} });
    expect((asked.content as { text: string }[])[0].text).toBe('client said: hi from the app');

    // what reached the upstream: the instance's header, never the app's token or cookies
    const posts = stateful.seen.filter((s) => s.method === 'POST');
    expect(posts.length).toBeGreaterThan(0);
    for (const s of stateful.seen.filter((x) => x.headers.authorization !== undefined || x.method === 'POST')) {
      expect(s.headers.cookie).toBeUndefined();
      expect(s.headers.authorization === undefined || s.headers.authorization === INSTANCE_SECRET).toBe(true);
      expect(JSON.stringify(s.headers)).not.toContain(token);
    }
    expect(posts.some((s) => s.headers.authorization === INSTANCE_SECRET)).toBe(true);

    const transport = client.transport as StreamableHTTPClientTransport;
    const sessionId = transport.sessionId!;
    // the app holds an id bound to its grant; the server got its own id back on every request
    const serverId = posts.at(-1)!.headers['mcp-session-id'] as string;
    expect(sessionId).not.toBe(serverId);
    expect(stateful.sessions.has(serverId)).toBe(true);
    await transport.terminateSession();
    expect(stateful.sessions.has(serverId)).toBe(false);
    await client.close();
  });

  it('works with a stateless JSON-mode SDK server', async () => {
    const client = await sdkClient(ids.stateless);
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('add');
    const res = await client.callTool({ name: 'add', arguments: { a: 20, b: 22 } });
    expect((res.content as { text: string }[])[0].text).toBe('42');
    await client.close();
  });

  it('works with @modelcontextprotocol/server-everything in streamableHttp mode', async () => {
    const client = await sdkClient(ids.everything);
    const tools = (await client.listTools()).tools.map((t) => t.name);
    expect(tools).toEqual(expect.arrayContaining(['echo', 'get-sum', 'trigger-long-running-operation']));
    const echoed = await client.callTool({ name: 'echo', arguments: { message: 'hello everything' } });
    expect((echoed.content as { text: string }[])[0].text).toBe('Echo: hello everything');
    const progress: number[] = [];
    await client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 0.3, steps: 3 } }, undefined, { onprogress: (p) => progress.push(p.progress) });
    expect(progress.length).toBe(3);
    const resources = await client.listResources();
    expect(resources.resources.length).toBeGreaterThan(0);
    const read = await client.readResource({ uri: resources.resources[0].uri });
    expect(read.contents.length).toBeGreaterThan(0);
    const prompts = await client.listPrompts();
    expect(prompts.prompts.length).toBeGreaterThan(0);
    const completed = await client.complete({ ref: { type: 'ref/prompt', name: 'completable-prompt' }, argument: { name: 'department', value: 'Eng' } });
    expect(completed.completion.values).toEqual(['Engineering']);
    await client.close();
  });

  it('enforces the allow-list on the proxy: list filtered, call refused before upstream', async () => {
    const client = await sdkClient(ids.allowlisted);
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(['echo', 'slow']);
    const before = stateful.calls.length;
    const refused = await client.callTool({ name: 'secret_tool', arguments: {} }).then(
      (r) => r,
      (e) => e,
    );
    expect(refused).toBeInstanceOf(Error);
    expect(String(refused.message)).toMatch(/not allowed/);
    expect(stateful.calls.slice(before)).not.toContain('secret_tool');
    const allowed = await client.callTool({ name: 'echo', arguments: { message: 'ok' } });
    expect((allowed.content as { text: string }[])[0].text).toBe('echo: ok');
    await client.close();
  });

  it('refuses an instance outside the grant, a disabled instance and a bad Origin on every MCP route', async () => {
    for (const id of [ids['not-granted'], ids.disabled]) {
      const expected = id === ids.disabled ? 400 : 404; // mcp_instance_disabled is one status everywhere (the catalogue)
      const api = new Api(d.url);
      expect((await api.post(`/svc/v1/apps/mcps/${id}/tools/refresh`, undefined, bearer())).status).toBe(expected);
      expect((await api.post(`/svc/v1/apps/mcps/${id}/tools/add/execute`, { params: { a: 1, b: 1 } }, bearer())).status).toBe(expected);
      expect((await api.post(`/svc/v1/apps/mcps/${id}/mcp`, { jsonrpc: '2.0', id: 1, method: 'ping' }, { ...bearer(), Accept: 'application/json, text/event-stream' })).status).toBe(expected);
      expect((await api.get(`/svc/v1/apps/mcps/${id}/mcp`, bearer())).status).toBe(expected);
    }
    const evil = await new Api(d.url).post(`/svc/v1/apps/mcps/${ids.stateless}/mcp`, { jsonrpc: '2.0', id: 1, method: 'ping' }, { ...bearer(), Origin: 'http://evil.example', Accept: 'application/json, text/event-stream' });
    expect(evil.status).toBe(403);
    expect(evil.body.error.code).toBe('origin_not_allowed');
    const noToken = await new Api(d.url).post(`/svc/v1/apps/mcps/${ids.stateless}/mcp`, { jsonrpc: '2.0', id: 1, method: 'ping' });
    expect(noToken.status).toBe(401);
  });

  it('answers a page of svc\'s own origin with CORS on the proxy, exposing the MCP session headers', async () => {
    const res = await fetch(proxyUrl(ids.stateless), {
      method: 'POST',
      headers: { Origin: d.url, Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'cors', version: '1' } } }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('access-control-expose-headers')).toMatch(/Mcp-Session-Id/);
    expect(res.headers.get('access-control-expose-headers')).toMatch(/Mcp-Protocol-Version/);
    await res.text();
  });

  it('stops every MCP route at once when the grant is revoked', async () => {
    // a grant of its own: the other tests keep theirs, in whatever order they run
    const own = await tokenFor([{ url: stateless.url, instance_ids: [ids.stateless] }]);
    const bearer = () => ({ Authorization: `Bearer ${own.token}` });
    const api = new Api(d.url);
    expect((await api.get('/svc/v1/apps/mcps', bearer())).status).toBe(200);
    await alice.post(`/svc/v1/access-requests/${own.id}/revoke`);
    expect((await api.get('/svc/v1/apps/mcps', bearer())).status).toBe(401);
    expect((await api.post(`/svc/v1/apps/mcps/${ids.stateless}/tools/refresh`, undefined, bearer())).status).toBe(401);
    expect((await api.post(`/svc/v1/apps/mcps/${ids.stateless}/tools/add/execute`, { params: {} }, bearer())).status).toBe(401);
    expect((await api.post(`/svc/v1/apps/mcps/${ids.stateless}/mcp`, { jsonrpc: '2.0', id: 1, method: 'ping' }, bearer())).status).toBe(401);
  });
});
