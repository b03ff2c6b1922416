/**
 * The copy's image on the in-memory repositories: every sealed field comes out sealed with
 * the new key (and opens to the same secret), a sealed value the copy does not know is refused
 * rather than carried over unopenable, and a target that holds anything is refused untouched.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CopyError, imageCounts, readImage, resealImage, TargetNotEmptyError, writeImage } from './copy-image.js';
import { SecretBox } from './crypto.js';
import { inMemoryRepositories } from './store-repositories.js';
import type { RepositorySet } from './repositories.js';
import { mcpEnvSealId, mcpHeaderSealId, SEAL_KINDS as K } from './seal-kinds.js';

const oldBox = new SecretBox(randomBytes(32));
const newBox = new SecretBox(randomBytes(32));
const at = '2026-01-01T00:00:00.000Z';

/** A store with one sealed value of every kind, sealed with the old key. */
async function seeded(extra?: (repos: RepositorySet) => Promise<void>) {
  return inMemoryRepositories(async (r) => {
    await r.meta.set({ schema: 1, created_at: at, key_backend: 'file', key_check: oldBox.seal(K.meta, 'key_check', 'svc'), session_keys: oldBox.seal(K.meta, 'session_keys', '["cookie"]') });
    await r.signingKeys.set(oldBox.seal(K.signingKeys, 'jwks', '[{"kid":"k"}]'));
    await r.providers.put({ name: 'up', base_url: 'http://127.0.0.1:1/v1', api_key: oldBox.seal(K.providerApiKey, 'up', 'sk-1'), models: [], discovered_models: [], discovered_at: null, discovery_error: null, timeout_ms: 1000, created_at: at });
    await r.mcpInstances.put({ id: 'm1', owner_id: 'u1', name: 'tools', url: 'http://127.0.0.1:2/mcp', enabled: true, headers: [{ name: 'X-Key', value: oldBox.seal(K.mcpHeader, mcpHeaderSealId('m1', 'X-Key'), 'h-1') }], allow_tools: null, created_at: at, updated_at: at });
    await r.mcpTools.set('m1', { tools: [{ name: 'echo', input_schema: {} }], refreshed_at: at });
    await r.oauthClients.put({ client_id: 'c1', name: 'App', description: null, redirect_uris: [], public: false, client_secret: oldBox.seal(K.oauthClientSecret, 'c1', 'cs-1'), created_at: at });
    await r.oauthState.put({ model: 'RefreshToken', id: 'h1', payload: oldBox.seal(K.oauthState, 'h1', '{"grantId":"g"}'), grant_id: 'g', expires_at: null });
    await r.oauthState.put({ model: 'EndedGrant', id: 'h2', payload: '', grant_id: null, expires_at: 1 });
    await r.modelPulls.put({ id: 'p1', url: 'http://127.0.0.1:3/a.bin', filename: 'a.bin', sha256: null, status: 'done', bytes_done: 1, bytes_total: 1, error: null, created_at: at, updated_at: at });
    await extra?.(r);
  });
}

