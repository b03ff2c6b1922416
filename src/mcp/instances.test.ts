/** The MCP instance registry as a unit: the service on the in-memory repositories. */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SecretBox } from '../store/crypto.js';
import { inMemoryRepositories } from '../store/store-repositories.js';
import type { UserRecord } from '../store/schema.js';
import { defaultCommandUrl, McpInstancesService, toPublicInstance } from './instances.js';

const at = '2026-11-26T12:00:00.000Z';
const owner: UserRecord = { id: 'u1', username: 'ann', role: 'user', password_hash: 'x', created_at: at };
const other: UserRecord = { ...owner, id: 'u2', username: 'bob' };

describe('McpInstancesService on the in-memory repositories', () => {
  it("seals header values, keeps instances to their owner, and removes an instance's tool list with it", async () => {
    const repos = await inMemoryRepositories();
    const instances = new McpInstancesService(repos, new SecretBox(randomBytes(32)), () => Date.parse(at));
    const made = await instances.create(owner, { name: 'files', url: 'http://127.0.0.1:9/mcp', headers: [{ name: 'Authorization', value: 'Bearer upstream-secret' }] } as never);
    expect(JSON.stringify(await repos.mcpInstances.get(made.id))).not.toContain('upstream-secret');
    expect(await instances.openHeaders(made)).toEqual({ Authorization: 'Bearer upstream-secret' });
    await expect(instances.getOwned(other, made.id)).rejects.toMatchObject({ code: 'not_found' });
    await expect(instances.update(other, made.id, { enabled: false } as never)).rejects.toMatchObject({ code: 'not_found' });
    expect((await instances.update(owner, made.id, { enabled: false } as never)).enabled).toBe(false);
    await repos.mcpTools.set(made.id, { tools: [{ name: 't', input_schema: {} }], refreshed_at: at });
    await expect(instances.remove(other, made.id)).rejects.toMatchObject({ code: 'not_found' });
    await instances.remove(owner, made.id);
    expect(await instances.find(made.id)).toBeUndefined();
    expect(await repos.mcpTools.get(made.id)).toBeUndefined();
  });
});

describe('opened header values', () => {
  it('are opened once each, and a value sealed anew is opened anew', async () => {
    const repos = await inMemoryRepositories();
    const box = new SecretBox(randomBytes(32));
    let opens = 0;
    const counting = Object.assign(Object.create(box) as SecretBox, { open: (...a: Parameters<SecretBox['open']>) => (opens++, box.open(...a)) });
    const instances = new McpInstancesService(repos, counting, () => Date.parse(at));
    const made = await instances.create(owner, { name: 'files', url: 'http://127.0.0.1:9/mcp', headers: [{ name: 'X-Key', value: 'first-secret' }] } as never);
    for (let i = 0; i < 3; i++) expect(await instances.openHeaders(made)).toEqual({ 'X-Key': 'first-secret' });
    expect(opens).toBe(1);
    const changed = await instances.update(owner, made.id, { headers: [{ name: 'X-Key', value: 'second-secret' }] } as never);
    expect(await instances.openHeaders((await instances.find(changed.id))!)).toEqual({ 'X-Key': 'second-secret' });
    expect(opens).toBe(2);
    // a value damaged in the store is not one opened before: it is refused, as ever
    const record = (await instances.find(made.id))!;
    const damaged = { ...record, headers: [{ name: 'X-Key', value: `${record.headers[0].value.slice(0, -4)}AAAA` }] };
    await expect(instances.openHeaders(damaged)).rejects.toThrow();
  });
});

const admin: UserRecord = { ...owner, id: 'u3', username: 'root', role: 'admin' };
const filesCommand = { command: 'server-filesystem', args: ['/tmp'], env: [{ name: 'TOKEN', value: 'env-marker-1' }], cwd: '/tmp' };

