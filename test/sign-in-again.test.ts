/**
 * A standard client (an MCP host) that signs in at the authorization endpoint for an MCP proxy URL:
 * approving it without that instance is a denial the person is told of before the click, and a
 * host that signs in again for the same resource replaces its earlier grant instead of piling up.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api, userApi } from './helpers/http.js';
import { authorize, oidcConfig, registerClient } from './helpers/oauth.js';
import { cleanEnv, runSvcInProcess } from './helpers/cli.js';

describe('signing in again, and signing in for nothing', () => {
  let d: TestDaemon;
  let admin: Api;
  let alice: Api;
  let files: string;
  let notes: string;
  const FILES_URL = 'http://127.0.0.1:9311/mcp';
  const NOTES_URL = 'http://127.0.0.1:9312/mcp';

  beforeAll(async () => {
    d = await startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0, rateLimitRegistration: 0 } });
    admin = await new Api(d.url).login('admin', d.adminPassword);
    alice = await userApi(d.url, admin, 'alice', 'user');
    files = (await alice.post('/svc/v1/mcps', { name: 'files', url: FILES_URL })).body.instance.id;
    notes = (await alice.post('/svc/v1/mcps', { name: 'notes', url: NOTES_URL })).body.instance.id;
  });
  afterAll(() => d.stop());

  const proxyUrl = (id: string) => `${d.baseUrl}/svc/v1/apps/mcps/${id}/mcp`;
  const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });
  /** Signs the host in for `instance`, the person approving with `grant` (instance ids); answers the request id and the outcome. */
  const signIn = async (clientId: string, instance: string, grant: string[], onReview?: (id: string) => Promise<void>) => {
    let requestId = '';
    let answer: { status: number; body: { status: string } } | undefined;
    const result = await authorize(await oidcConfig(d, clientId), alice, '', { resource: proxyUrl(instance) }, undefined, async (id) => {
      requestId = id;
      await onReview?.(id);
      const review = await alice.get(`/svc/v1/access-requests/${id}/review`);
      answer = await alice.put(`/svc/v1/access-requests/${id}/approve`, {
        approved_role: 'scope_user_user',
        approved: { version: '1', mcp_servers: review.body.mcp_servers.map((s: { url: string }) => ({ url: s.url, instance_ids: grant })) },
      });
    });
    return { requestId, result, answer: answer! };
  };

  it('approving a sign-in without the instance it is for denies it, and the page said so before', async () => {
    const { clientId } = await registerClient(admin, { name: 'Host', public: true });
    let page = '';
    const { requestId, result, answer } = await signIn(clientId, files, [], async (id) => {
      page = (await alice.get(`/ui/apps/access-requests/review?id=${id}`)).text;
      expect((await alice.get(`/svc/v1/access-requests/${id}/review`)).body.sign_in_instance_ids).toEqual([files]);
    });
    expect(page).toContain('id="sign-in-note"');
    expect(page).toMatch(/signs in for <strong>files<\/strong>\. Approving without it denies the sign-in/);
    expect(answer.status).toBe(200);
    expect(answer.body.status).toBe('denied');
    expect(result.error).toBe('access_denied');
    expect((await alice.get(`/svc/v1/access-requests/${requestId}/review`)).body.status).toBe('denied');
  });

  it('a host signing in again for the same resource replaces its earlier grant, which is revoked and shown as replaced', async () => {
    const { clientId } = await registerClient(admin, { name: 'Host again', public: true });
    const first = await signIn(clientId, files, [files]);
    const firstToken = first.result.tokens!.access_token;
    const other = await signIn(clientId, notes, [notes]);
    expect((await new Api(d.url).post(`/svc/v1/apps/mcps/${files}/mcp`, {}, bearer(firstToken))).status).not.toBe(401);

    const second = await signIn(clientId, files, [files]);
    expect(second.result.error).toBeUndefined();
    const replaced = (await alice.get(`/svc/v1/access-requests/${first.requestId}/review`)).body;
    expect(replaced).toMatchObject({ status: 'revoked', replaced_by: second.requestId });
    // the old token stops, the new one and the grant for another resource go on
    expect((await new Api(d.url).post(`/svc/v1/apps/mcps/${files}/mcp`, {}, bearer(firstToken))).status).toBe(401);
    expect((await new Api(d.url).post(`/svc/v1/apps/mcps/${files}/mcp`, {}, bearer(second.result.tokens!.access_token))).status).not.toBe(401);
    expect((await alice.get(`/svc/v1/access-requests/${other.requestId}/review`)).body.status).toBe('approved');
    const approved = (await alice.get('/svc/v1/access-requests?status=approved')).body.data.filter((r: { app_client_id: string }) => r.app_client_id === clientId);
    expect(approved.map((r: { id: string }) => r.id).sort()).toEqual([other.requestId, second.requestId].sort());

    // the CLI (logged in as the admin, who sees every grant) says so too
    const show = await runSvcInProcess(['requests', 'show', first.requestId], { env: cleanEnv({ SVC_HOME: d.dataDir }) });
    expect(show.stdout).toMatch(/revoked \(replaced by [0-9a-f]{8}, a later sign-in of the same app\)/);
  });
});
