/**
 * Tool choices per grant and held calls, end to end: the real daemon, real MCP SDK servers with a
 * read-only, a destructive and an unannotated tool (each counts its runs), the MCP SDK client (2025
 * era), raw 2026-07-28 stateless requests, and the REST execute endpoint. Every refusal is checked
 * where it matters: the upstream never ran the call.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { startModernRiskyServer, startRiskyServer } from './helpers/risky-mcp.js';
import { eventually } from './helpers/wait.js';

describe('tool choices per grant, and calls held for the person', () => {
  let d: TestDaemon;
  let admin: Api;
  let alice: Api;
  let bob: Api;
  let risky: Awaited<ReturnType<typeof startRiskyServer>>;
  let modern: Awaited<ReturnType<typeof startModernRiskyServer>>;
  let clientId: string;
  let secret: string | undefined;
  let notes: string;
  let modernId: string;

  async function requestAccess(urls: string[]) {
    const created = await new Api(d.url).post('/svc/v1/apps/request-access', {
      app_client_id: clientId,
      flow_type: 'popup',
      requested_role: 'scope_user_user',
      requested: { version: '1', mcp_servers: urls.map((url) => ({ url })) },
    });
    expect(created.status, created.text).toBe(201);
    return created.body.id as string;
  }

  /** A grant of `instances` approved by alice (with `tool_policies` when given), and a token for it. */
  async function grant(servers: { url: string; instance_ids: string[] }[], toolPolicies?: unknown) {
    const id = await requestAccess(servers.map((s) => s.url));
    const approved = await alice.put(`/svc/v1/access-requests/${id}/approve`, {
      approved_role: 'scope_user_user',
      approved: { version: '1', mcp_servers: servers },
      ...(toolPolicies ? { tool_policies: toolPolicies } : {}),
    });
    expect(approved.status, approved.text).toBe(200);
    const { tokens } = await authorize(await oidcConfig(d, clientId, secret), alice, approved.body.access_request_scope);
    return { id, token: tokens!.access_token as string };
  }

  const proxyUrl = (instance: string) => `${d.url}/svc/v1/apps/mcps/${instance}/mcp`;
  async function sdkClient(instance: string, token: string) {
    const client = new Client({ name: 'tool-choices-app', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(proxyUrl(instance)), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
    return client;
  }
  /** The one pending call of `tool`, as the person's list shows it. */
  const pendingCall = (who: Api, tool: string) =>
    eventually(async () => {
      const list = await who.get('/svc/v1/calls?status=pending');
      return (list.body.data as { id: string; tool: string }[]).find((c) => c.tool === tool);
    }, `a held call of ${tool}`);

  beforeAll(async () => {
    [risky, modern] = await Promise.all([startRiskyServer(), startModernRiskyServer()]);
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, callApprovalTimeoutS: 30 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    alice = await userApi(d.url, admin, 'alice', 'user');
    bob = await userApi(d.url, admin, 'bob', 'user');
    ({ clientId, secret } = await registerClient(admin, { name: 'Notes App' }));
    notes = (await alice.post('/svc/v1/mcps', { name: 'notes', url: risky.url })).body.instance.id;
    modernId = (await alice.post('/svc/v1/mcps', { name: 'modern', url: modern.url })).body.instance.id;
  }, 60_000);

  afterAll(async () => {
    await d.stop();
    await Promise.all([risky.close(), modern.close()]);
  });

  it('a draft lists each instance\'s tools, fetched for the review, with their annotations and defaults from them', async () => {
    // a new instance: svc has never seen its tools
    const fresh = (await alice.post('/svc/v1/mcps', { name: 'notes-fresh', url: risky.url })).body.instance.id;
    const ran = risky.ran.length;
    const id = await requestAccess([risky.url]);
    const review = await alice.get(`/svc/v1/access-requests/${id}/review`);
    expect(review.status, review.text).toBe(200);
    const instance = review.body.mcp_servers[0].instances.find((i: { id: string }) => i.id === fresh);
    expect(instance.tools_known).toBe(true);
    const byName = Object.fromEntries(instance.tools.map((t: { name: string }) => [t.name, t]));
    expect(byName.read_notes).toMatchObject({ default_choice: 'allow', choice: 'allow', annotations: { readOnlyHint: true } });
    expect(byName.delete_note).toMatchObject({ default_choice: 'ask', choice: 'ask', annotations: { destructiveHint: true, title: 'Delete a note' } });
    expect(byName.touch).toMatchObject({ default_choice: 'allow', choice: 'allow' });
    expect(byName.touch.annotations).toBeUndefined();
    // listing tools runs none of them
    expect(risky.ran.length).toBe(ran);
    expect((await alice.delete(`/svc/v1/mcps/${fresh}`)).status).toBeLessThan(300);
  });

  it('choices set at approval: a denied tool is left out of tools/list and refused; the others run; the review data says which', async () => {
    const g = await grant([{ url: risky.url, instance_ids: [notes] }], { [notes]: { tools: { touch: 'deny', delete_note: 'allow' } } });
    const client = await sdkClient(notes, g.token);
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(['delete_note', 'read_notes']);
    const before = risky.runs('touch');
    const refused = await client.callTool({ name: 'touch', arguments: { path: '/x' } }).then(
      (r) => JSON.stringify(r),
      (err: Error) => err.message,
    );
    expect(refused).toMatch(/not allowed/);
    expect(risky.runs('touch')).toBe(before);
    // destructive, but the person said allow: it runs without asking
    expect((await client.callTool({ name: 'delete_note', arguments: { id: 'n1' } })).content).toEqual([{ type: 'text', text: 'deleted n1' }]);
    await client.close();

    const review = await alice.get(`/svc/v1/access-requests/${g.id}/review`);
    expect(review.body.tool_policies).toEqual({ [notes]: { tools: { touch: 'deny', delete_note: 'allow' } } });
    const choices = review.body.tool_choices.find((c: { instance_id: string }) => c.instance_id === notes);
    expect(choices).toMatchObject({ instance_name: 'notes', default: null, tools_known: true });
    expect(Object.fromEntries(choices.tools.map((t: { name: string; choice: string }) => [t.name, t.choice]))).toEqual({ read_notes: 'allow', delete_note: 'allow', touch: 'deny' });
    // the REST list and execute say the same
    const bearer = { Authorization: `Bearer ${g.token}` };
    const listed = await new Api(d.url).get(`/svc/v1/apps/mcps/${notes}`, bearer);
    expect(listed.body.tools.map((t: { name: string }) => t.name).sort()).toEqual(['delete_note', 'read_notes']);
    const rest = await new Api(d.url).post(`/svc/v1/apps/mcps/${notes}/tools/touch/execute`, { params: { path: '/y' } }, bearer);
    expect(rest.status).toBe(403);
    expect(rest.body.error.code).toBe('tool_not_allowed');
    expect(risky.runs('touch')).toBe(before);
  });

  it('approve refuses tool choices for an instance the approval does not grant', async () => {
    const id = await requestAccess([risky.url]);
    const res = await alice.put(`/svc/v1/access-requests/${id}/approve`, {
      approved_role: 'scope_user_user',
      approved: { version: '1', mcp_servers: [{ url: risky.url, instance_ids: [notes] }] },
      tool_policies: { [modernId]: { default: 'deny' } },
    });
    expect(res.status).toBe(400);
    expect((await alice.get(`/svc/v1/access-requests/${id}/review`)).body.status).toBe('draft');
  });

  it('a destructive tool is held by default; approved in the API, the upstream runs exactly that call once and the app gets its answer', async () => {
    const g = await grant([{ url: risky.url, instance_ids: [notes] }]);
    const client = await sdkClient(notes, g.token);
    const before = risky.runs('delete_note');
    const answer = client.callTool({ name: 'delete_note', arguments: { id: 'n7', note: 'evil\u202etxt.exe' } });
    const call = await pendingCall(alice, 'delete_note');
    expect(call).toMatchObject({
      status: 'pending',
      access_request_id: g.id,
      app_client_id: clientId,
      app_name: 'Notes App',
      user: 'alice',
      instance_id: notes,
      instance_name: 'notes',
      tool: 'delete_note',
      arguments: { id: 'n7', note: 'evil\u202etxt.exe' },
      via: 'mcp',
    });
    expect(Date.parse((call as unknown as { expires_at: string }).expires_at) - Date.parse((call as unknown as { created_at: string }).created_at)).toBe(30_000);
    // held: nothing ran yet
    expect(risky.runs('delete_note')).toBe(before);
    const approved = await alice.post(`/svc/v1/calls/${call.id}/approve`, {});
    expect(approved.status, approved.text).toBe(200);
    expect(approved.body).toMatchObject({ status: 'approved', decided_by: 'alice' });
    expect((await answer).content).toEqual([{ type: 'text', text: 'deleted n7' }]);
    expect(risky.runs('delete_note')).toBe(before + 1);
    expect(risky.ran.at(-1)).toEqual({ tool: 'delete_note', args: { id: 'n7', note: 'evil\u202etxt.exe' } });
    // a decided call cannot be decided again, either way
    expect((await alice.post(`/svc/v1/calls/${call.id}/approve`, {})).body.error.code).toBe('not_pending');
    const again = await alice.post(`/svc/v1/calls/${call.id}/deny`);
    expect(again.status).toBe(409);
    expect(risky.runs('delete_note')).toBe(before + 1);
    await client.close();
  });

  it('denied: the app gets a tool result that says the person declined, the upstream never runs it, and the activity records the refusal', async () => {
    const g = await grant([{ url: risky.url, instance_ids: [notes] }]);
    const client = await sdkClient(notes, g.token);
    const before = risky.runs('delete_note');
    const answer = client.callTool({ name: 'delete_note', arguments: { id: 'n8' } });
    const call = await pendingCall(alice, 'delete_note');
    expect((await alice.post(`/svc/v1/calls/${call.id}/deny`)).body.status).toBe('denied');
    const result = await answer;
    expect(result.isError).toBe(true);
    expect(JSON.stringify(result.content)).toMatch(/declined/);
    expect(risky.runs('delete_note')).toBe(before);
    await client.close();
    const events = await eventually(async () => {
      const list = await alice.get(`/svc/v1/activity?grant=${g.id}`);
      return (list.body.data as { reason?: string }[]).find((e) => e.reason === 'call_denied');
    }, 'the activity event of the declined call');
    expect(events).toMatchObject({ kind: 'mcp', mcp_method: 'tools/call', tool: 'delete_note', outcome: 'refused', reason: 'call_denied' });
  });

  it('refusals: another user, the app\'s own token, a cross-site post, a second decision: none decides, and the upstream never runs the call', async () => {
    const g = await grant([{ url: risky.url, instance_ids: [notes] }]);
    const client = await sdkClient(notes, g.token);
    const before = risky.runs('delete_note');
    const answer = client.callTool({ name: 'delete_note', arguments: { id: 'n9' } });
    const call = await pendingCall(alice, 'delete_note');
    // bob sees nothing of alice's calls, and cannot decide one
    expect((await bob.get('/svc/v1/calls')).body.data).toEqual([]);
    expect((await bob.post(`/svc/v1/calls/${call.id}/approve`, {})).status).toBe(404);
    // the app's own token is no session
    const byApp = await new Api(d.url).post(`/svc/v1/calls/${call.id}/approve`, {}, { Authorization: `Bearer ${g.token}` });
    expect(byApp.status).toBe(401);
    // a post from another site, with alice's cookie
    const crossSite = await alice.post(`/svc/v1/calls/${call.id}/approve`, {}, { Origin: 'https://evil.example', 'Sec-Fetch-Site': 'cross-site' });
    expect(crossSite.status).toBe(403);
    expect(crossSite.body.error.code).toBe('cross_origin');
    expect(risky.runs('delete_note')).toBe(before);
    // still pending: now the person denies, and then approving is too late
    expect((await alice.get('/svc/v1/calls?status=pending')).body.data.map((c: { id: string }) => c.id)).toContain(call.id);
    expect((await alice.post(`/svc/v1/calls/${call.id}/deny`)).status).toBe(200);
    const late = await alice.post(`/svc/v1/calls/${call.id}/approve`, {});
    expect(late.status).toBe(409);
    expect(late.body.error.code).toBe('not_pending');
    expect((await answer).isError).toBe(true);
    expect(risky.runs('delete_note')).toBe(before);
    // an admin may decide anyone's: seen in the list
    expect((await admin.get('/svc/v1/calls')).body.data.map((c: { id: string }) => c.id)).toContain(call.id);
    await client.close();
  });

  it('remember: approving with remember_minutes lets the same tool of the same grant run without asking, never another grant\'s', async () => {
    const g = await grant([{ url: risky.url, instance_ids: [notes] }]);
    const other = await grant([{ url: risky.url, instance_ids: [notes] }]);
    const client = await sdkClient(notes, g.token);
    const first = client.callTool({ name: 'delete_note', arguments: { id: 'r1' } });
    const call = await pendingCall(alice, 'delete_note');
    const approved = await alice.post(`/svc/v1/calls/${call.id}/approve`, { remember_minutes: 10 });
    expect(approved.body.remember_until).toBeTruthy();
    await first;
    const before = risky.runs('delete_note');
    // no hold now
    expect((await client.callTool({ name: 'delete_note', arguments: { id: 'r2' } })).content).toEqual([{ type: 'text', text: 'deleted r2' }]);
    expect(risky.runs('delete_note')).toBe(before + 1);
    await client.close();
    // the other grant (same app, same instance) is still asked
    const otherClient = await sdkClient(notes, other.token);
    const held = otherClient.callTool({ name: 'delete_note', arguments: { id: 'r3' } });
    const otherCall = await pendingCall(alice, 'delete_note');
    expect(otherCall.id).not.toBe(call.id);
    expect(risky.runs('delete_note')).toBe(before + 1);
    await alice.post(`/svc/v1/calls/${otherCall.id}/deny`);
    expect((await held).isError).toBe(true);
    await otherClient.close();
  });

  it('progress: a held call with a progress token is answered as a stream that says it waits, then carries the upstream\'s answer', async () => {
    const g = await grant([{ url: risky.url, instance_ids: [notes] }]);
    const client = await sdkClient(notes, g.token);
    const progress: { progress: number; message?: string }[] = [];
    const answer = client.callTool({ name: 'delete_note', arguments: { id: 'p1' } }, undefined, { onprogress: (p) => progress.push(p) });
    const call = await pendingCall(alice, 'delete_note');
    await eventually(() => progress.length > 0, 'a progress notification while the call is held');
    expect(progress[0].message).toMatch(/Waiting for the person to approve delete_note/);
    await alice.post(`/svc/v1/calls/${call.id}/approve`, {});
    expect((await answer).content).toEqual([{ type: 'text', text: 'deleted p1' }]);
    await client.close();
  });

  it('the stateless 2026-07-28 era: a raw request with Mcp-Method and Mcp-Name is held, and once approved gets the upstream\'s answer', async () => {
    const g = await grant([{ url: modern.url, instance_ids: [modernId] }]);
    const meta = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' }, 'io.modelcontextprotocol/clientCapabilities': {} };
    const post = (body: unknown, name: string) =>
      fetch(proxyUrl(modernId), {
        method: 'POST',
        headers: { Authorization: `Bearer ${g.token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Protocol-Version': '2026-07-28', 'Mcp-Method': 'tools/call', 'Mcp-Name': name },
        body: JSON.stringify(body),
      });
    const pending = post({ jsonrpc: '2.0', id: 41, method: 'tools/call', params: { name: 'delete_note', arguments: { id: 'm1' }, _meta: meta } }, 'delete_note');
    const call = await pendingCall(alice, 'delete_note');
    expect(call).toMatchObject({ instance_id: modernId, arguments: { id: 'm1' } });
    expect(modern.runs('delete_note')).toBe(0);
    await alice.post(`/svc/v1/calls/${call.id}/approve`, {});
    const res = await pending;
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('deleted m1');
    expect(modern.runs('delete_note')).toBe(1);

    // denied: a result, not a JSON-RPC error
    const denied = post({ jsonrpc: '2.0', id: 42, method: 'tools/call', params: { name: 'delete_note', arguments: { id: 'm2' }, _meta: meta } }, 'delete_note');
    const second = await pendingCall(alice, 'delete_note');
    await alice.post(`/svc/v1/calls/${second.id}/deny`);
    const body = await (await denied).json();
    expect(body).toMatchObject({ jsonrpc: '2.0', id: 42, result: { isError: true } });
    expect(JSON.stringify(body.result.content)).toMatch(/declined/);
    expect(modern.runs('delete_note')).toBe(1);
    // the unannotated and the read-only tool run at once
    expect((await post({ jsonrpc: '2.0', id: 43, method: 'tools/call', params: { name: 'touch', arguments: { path: 'p' }, _meta: meta } }, 'touch')).status).toBe(200);
    expect(modern.runs('touch')).toBe(1);
  });

  it('the REST execute endpoint holds the call too: approved it runs, denied the result says so', async () => {
    const g = await grant([{ url: risky.url, instance_ids: [notes] }]);
    const bearer = { Authorization: `Bearer ${g.token}` };
    const before = risky.runs('delete_note');
    const pending = new Api(d.url).post(`/svc/v1/apps/mcps/${notes}/tools/delete_note/execute`, { params: { id: 'x1' } }, bearer);
    const call = await pendingCall(alice, 'delete_note');
    expect(call).toMatchObject({ via: 'rest', arguments: { id: 'x1' } });
    await alice.post(`/svc/v1/calls/${call.id}/approve`, {});
    const ran = await pending;
    expect(ran.status).toBe(200);
    expect(ran.body.result.content).toEqual([{ type: 'text', text: 'deleted x1' }]);
    expect(risky.runs('delete_note')).toBe(before + 1);

    const denied = new Api(d.url).post(`/svc/v1/apps/mcps/${notes}/tools/delete_note/execute`, { params: { id: 'x2' } }, bearer);
    const second = await pendingCall(alice, 'delete_note');
    await alice.post(`/svc/v1/calls/${second.id}/deny`);
    const answer = await denied;
    expect(answer.status).toBe(200);
    expect(answer.body.result.isError).toBe(true);
    expect(JSON.stringify(answer.body.result.content)).toMatch(/declined/);
    expect(risky.runs('delete_note')).toBe(before + 1);
  });

  it('an app that goes away while its call is held: the call ends as failed and never runs', async () => {
    const g = await grant([{ url: risky.url, instance_ids: [notes] }]);
    const before = risky.runs('delete_note');
    const abort = new AbortController();
    const pending = fetch(`${d.url}/svc/v1/apps/mcps/${notes}/tools/delete_note/execute`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${g.token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ params: { id: 'gone' } }),
      signal: abort.signal,
    }).catch(() => undefined);
    const call = await pendingCall(alice, 'delete_note');
    abort.abort();
    await pending;
    const ended = await eventually(async () => {
      const list = await alice.get('/svc/v1/calls?status=failed');
      return (list.body.data as { id: string; reason: string }[]).find((c) => c.id === call.id);
    }, 'the held call to end as failed');
    expect(ended.reason).toMatch(/went away/);
    expect((await alice.post(`/svc/v1/calls/${call.id}/approve`, {})).status).toBe(409);
    expect(risky.runs('delete_note')).toBe(before);
  });

  it('choices changed later with PUT .../tools: the next list and call follow them; only the approver or an admin may', async () => {
    const g = await grant([{ url: risky.url, instance_ids: [notes] }]);
    const client = await sdkClient(notes, g.token);
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('read_notes');
    const set = await alice.put(`/svc/v1/access-requests/${g.id}/tools`, { [notes]: { tools: { read_notes: 'deny', delete_note: 'allow' } } });
    expect(set.status, set.text).toBe(200);
    expect(set.body.tool_policies).toEqual({ [notes]: { tools: { read_notes: 'deny', delete_note: 'allow' } } });
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(['delete_note', 'touch']);
    const before = risky.runs('read_notes');
    const refused = await client.callTool({ name: 'read_notes', arguments: {} }).then(
      (r) => JSON.stringify(r),
      (err: Error) => err.message,
    );
    expect(refused).toMatch(/not allowed/);
    expect(risky.runs('read_notes')).toBe(before);
    // a default for the rest, and a choice taken back with null
    const more = await alice.put(`/svc/v1/access-requests/${g.id}/tools`, { [notes]: { default: 'ask', tools: { read_notes: null } } });
    expect(more.body.tool_policies).toEqual({ [notes]: { default: 'ask', tools: { delete_note: 'allow' } } });
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(['delete_note', 'read_notes', 'touch']);
    const asked = client.callTool({ name: 'touch', arguments: { path: 'a' } });
    const call = await pendingCall(alice, 'touch');
    await alice.post(`/svc/v1/calls/${call.id}/deny`);
    expect((await asked).isError).toBe(true);
    await client.close();
    // others: 404; an instance outside the grant: 400; a request that is no grant: 409
    expect((await bob.put(`/svc/v1/access-requests/${g.id}/tools`, { [notes]: { default: 'allow' } })).status).toBe(404);
    expect((await alice.put(`/svc/v1/access-requests/${g.id}/tools`, { [modernId]: { default: 'allow' } })).status).toBe(400);
    expect((await alice.put(`/svc/v1/access-requests/${g.id}/tools`, { [notes]: { tools: { x: 'maybe' } } })).status).toBe(400);
    expect((await admin.put(`/svc/v1/access-requests/${g.id}/tools`, { [notes]: { default: null } })).status).toBe(200);
    const draft = await requestAccess([risky.url]);
    expect((await alice.put(`/svc/v1/access-requests/${draft}/tools`, { [notes]: { default: 'allow' } })).status).toBe(404);
  });

  // Skipped: in clean-clone CI runs under load the resumed stream's replay sometimes never came
  // (a hang of 40 s, not slowness), in about half of the runs; alone it always passes. Until that
  // hang is understood (the upstream SDK server's replay beside the session's other streams, or
  // svc's relay of a replayed stream) this case would fail the whole suite at random.
  it('a denied tool is missing from tools/list on every stream: an SSE answer, and a stream resumed with Last-Event-ID', async () => {
    const g = await grant([{ url: risky.url, instance_ids: [notes] }], { [notes]: { tools: { delete_note: 'deny' } } });
    // A session of its own, opened by hand: the SDK client would also open its standalone GET
    // stream in the background, and that racing the resumed stream below made the replay wait.
    const post = (body: unknown, extra: Record<string, string> = {}) =>
      fetch(proxyUrl(notes), {
        method: 'POST',
        headers: { Authorization: `Bearer ${g.token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...extra },
        body: JSON.stringify(body),
      });
    const init = await post({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'tool-choices-app', version: '1.0.0' } } });
    const sessionId = init.headers.get('mcp-session-id')!;
    await init.text();
    expect(sessionId).toBeTruthy();
    const headers = { Authorization: `Bearer ${g.token}`, 'Mcp-Session-Id': sessionId, 'Mcp-Protocol-Version': '2025-11-25' };
    await (await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, { 'Mcp-Session-Id': sessionId, 'Mcp-Protocol-Version': '2025-11-25' })).text();
    const listed = await fetch(proxyUrl(notes), {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'list-1', method: 'tools/list' }),
    });
    expect(listed.headers.get('content-type')).toMatch(/text\/event-stream/);
    const sse = await listed.text();
    expect(sse).toContain('read_notes');
    expect(sse).not.toContain('delete_note');
    // the stream's first event id (the server's priming event): resuming after it replays the list
    const firstId = /^id: (.+)$/m.exec(sse)?.[1];
    expect(firstId, sse).toBeTruthy();
    const resumed = await fetch(proxyUrl(notes), { headers: { ...headers, Accept: 'text/event-stream', 'Last-Event-ID': firstId! }, signal: AbortSignal.timeout(10_000) });
    expect(resumed.status).toBe(200);
    const reader = resumed.body!.getReader();
    let replay = '';
    const decoder = new TextDecoder();
    await eventually(async () => {
      const { value, done } = await reader.read();
      if (value) replay += decoder.decode(value, { stream: true });
      return done || replay.includes('list-1');
    }, 'the replayed tools/list answer');
    await reader.cancel().catch(() => undefined);
    expect(replay).toContain('read_notes');
    expect(replay).not.toContain('delete_note');
    await fetch(proxyUrl(notes), { method: 'DELETE', headers }).catch(() => undefined);
  }, 60_000);
});