describe('command instances in the registry', () => {
  it('gives a stable default URL from the name', () => {
    expect(defaultCommandUrl('Filesystem')).toBe('stdio://filesystem');
    expect(defaultCommandUrl('  My Git — server!! ')).toBe('stdio://my-git-server');
    expect(defaultCommandUrl('—')).toBe('stdio://server');
    expect(defaultCommandUrl('a'.repeat(62) + ' b')).toBe(`stdio://${'a'.repeat(62)}`);
    expect(defaultCommandUrl('x'.repeat(100)).length).toBe('stdio://'.length + 63);
  });

  it('seals env values, answers names only, and is for admins alone: others are refused and nothing is stored', async () => {
    const repos = await inMemoryRepositories();
    const instances = new McpInstancesService(repos, new SecretBox(randomBytes(32)), () => Date.parse(at));
    await expect(instances.create(owner, { name: 'files', command: filesCommand } as never)).rejects.toMatchObject({ code: 'forbidden', status: 403 });
    expect(await repos.mcpInstances.list()).toEqual([]);
    const made = await instances.create(admin, { name: 'Files', command: filesCommand } as never);
    expect(made.url).toBe('stdio://files');
    expect(made.headers).toEqual([]);
    expect(JSON.stringify(await repos.mcpInstances.get(made.id))).not.toContain('env-marker-1');
    expect(instances.openEnv(made)).toEqual({ TOKEN: 'env-marker-1' });
    expect(instances.commandSpec(made)).toEqual({ command: 'server-filesystem', args: ['/tmp'], env: { TOKEN: 'env-marker-1' }, cwd: '/tmp' });
    const view = toPublicInstance(made, 'http://svc');
    expect(view).toMatchObject({ transport: 'command', command: { command: 'server-filesystem', args: ['/tmp'], env_names: ['TOKEN'], cwd: '/tmp' } });
    expect(JSON.stringify(view)).not.toContain('env-marker-1');
    // a change or a removal of a command instance by one who is no longer an admin is refused too
    const demoted = { ...admin, role: 'user' as const };
    await expect(instances.update(demoted, made.id, { enabled: false } as never)).rejects.toMatchObject({ code: 'forbidden' });
    await expect(instances.remove(demoted, made.id)).rejects.toMatchObject({ code: 'forbidden' });
    expect((await instances.find(made.id))!.enabled).toBe(true);
    // a new env replaces the old; fields of the other form are refused
    const changed = await instances.update(admin, made.id, { command: { env: [{ name: 'OTHER', value: 'env-marker-2' }] }, url: 'stdio://fs' } as never);
    expect(instances.openEnv(changed)).toEqual({ OTHER: 'env-marker-2' });
    expect(changed.url).toBe('stdio://fs');
    expect(changed.command!.args).toEqual(['/tmp']);
    await expect(instances.update(admin, made.id, { headers: [] } as never)).rejects.toMatchObject({ code: 'invalid_body', param: 'headers' });
    const http = await instances.create(owner, { name: 'h', url: 'http://127.0.0.1:9/mcp' } as never);
    expect(toPublicInstance(http, 'http://svc').transport).toBe('http');
    await expect(instances.update(owner, http.id, { command: { command: 'x' } } as never)).rejects.toMatchObject({ code: 'invalid_body', param: 'command' });
    expect(instances.openEnv(http)).toEqual({});
    await instances.remove(admin, made.id);
    expect(await instances.find(made.id)).toBeUndefined();
  });

  it('tries the command once when it can, refusing one that fails with its message scrubbed of the env values', async () => {
    const repos = await inMemoryRepositories();
    const tried: unknown[] = [];
    const instances = new McpInstancesService(repos, new SecretBox(randomBytes(32)), () => Date.parse(at), {
      probe: async (spec, secrets) => {
        tried.push({ spec, secrets });
        return spec.command === 'broken' ? { ok: false, message: `broken exited with code 3: saw env-marker-1` } : { ok: true };
      },
      status: (id) => ({ live: 1, last_exit: null, status: `running ${id.length}` }),
    });
    await expect(instances.create(admin, { name: 'b', command: { ...filesCommand, command: 'broken' } } as never)).rejects.toMatchObject({
      code: 'mcp_command_failed',
      status: 400,
      message: 'broken exited with code 3: saw ***',
    });
    expect(await repos.mcpInstances.list()).toEqual([]);
    expect(tried).toEqual([{ spec: { command: 'broken', args: ['/tmp'], env: { TOKEN: 'env-marker-1' }, cwd: '/tmp' }, secrets: ['env-marker-1'] }]);
    const skipped = await instances.create(admin, { name: 'b', command: { command: 'broken' }, try: false } as never);
    expect(skipped.command).toEqual({ command: 'broken', args: [], env: [], cwd: null });
    expect(tried).toHaveLength(1);
    expect(instances.processesOf(skipped)).toEqual({ live: 1, last_exit: null, status: 'running 36' });
    await expect(instances.update(admin, skipped.id, { command: { args: ['again'] } } as never)).rejects.toMatchObject({ code: 'mcp_command_failed' });
    expect((await instances.find(skipped.id))!.command!.args).toEqual([]);
  });
});
