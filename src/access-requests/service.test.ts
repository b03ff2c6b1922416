/**
 * The access-request lifecycle as a unit: the service on the in-memory repositories (the
 * journaled store with no files; no daemon, no HTTP), with a clock the test moves.
 */
import { describe, expect, it } from 'vitest';
import { ApiKeysService, hashKey } from '../keys/service.js';
import { createLogger } from '../log.js';
import { inMemoryRepositories } from '../store/store-repositories.js';
import type { McpInstanceRecord, UserRecord } from '../store/schema.js';
import { AccessRequestsService } from './service.js';

const T0 = Date.parse('2026-11-26T12:00:00Z');
const DAY = 24 * 60 * 60 * 1000;
const admin: UserRecord = { id: 'u-admin', username: 'admin', role: 'admin', password_hash: 'x', created_at: new Date(T0).toISOString() };
const plain: UserRecord = { id: 'u-plain', username: 'plain', role: 'user', password_hash: 'x', created_at: new Date(T0).toISOString() };
const instance = (id: string, owner: string, over: Partial<McpInstanceRecord> = {}): McpInstanceRecord => ({
  id,
  owner_id: owner,
  name: id,
  url: 'http://127.0.0.1:9/mcp',
  enabled: true,
  headers: [],
  allow_tools: null,
  created_at: new Date(T0).toISOString(),
  updated_at: new Date(T0).toISOString(),
  ...over,
});
const ask = (over: Record<string, unknown> = {}) =>
  ({ app_client_id: 'app', flow_type: 'popup', requested_role: 'scope_user_power_user', requested: { version: '1', mcp_servers: [{ url: 'http://127.0.0.1:9/mcp' }] }, ...over }) as never;

async function setup(limits?: { draftsPerClient: number; drafts: number }) {
  const clock = { now: T0 };
  const repos = await inMemoryRepositories(async (r) => {
    for (const u of [admin, plain]) await r.users.put(u);
    await r.mcpInstances.put(instance('mine', admin.id));
    await r.mcpInstances.put(instance('off', admin.id, { enabled: false }));
    await r.mcpInstances.put(instance('theirs', plain.id));
  });
  const service = new AccessRequestsService(repos, () => clock.now, createLogger('silent'), undefined, limits);
  return { repos, service, clock };
}

describe('AccessRequestsService on the in-memory repositories', () => {
  it('approves within the privilege rules, and lets one decision of two win', async () => {
    const { service, repos } = await setup();
    const r = await service.create(ask());
    await expect(service.approve(plain, r.id, { approved_role: 'scope_user_power_user' } as never)).rejects.toMatchObject({ code: 'privilege_escalation' });
    await expect(service.approve(admin, r.id, { approved_role: 'scope_user_user', approved: { version: '1', mcp_servers: [{ url: 'http://127.0.0.1:9/mcp', instance_ids: ['theirs'] }] } } as never)).rejects.toMatchObject({
      code: 'mcp_instance_not_owned',
    });
    await expect(service.approve(admin, r.id, { approved_role: 'scope_user_user', approved: { version: '1', mcp_servers: [{ url: 'http://127.0.0.1:9/mcp', instance_ids: ['off'] }] } } as never)).rejects.toMatchObject({
      code: 'mcp_instance_disabled',
    });
    expect((await repos.accessRequests.get(r.id))!.status).toBe('draft');
    const approve = service.approve(admin, r.id, { approved_role: 'scope_user_user', approved: { version: '1', mcp_servers: [{ url: 'http://127.0.0.1:9/mcp', instance_ids: ['mine', 'mine'] }] } } as never);
    const deny = service.deny(admin, r.id);
    const [a, d] = await Promise.allSettled([approve, deny]);
    expect(a).toMatchObject({ status: 'fulfilled', value: { status: 'approved', user_id: admin.id, approved: { mcp_servers: [{ instance_ids: ['mine'] }] } } });
    expect(d).toMatchObject({ status: 'rejected', reason: { code: 'already_processed' } });
    expect(await service.approvedScopesFor('app', admin.id)).toEqual([`scope_access_request:${r.id}`]);
  });

  it('reads an old draft as expired and refuses to decide it, without writing it', async () => {
    const { service, repos, clock } = await setup();
    const r = await service.create(ask());
    clock.now += 11 * 60 * 1000;
    expect((await service.poll(r.id, 'app')).status).toBe('expired');
    expect((await repos.accessRequests.get(r.id))!.status).toBe('draft');
    await expect(service.deny(admin, r.id)).rejects.toMatchObject({ code: 'expired' });
    await expect(service.poll(r.id, 'another-app')).rejects.toMatchObject({ code: 'not_found' });
  });

  it('caps undecided drafts per client and in all; a decided or expired one frees its place', async () => {
    const { service, clock } = await setup({ draftsPerClient: 2, drafts: 3 });
    const first = await service.create(ask());
    await service.create(ask());
    await expect(service.create(ask())).rejects.toMatchObject({ code: 'too_many_drafts', headers: { 'Retry-After': '60' } });
    await service.deny(admin, first.id);
    await service.create(ask());
    await service.create(ask({ app_client_id: 'other' }));
    await expect(service.create(ask({ app_client_id: 'third' }))).rejects.toMatchObject({ code: 'too_many_drafts' });
    clock.now += 11 * 60 * 1000;
    await service.create(ask({ app_client_id: 'third' }));
  });

  it('revokes only as the approver or an admin, and hides decided requests from other users', async () => {
    const { service } = await setup();
    const r = await service.create(ask({ requested_role: 'scope_user_user', requested: { version: '1', mcp_servers: [] } }));
    await service.approve(plain, r.id, { approved_role: 'scope_user_user' } as never);
    const other: UserRecord = { ...plain, id: 'u-other', username: 'other' };
    await expect(service.revoke(other, r.id)).rejects.toMatchObject({ code: 'not_found' });
    expect(await service.list(other)).toEqual([]);
    expect((await service.revoke(admin, r.id)).status).toBe('revoked');
    await expect(service.revoke(admin, r.id)).rejects.toMatchObject({ code: 'not_approved' });
  });

  it('retention removes what ended long enough ago, and the API keys made on it, and nothing else', async () => {
    const { service, repos, clock } = await setup();
    const keys = new ApiKeysService(repos, service, () => clock.now);
    const denied = await service.create(ask());
    await service.deny(admin, denied.id);
    const approved = await service.create(ask());
    await service.approve(admin, approved.id, { approved_role: 'scope_user_user' } as never);
    const expired = await service.create(ask({ app_client_id: 'late' }));
    const { key, record: keyRecord, request: keyRequest } = await keys.create(admin, { name: 'k', role: 'scope_user_user', mcp_servers: [], expires_in: null } as never);
    await keys.revoke(admin, keyRecord.id);
    clock.now += 8 * DAY;
    expect(await service.sweep(7, 30)).toBe(2);
    expect(await repos.accessRequests.get(denied.id)).toBeUndefined();
    expect(await repos.accessRequests.get(expired.id)).toBeUndefined();
    expect(await repos.accessRequests.get(approved.id)).toBeDefined();
    expect(await repos.apiKeys.findByHash(hashKey(key))).toBeDefined();
    clock.now += 30 * DAY;
    expect(await service.sweep(7, 30)).toBe(1);
    expect(await repos.accessRequests.get(keyRequest.id)).toBeUndefined();
    expect(await repos.apiKeys.get(keyRecord.id)).toBeUndefined();
    expect(await service.sweep(0, 0)).toBe(0);
    expect(await repos.accessRequests.get(approved.id)).toBeDefined();
  });
});
