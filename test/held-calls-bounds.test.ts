/**
 * What an app with a grant can make svc keep, and show the person, through held calls: the
 * arguments of a call that waits for the person are bounded (svc keeps each held call, with its
 * arguments, for an hour after it ends), and a tool name on /ui/calls cannot hide or reorder text.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { aliceWithInstanceKey, Api } from './helpers/http.js';
import { startRiskyServer } from './helpers/risky-mcp.js';
import { eventually } from './helpers/wait.js';

let risky: Awaited<ReturnType<typeof startRiskyServer>>;
let d: TestDaemon;
let alice: Api;
let instance: string;
let key: string;

beforeAll(async () => {
  risky = await startRiskyServer();
  d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, notify: false } });
  ({ alice, instance, key } = await aliceWithInstanceKey(d.url, d.adminPassword, risky.url, 'notes'));
}, 60_000);

afterAll(async () => {
  await d?.stop();
  await risky?.close();
});

/** One tools/call through the proxy, as a raw request the test can abort. */
function callTool(name: string, args: unknown, signal?: AbortSignal) {
  return fetch(`${d.url}/svc/v1/apps/mcps/${instance}/mcp`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }),
    signal,
  });
}

type Call = { id: string; status: string; tool: string; arguments: unknown };
const calls = async (status?: string) => (await alice.get(`/svc/v1/calls${status ? `?status=${status}` : ''}`)).body.data as Call[];

describe('held calls: what an app can make svc keep and show', () => {
  it('a call with megabytes of arguments is not kept for an hour: an app that ends its calls cannot pile them up in memory', async () => {
    const big = 'x'.repeat(2 * 1024 * 1024);
    for (let i = 0; i < 6; i++) {
      const stop = new AbortController();
      let answered = false;
      const answer = callTool('delete_note', { id: `big-${i}`, note: big }, stop.signal)
        .then((res) => res.text())
        .catch(() => null)
        .finally(() => (answered = true));
      // either svc refuses to hold it at once, or it is held: then the app goes away
      const held = await eventually(async () => ((await calls('pending')).length > 0 ? 'held' : answered ? 'answered' : undefined), 'the call held or answered');
      if (held === 'held') stop.abort();
      await answer;
      await eventually(async () => ((await calls('pending')).length === 0 ? true : undefined), 'nothing pending');
    }
    const kept = JSON.stringify(await calls()).length;
    expect(risky.runs('delete_note')).toBe(0);
    // six calls of 2 MiB each: what the list answers is what svc keeps in memory
    expect(kept, `svc keeps ${kept} bytes of held-call arguments`).toBeLessThan(1024 * 1024);
    const refused = await callTool('delete_note', { id: 'big', note: big });
    expect(refused.status).toBe(413);
    expect((await refused.json()).error.code).toBe('payload_too_large');
  }, 60_000);

  it('one grant has at most --grant-concurrency calls waiting (32): the next is 429, and the person sees 32, not thousands', async () => {
    const stop = new AbortController();
    const waiting = Array.from({ length: 32 }, (_, i) => callTool('delete_note', { id: `many-${i}` }, stop.signal).catch(() => null));
    await eventually(async () => ((await calls('pending')).length === 32 ? true : undefined), '32 held');
    const extra = await callTool('delete_note', { id: 'one-too-many' });
    expect(extra.status).toBe(429);
    expect((await calls('pending')).length).toBe(32);
    stop.abort();
    await Promise.all(waiting);
    await eventually(async () => ((await calls('pending')).length === 0 ? true : undefined), 'nothing pending');
    expect(risky.runs('delete_note')).toBe(0);
  }, 60_000);

  it('/ui/calls writes invisible and direction characters of a tool name as escapes, as it does for arguments', async () => {
    const page = new Api(d.url);
    await page.login('alice', 'pw-alice-12345');
    // a tool name the person would read as "delete_note" (a zero-width space) and one that turns text around
    const hidden = 'delete_note\u200b';
    const turned = 'delete_\u202eeton';
    const stops = [new AbortController(), new AbortController()];
    // the grant asks about every tool of the instance, so these calls are held
    const set = await alice.put(`/svc/v1/access-requests/${await grantId()}/tools`, { [instance]: { default: 'ask' } });
    expect(set.status, set.text).toBe(200);
    const answers = [callTool(hidden, { id: 'a' }, stops[0].signal).catch(() => null), callTool(turned, { id: 'b' }, stops[1].signal).catch(() => null)];
    await eventually(async () => ((await calls('pending')).length === 2 ? true : undefined), 'both held');
    const html = (await page.get('/ui/calls')).text;
    const tools = [...html.matchAll(/<code class="tool">([^<]*)<\/code>/g)].map((m) => m[1]);
    expect(tools).toHaveLength(2);
    for (const t of tools) expect(t, 'a tool name on the page').not.toMatch(/[\u200b\u202e]/);
    expect(tools.sort()).toEqual(['delete_\\u202eeton', 'delete_note\\u200b'].sort());
    for (const s of stops) s.abort();
    await Promise.all(answers);
    expect(risky.runs('delete_note')).toBe(0);
  }, 60_000);
});

/** The id of alice's grant (the API key's access request). */
async function grantId(): Promise<string> {
  const keys = (await alice.get('/svc/v1/keys')).body.data as { access_request_id?: string }[];
  const id = keys[0]?.access_request_id;
  if (!id) throw new Error(`no access request id among ${JSON.stringify(keys)}`);
  return id;
}
