/** The OAuth client registry as a unit: the service on the in-memory repositories. */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SecretBox } from '../store/crypto.js';
import { inMemoryRepositories } from '../store/store-repositories.js';
import type { AccessRequestRecord, UserRecord } from '../store/schema.js';
import { OAuthClientsService } from './clients.js';
import { accessRequestRecord } from '../../test/helpers/records.js';

const T0 = Date.parse('2026-11-26T12:00:00Z');
const DAY = 24 * 60 * 60 * 1000;
const at = new Date(T0).toISOString();
const admin: UserRecord = { id: 'root', username: 'root', role: 'admin', password_hash: 'x', created_at: at };
const requestOf = (id: string, client: string, status: AccessRequestRecord['status']): AccessRequestRecord =>
  accessRequestRecord({ id, app_client_id: client, status, expires_at: at, approved_role: status === 'approved' ? 'scope_user_user' : null, user_id: status === 'approved' ? admin.id : null }, T0);

describe('OAuthClientsService on the in-memory repositories', () => {
  it('keeps a secret sealed, and removing a client revokes its grants and fails its drafts', async () => {
    const repos = await inMemoryRepositories();
    const clock = { now: T0 };
    const clients = new OAuthClientsService(repos, new SecretBox(randomBytes(32)), () => clock.now);
    const { client, secret } = await clients.create(admin, { name: 'App', redirect_uris: ['http://127.0.0.1:5173/cb'] });
    expect((await repos.oauthClients.get(client.client_id))!.client_secret).not.toContain(secret!);
    expect((await clients.providerMetadata(client.client_id))!.client_secret).toBe(secret);
    await repos.accessRequests.put(requestOf('granted', client.client_id, 'approved'));
    await repos.accessRequests.put(requestOf('waiting', client.client_id, 'draft'));
    await repos.accessRequests.put(requestOf('elsewhere', 'another', 'approved'));
    await clients.remove(admin, client.client_id);
    expect(await clients.find(client.client_id)).toBeUndefined();
    expect(await repos.accessRequests.get('granted')).toMatchObject({ status: 'revoked', revoked_by: admin.id });
    expect(await repos.accessRequests.get('waiting')).toMatchObject({ status: 'failed', failure_reason: 'client_removed' });
    expect(await repos.accessRequests.get('elsewhere')).toMatchObject({ status: 'approved' });
  });

  it('sweeps self-registered clients unused for the retention period, and only those', async () => {
    const repos = await inMemoryRepositories();
    const clock = { now: T0 };
    const clients = new OAuthClientsService(repos, new SecretBox(randomBytes(32)), () => clock.now);
    await clients.registerDynamic({ client_id: 'svc-dyn-old', client_name: 'Old\x1b[31m', redirect_uris: ['http://127.0.0.1/cb'] });
    await clients.registerDynamic({ client_id: 'svc-dyn-used', redirect_uris: ['http://127.0.0.1/cb'] });
    await clients.create(admin, { name: 'Kept', redirect_uris: ['http://127.0.0.1/cb'] });
    expect((await clients.find('svc-dyn-old'))!.name).toBe('Old\uFFFD[31m');
    clock.now += 20 * DAY;
    await clients.touch('svc-dyn-used');
    clock.now += 20 * DAY;
    expect(await clients.sweepDynamic(0)).toBe(0);
    expect(await clients.sweepDynamic(30)).toBe(1);
    expect((await clients.list(admin)).map((c) => c.name).sort()).toEqual(['Kept', 'Unnamed app']);
    expect(await clients.registrationRefusal('127.0.0.1', { total: 1, perAddress: 0 })).toMatchObject({ error: 'too_many_clients' });
    expect(await clients.registrationRefusal('127.0.0.1', { total: 2, perAddress: 0 })).toBeNull();
  });
});
