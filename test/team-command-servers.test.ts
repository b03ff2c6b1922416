/**
 * Command servers on a team server: two real replicas on one real PostgreSQL. A child runs on the
 * replica that served the app's call; a change made through the other replica (a key revoked, the
 * instance disabled) reaches it through PostgreSQL's notices, and ends that child there too.
 */
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { describe, expect, it, vi } from 'vitest';
import { HOSTILE, running } from './helpers/command.js';
import type { TestDaemon } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { postgresBinDir } from './helpers/postgres.js';
import { needs } from './helpers/requirements.js';
import { useTeamServer } from './helpers/team.js';
import { eventually } from './helpers/wait.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const available = needs(postgresBinDir() !== null, 'command servers on a team server', "PostgreSQL's server (initdb, pg_ctl)");

describe.skipIf(!available)('command servers on a team server', () => {
  const { running: started, startTeam } = useTeamServer();

  /**
   * Two replicas, the admin logged in to each directly, a command instance added through the
   * first and a key for it; the app's session on the second, with the pid of its child there.
   */
  async function childOnSecondReplica(name: string) {
    const team = await startTeam(2, undefined, undefined, { rateLimitClient: 0, rateLimitAddress: 0 });
    const [first, second] = team.replicas;
    const adminOf = (r: TestDaemon) => new Api(r.url).login('admin', team.password);
    const [adminFirst, adminSecond] = [await adminOf(first), await adminOf(second)];
    const added = await adminFirst.post('/svc/v1/mcps', { name, command: { command: process.execPath, args: [path.join(HOSTILE, 'stateful.mjs')] } });
    expect(added.status, added.text).toBe(201);
    const instance = added.body.instance.id as string;
    const key = await adminFirst.post('/svc/v1/keys', { name: `${name} app`, mcp_servers: [{ url: `stdio://${name}`, instance_ids: [instance] }] });
    expect(key.status, key.text).toBe(201);
    const transport = new StreamableHTTPClientTransport(new URL(`${second.url}/svc/v1/apps/mcps/${instance}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${key.body.key}` } } });
    const client = new Client({ name: 'team-app', version: '1.0.0' });
    await client.connect(transport);
    started.push({ stop: () => client.close() });
    const pid = Number((await client.callTool({ name: 'pid', arguments: {} }) as { content: { text: string }[] }).content[0].text);
    expect(running(pid)).toBe(true);
    const live = async (admin: Api) => (await admin.get(`/svc/v1/mcps/${instance}`)).body.instance.processes?.live as number;
    expect(await live(adminSecond)).toBe(1);
    // the first replica runs nothing of it: the child is the serving replica's
    expect(await live(adminFirst)).toBe(0);
    return { adminFirst, adminSecond, instance, client, pid, live, keyId: key.body.id as string, bearer: key.body.key as string, second };
  }

  it("a key revoked through one replica ends its child on the other, and the next call there is refused", async () => {
    const { adminFirst, adminSecond, instance, pid, live, keyId, bearer, second } = await childOnSecondReplica('team-revoked');
    const revoked = await adminFirst.post(`/svc/v1/keys/${keyId}/revoke`, {});
    expect(revoked.status, revoked.text).toBeLessThan(300);
    // the process is gone once reaped; the replica counts it out at its exit event, a moment later
    await eventually(async () => !running(pid) && (await live(adminSecond)) === 0, "the revoked key's child on the other replica to end");
    expect(await live(adminSecond)).toBe(0);
    const again = await fetch(`${second.url}/svc/v1/apps/mcps/${instance}/mcp`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${bearer}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Protocol-Version': '2025-11-25' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'pid', arguments: {} } }),
    });
    expect(again.status).toBe(401);
    expect(await live(adminSecond)).toBe(0);
  });

  it('an instance disabled through one replica ends its child on the other', async () => {
    const { adminFirst, adminSecond, instance, pid, live } = await childOnSecondReplica('team-disabled');
    expect((await adminFirst.patch(`/svc/v1/mcps/${instance}`, { enabled: false })).status).toBe(200);
    await eventually(async () => !running(pid) && (await live(adminSecond)) === 0, "the disabled instance's child on the other replica to end");
    expect(await live(adminSecond)).toBe(0);
  });
});
