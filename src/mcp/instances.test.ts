/** The MCP instance registry as a unit: the service on the in-memory repositories. */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SecretBox } from '../store/crypto.js';
import { inMemoryRepositories } from '../store/store-repositories.js';
import type { UserRecord } from '../store/schema.js';
import { McpInstancesService } from './instances.js';

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