describe('the copy image', () => {
  it('seals every secret again with the new key, makes the meta a team store, and names the replica of downloads', async () => {
    const source = await seeded();
    const image = resealImage(await readImage(source, 'the data dir'), oldBox, newBox, { replica: 'this-machine' });
    const target = await inMemoryRepositories();
    await writeImage(target, image, 'the team');
    const meta = (await target.meta.get())!;
    expect(meta.key_backend).toBe('team');
    expect(newBox.open(K.meta, 'key_check', meta.key_check)).toBe('svc');
    expect(newBox.open(K.meta, 'session_keys', meta.session_keys)).toBe('["cookie"]');
    expect(newBox.open(K.signingKeys, 'jwks', (await target.signingKeys.get())!)).toBe('[{"kid":"k"}]');
    expect(newBox.open(K.providerApiKey, 'up', (await target.providers.get('up'))!.api_key!)).toBe('sk-1');
    expect(newBox.open(K.mcpHeader, 'm1:x-key', (await target.mcpInstances.get('m1'))!.headers[0].value)).toBe('h-1');
    expect(newBox.open(K.oauthClientSecret, 'c1', (await target.oauthClients.get('c1'))!.client_secret!)).toBe('cs-1');
    expect(newBox.open(K.oauthState, 'h1', (await target.oauthState.get('RefreshToken:h1'))!.payload)).toBe('{"grantId":"g"}');
    expect((await target.oauthState.get('EndedGrant:h2'))!.payload).toBe('');
    expect((await target.mcpTools.get('m1'))!.tools[0].name).toBe('echo');
    expect((await target.modelPulls.get('p1'))!.replica).toBe('this-machine');
    expect(imageCounts(image)).toMatchObject({ providers: 1, mcpInstances: 1, mcpTools: 1, oauthState: 2, users: 0 });
    // nothing the old key sealed is left anywhere
    expect(() => oldBox.open(K.providerApiKey, 'up', (image.providers[0].api_key)!)).toThrow();
  });

  it("seals a command instance's env values again with the new key, its command otherwise as it was", async () => {
    const env = [
      { name: 'API_TOKEN', value: oldBox.seal(K.mcpEnv, mcpEnvSealId('m2', 'API_TOKEN'), 'env-secret-1') },
      { name: 'api_token', value: oldBox.seal(K.mcpEnv, mcpEnvSealId('m2', 'api_token'), 'env-secret-2') },
    ];
    const source = await seeded(async (r) => {
      await r.mcpInstances.put({
        id: 'm2', owner_id: 'u1', name: 'files', url: 'stdio://files', enabled: true, headers: [], allow_tools: null, created_at: at, updated_at: at,
        command: { command: 'npx', args: ['-y', 'server-filesystem', '/tmp'], env, cwd: '/tmp' },
      });
    });
    const image = resealImage(await readImage(source, 'the data dir'), oldBox, newBox);
    const target = await inMemoryRepositories();
    await writeImage(target, image, 'the team');
    const copied = (await target.mcpInstances.get('m2'))!;
    expect(copied.command).toMatchObject({ command: 'npx', args: ['-y', 'server-filesystem', '/tmp'], cwd: '/tmp' });
    expect(copied.command!.env.map((e) => e.name)).toEqual(['API_TOKEN', 'api_token']);
    expect(newBox.open(K.mcpEnv, 'm2:API_TOKEN', copied.command!.env[0].value)).toBe('env-secret-1');
    expect(newBox.open(K.mcpEnv, 'm2:api_token', copied.command!.env[1].value)).toBe('env-secret-2');
    expect(() => oldBox.open(K.mcpEnv, 'm2:API_TOKEN', copied.command!.env[0].value)).toThrow();
    expect(JSON.stringify(copied)).not.toContain('env-secret');
    // a value sealed with another key is refused by name, nothing written
    const damaged = await seeded(async (r) => {
      await r.mcpInstances.put({ ...(await source.mcpInstances.get('m2'))!, command: { command: 'x', args: [], cwd: null, env: [{ name: 'K', value: newBox.seal(K.mcpEnv, 'm2:K', 'v') }] } });
    });
    await expect(readImage(damaged, 'the data dir').then((i) => resealImage(i, oldBox, newBox))).rejects.toThrow(/Variable K of MCP instance m2 does not open/);
  });

  it('refuses a sealed value in a field it does not know, and one that does not open, naming where', async () => {
    const unknown = await seeded(async (r) => {
      await r.sessions.put({ id_hash: 's1', user_id: 'u1', csrf: 'x', expires_at: 1, data: { hidden: oldBox.seal('future_kind', 's1', 'secret') } });
    });
    const image = await readImage(unknown, 'the data dir');
    expect(() => resealImage(image, oldBox, newBox)).toThrow(CopyError);
    expect(() => resealImage(image, oldBox, newBox)).toThrow(/A record of sessions holds a sealed value that svc store copy does not know how to move/);
    const wrongKey = await seeded(async (r) => {
      await r.providers.put({ ...(await r.providers.get('up'))!, api_key: new SecretBox(randomBytes(32)).seal(K.providerApiKey, 'up', 'sk-x') });
    });
    await expect(readImage(wrongKey, 'the data dir').then((i) => resealImage(i, oldBox, newBox))).rejects.toThrow(/The API key of provider up does not open with the data dir's master key/);
  });

  it('refuses a store with no meta, and a target that holds anything, leaving it as it was', async () => {
    await expect(readImage(await inMemoryRepositories(), '/tmp/nowhere')).rejects.toThrow(/There is no svc store in \/tmp\/nowhere yet/);
    const image = resealImage(await readImage(await seeded(), 'the data dir'), oldBox, newBox);
    const used = await inMemoryRepositories(async (r) => {
      await r.users.put({ id: 'u9', username: 'someone', role: 'admin', password_hash: 'x', created_at: at });
    });
    await expect(writeImage(used, image, 'the team')).rejects.toThrow(TargetNotEmptyError);
    await expect(writeImage(used, image, 'the team')).rejects.toThrow(/The database at the team is not empty \(it holds users\)/);
    expect(await used.providers.count()).toBe(0);
    expect(await used.meta.get()).toBeNull();
  });
});
