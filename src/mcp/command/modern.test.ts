import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import type { TransportRequest } from '../transport/types.js';
import { ClientGone } from '../../upstream/client.js';
import { discoverResult, isModernRequest, modernAnswer } from './modern.js';

const request = (headers: Record<string, string>): TransportRequest => ({ method: 'POST', headers, timeoutMs: 1000, abort: new ClientGone() });
const call = (meta?: Record<string, unknown>) => ({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: meta ? { _meta: meta } : {} }) as JSONRPCMessage;

describe('the 2026-07-28 era for a 2025-era child', () => {
  it('is the era of a request by its header, else by its _meta version; a version that is no date is not', () => {
    expect(isModernRequest(request({ 'mcp-protocol-version': '2026-07-28' }), call())).toBe(true);
    expect(isModernRequest(request({ 'mcp-protocol-version': '2030-01-01' }), call())).toBe(true);
    expect(isModernRequest(request({ 'mcp-protocol-version': '2025-11-25' }), call({ 'io.modelcontextprotocol/protocolVersion': '2026-07-28' }))).toBe(false);
    expect(isModernRequest(request({}), call({ 'io.modelcontextprotocol/protocolVersion': '2026-07-28' }))).toBe(true);
    expect(isModernRequest(request({}), call())).toBe(false);
    expect(isModernRequest(request({ 'mcp-protocol-version': 'zzzz' }), call())).toBe(false);
  });

  it('gives results resultType and the cacheable ones their hints, keeping a ttlMs the child gave; errors pass as they are', () => {
    const ok = (result: unknown) => ({ jsonrpc: '2.0', id: 1, result }) as JSONRPCMessage;
    expect(modernAnswer('tools/call', ok({ content: [] }))).toEqual(ok({ content: [], resultType: 'complete' }));
    expect(modernAnswer('tools/list', ok({ tools: [], ttlMs: 5000, cacheScope: 'public' }))).toEqual(ok({ tools: [], ttlMs: 5000, cacheScope: 'private', resultType: 'complete' }));
    expect(modernAnswer('resources/read', ok({ contents: [], ttlMs: -1 }))).toEqual(ok({ contents: [], ttlMs: 0, cacheScope: 'private', resultType: 'complete' }));
    const error = { jsonrpc: '2.0', id: 1, error: { code: -32601, message: 'Method not found' } } as JSONRPCMessage;
    expect(modernAnswer('prompts/list', error)).toBe(error);
  });

  it('discovers from what the child said, without what the era lacks', () => {
    const found = discoverResult({ capabilities: { tools: { listChanged: true }, resources: { subscribe: true, listChanged: true }, tasks: {} }, serverInfo: { name: 's', version: '1' } });
    expect(found).toMatchObject({ resultType: 'complete', supportedVersions: ['2026-07-28'], capabilities: { tools: {}, resources: {} }, serverInfo: { name: 's', version: '1' }, ttlMs: 0, cacheScope: 'private' });
    expect(found.capabilities).not.toHaveProperty('tasks');
    expect(found).not.toHaveProperty('instructions');
  });
});
