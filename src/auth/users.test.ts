/** Local accounts as a unit: the users service on the in-memory repositories. */
import { describe, expect, it } from 'vitest';
import { inMemoryRepositories } from '../store/store-repositories.js';
import type { AccessRequestRecord, UserRecord } from '../store/schema.js';
import { UsersService } from './users.js';
import { accessRequestRecord } from '../../test/helpers/records.js';

const T0 = Date.parse('2026-11-26T12:00:00Z');
const at = new Date(T0).toISOString();
const account = (id: string, role: UserRecord['role']): UserRecord => ({ id, username: id, role, password_hash: 'old', created_at: at });
const grant = (id: string, userId: string): AccessRequestRecord =>
  accessRequestRecord({ id, status: 'approved', expires_at: at, approved_role: 'scope_user_user', approved: { version: '1', mcp_servers: [] }, user_id: userId, decided_at: at }, T0);

async function setup() {
  const repos = await inMemoryRepositories(async (r) => {
    await r.meta.set({ schema: 1, created_at: at, key_backend: 'file', key_check: 'k', session_keys: 's', unshown_password_user: 'root' });
    for (const u of [account('root', 'admin'), account('boss', 'manager'), account('ann', 'user')]) await r.users.put(u);
    await r.sessions.put({ id_hash: 's-ann', user_id: 'ann', csrf: 'c', expires_at: T0 + 1000, data: {} });
    await r.sessions.put({ id_hash: 's-root', user_id: 'root', csrf: 'c', expires_at: T0 + 1000, data: {} });
    await r.mcpInstances.put({ id: 'i-ann', owner_id: 'ann', name: 'i', url: 'http://127.0.0.1:9/mcp', enabled: true, headers: [], allow_tools: null, created_at: at, updated_at: at });
    await r.mcpTools.set('i-ann', { tools: [], refreshed_at: at });
    await r.accessRequests.put(grant('g-ann', 'ann'));
    await r.accessRequests.put(grant('g-root', 'root'));
  });
  return { repos, users: new UsersService(repos, () => T0) };
}

describe('UsersService on the in-memory repositories', () => {
  it('keeps the last admin, and keeps managers away from admins', async () => {
    const { users } = await setup();
    const root = (await users.findByName('ROOT'))!;
    const boss = (await users.findByName('boss'))!;
    await expect(users.setRole(root, 'root', 'user')).rejects.toMatchObject({ code: 'last_admin' });
    await expect(users.remove(root, 'root')).rejects.toMatchObject({ code: 'last_admin' });
    await expect(users.setRole(boss, 'ann', 'admin')).rejects.toMatchObject({ code: 'forbidden' });
    await expect(users.remove(boss, 'root')).rejects.toMatchObject({ code: 'forbidden' });
    await users.setRole(root, 'boss', 'admin');
    await users.setRole(root, 'root', 'user');
    expect((await users.findByName('root'))!.role).toBe('user');
  });

  it('removing a user ends their sessions, MCP instances and grants, in one change', async () => {
    const { users, repos } = await setup();
    const root = (await users.findByName('root'))!;
    await users.remove(root, 'ann');
    expect(await repos.users.get('ann')).toBeUndefined();
    expect(await repos.sessions.get('s-ann')).toBeUndefined();
    expect(await repos.mcpInstances.get('i-ann')).toBeUndefined();
    expect(await repos.mcpTools.get('i-ann')).toBeUndefined();
    expect(await repos.accessRequests.get('g-ann')).toMatchObject({ status: 'revoked', revoked_by: 'root' });
    expect(await repos.accessRequests.get('g-root')).toMatchObject({ status: 'approved' });
    expect(await repos.sessions.get('s-root')).toBeDefined();
  });

  it('a new password ends that user’s sessions and the unshown-password mark', async () => {
    const { users, repos } = await setup();
    const root = (await users.findByName('root'))!;
    expect((await users.unshownPasswordUser())?.id).toBe('root');
    await users.setPassword(root, 'root', 'a new long password');
    expect((await repos.users.get('root'))!.password_hash).not.toBe('old');
    expect(await repos.sessions.get('s-root')).toBeUndefined();
    expect(await repos.sessions.get('s-ann')).toBeDefined();
    expect(await users.unshownPasswordUser()).toBeUndefined();
    await expect(users.resetUnshownPassword('root', 'x')).rejects.toMatchObject({ code: 'password_shown' });
  });

  it('refuses a second user of the same name in any case', async () => {
    const { users } = await setup();
    const root = (await users.findByName('root'))!;
    await expect(users.create(root, { username: 'Ann', role: 'user', password: 'long enough password' })).rejects.toMatchObject({ code: 'user_exists' });
    expect(await users.count()).toBe(3);
  });
});
