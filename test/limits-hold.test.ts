/**
 * A grant's tokens a day held against what an app can try with many calls at once and with a
 * flood before a restart: calls in flight reserve what they may spend before they start, and the
 * day's spending is kept apart from the bounded activity log. Real daemons (and, where the
 * machine has PostgreSQL, a team of two replicas) and a real upstream on 127.0.0.1.
 */
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, tempDir, type TestDaemon } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { startLenientUpstream } from './helpers/lenient-upstream.js';
import { postgresBinDir } from './helpers/postgres.js';
import { needs } from './helpers/requirements.js';
import { useTeamServer } from './helpers/team.js';
import { eventually } from './helpers/wait.js';

type Upstream = Awaited<ReturnType<typeof startLenientUpstream>>;

/** An API key on a new grant with `limits`: its key and its grant's id. */
async function limitedKey(admin: Api, limits: Record<string, unknown>) {
  const created = (await admin.post('/svc/v1/keys', { name: `k${Math.random()}` })).body;
  expect((await admin.put(`/svc/v1/access-requests/${created.access_request_id}/limits`, limits)).status).toBe(200);
  return { key: created.key as string, id: created.access_request_id as string };
}

const chat = (url: string, key: string, body: Record<string, unknown>) =>
  fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], ...body }),
    signal: AbortSignal.timeout(20_000),
  });

/**
 * Twenty slow chats started together: each either is refused at once or waits at the upstream,
 * which lets them all answer once every one has done one or the other. Answers the statuses.
 */
async function twentyTogether(upstream: Upstream, urls: string[], key: string, body: Record<string, unknown>): Promise<number[]> {
  const waitingBefore = upstream.waiting();
  let refused = 0;
  const calls = Array.from({ length: 20 }, (_, i) =>
    chat(urls[i % urls.length], key, { model: 'slow', ...body }).then(async (res) => {
      if (res.status !== 200) refused++;
      await res.text();
      return res.status;
    }),
  );
  await eventually(async () => refused + upstream.waiting() - waitingBefore === 20, 'every chat refused or at the upstream');
  upstream.release();
  return Promise.all(calls);
}

describe('a tokens-a-day budget and calls in flight', () => {
  let d: TestDaemon;
  let upstream: Upstream;
  let admin: Api;

  beforeAll(async () => {
    upstream = await startLenientUpstream();
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    expect((await admin.post('/svc/v1/providers', { name: 'go', base_url: upstream.url, models: ['slow', 'fake-model'] })).status).toBe(201);
  });
  afterAll(async () => {
    await d?.stop();
    await upstream?.close();
  });
  const usageOf = async (id: string) => (await admin.get(`/svc/v1/access-requests/${id}/review`)).body.usage;

  it('twenty slow chats with max_tokens started together on a 1,500-token grant spend at most the budget and one reservation; the rest are 429', async () => {
    const g = await limitedKey(admin, { tokens_per_day: 1500 });
    const statuses = await twentyTogether(upstream, [d.url], g.key, { max_tokens: 1000 });
    const passed = statuses.filter((s) => s === 200).length;
    expect(passed).toBeGreaterThanOrEqual(1);
    expect(statuses.filter((s) => s === 429)).toHaveLength(20 - passed);
    await eventually(async () => (await usageOf(g.id)).calls >= 20, 'every call recorded');
    // each spent 1,010 (10 in, 1,000 out); one reservation is about that and the request's bytes
    const spent = (await usageOf(g.id)).today.tokens;
    expect(spent).toBe(passed * 1010);
    expect(spent).toBeLessThanOrEqual(1500 + 1100);
  });

  it('chats naming no max_tokens reserve the whole budget: of twenty started together one goes through', async () => {
    const g = await limitedKey(admin, { tokens_per_day: 1500 });
    const statuses = await twentyTogether(upstream, [d.url], g.key, {});
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    const refused = await chat(d.url, g.key, { model: 'fake-model' });
    expect(refused.status).toBe(200); // 1,010 of 1,500 spent: the budget is not over yet
  });
});

describe('the day spent survives a restart after a flood of refused calls', () => {
  it('spend the budget, flood with refused calls past the event bound, restart on the same data dir: chats are still 429', async () => {
    const upstream = await startLenientUpstream();
    const dataDir = await tempDir();
    const config = { rateLimitClient: 0, rateLimitAddress: 0, activityMaxEvents: 20 };
    let d = await startTestDaemon({ dataDir, config });
    try {
      const admin = await new Api(d.url).login('admin', d.adminPassword);
      expect((await admin.post('/svc/v1/providers', { name: 'go', base_url: upstream.url, models: ['fake-model'] })).status).toBe(201);
      const g = await limitedKey(admin, { tokens_per_day: 20 });
      // 11 tokens each: the second goes over, the third is refused
      expect((await chat(d.url, g.key, { model: 'fake-model', max_tokens: 1 })).status).toBe(200);
      expect((await chat(d.url, g.key, { model: 'fake-model', max_tokens: 1 })).status).toBe(200);
      expect((await chat(d.url, g.key, { model: 'fake-model', max_tokens: 1 })).status).toBe(429);
      // refused calls are events too: 140 of them push the spending out of a log kept to 20
      for (let i = 0; i < 140; i++) {
        const res = await fetch(`${d.url}/v1/models`, { headers: { Authorization: `Bearer ${g.key}` } });
        expect(res.status).toBe(429);
        await res.text();
      }
      await eventually(async () => {
        const usage = (await admin.get(`/svc/v1/access-requests/${g.id}/review`)).body.usage;
        return usage.tokens_in + usage.tokens_out === 0;
      }, 'retention to drop the spending events');
      await d.close();
      d = await startTestDaemon({ dataDir, config });
      for (let i = 0; i < 3; i++) {
        const res = await chat(d.url, g.key, { model: 'fake-model', max_tokens: 1 });
        expect(res.status).toBe(429);
        expect((await res.json()).error.code).toBe('grant_token_budget_exhausted');
      }
    } finally {
      await d.close();
      await upstream.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

const available = needs(postgresBinDir() !== null, 'team server (replicas on PostgreSQL)', "PostgreSQL's server (initdb, pg_ctl)");

describe.skipIf(!available)('a team server holds calls in flight to the budget across replicas', () => {
  const { running, startTeam } = useTeamServer();

  it('twenty slow chats with max_tokens, spread over two replicas, spend at most the budget and one reservation', async () => {
    const upstream = await startLenientUpstream();
    running.push({ stop: () => upstream.close() });
    const team = await startTeam(2, undefined, undefined, { rateLimitClient: 0, rateLimitAddress: 0 });
    const admin = await team.api().login('admin', team.password);
    expect((await admin.post('/svc/v1/providers', { name: 'go', base_url: upstream.url, models: ['slow'] })).status).toBe(201);
    const g = await limitedKey(admin, { tokens_per_day: 1500 });
    const urls = team.replicas.map((r) => r.url);
    for (const url of urls) {
      await eventually(async () => ((await new Api(url).get('/v1/models', { Authorization: `Bearer ${g.key}` })).body.data ?? []).length > 0, 'the model on every replica');
    }
    const statuses = await twentyTogether(upstream, urls, g.key, { max_tokens: 1000 });
    const passed = statuses.filter((s) => s === 200).length;
    expect(passed).toBeGreaterThanOrEqual(1);
    expect(statuses.filter((s) => s === 429)).toHaveLength(20 - passed);
    expect(passed * 1010).toBeLessThanOrEqual(1500 + 1100);
  });
});
