import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ChildBridge } from './bridge.js';
import type { ChildExit, CommandChild } from './types.js';

/** A child that records what it is sent; the test answers for it. */
function fakeChild() {
  const sent: JSONRPCMessage[] = [];
  const child = {
    pid: 1,
    key: 'g:session',
    instanceId: 'i',
    ended: false,
    exited: new Promise<ChildExit>(() => undefined),
    send: (m: JSONRPCMessage) => void sent.push(m),
    close: async () => undefined,
  } as CommandChild & { onmessage?: (m: JSONRPCMessage) => void; onexit?: (e: ChildExit) => void };
  return { child, sent };
}

const sink = () => {
  const got: JSONRPCMessage[] = [];
  return { got, send: (m: JSONRPCMessage) => void got.push(m) };
};

afterEach(() => vi.useRealTimers());

describe('ChildBridge', () => {
  it('puts an id of its own on each request and answers under the app\'s id, so reused ids never meet', () => {
    const { child, sent } = fakeChild();
    const bridge = new ChildBridge(child, 1000, () => undefined);
    const a = sink();
    const b = sink();
    bridge.toChild({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, a);
    bridge.toChild({ jsonrpc: '2.0', id: 1, method: 'ping' }, b);
    const [first, second] = sent as { id: number }[];
    expect(first.id).not.toBe(second.id);
    child.onmessage!({ jsonrpc: '2.0', id: second.id, result: { pong: true } });
    child.onmessage!({ jsonrpc: '2.0', id: first.id, result: { tools: [] } });
    expect(a.got).toEqual([{ jsonrpc: '2.0', id: 1, result: { tools: [] } }]);
    expect(b.got).toEqual([{ jsonrpc: '2.0', id: 1, result: { pong: true } }]);
  });

  it('passes notifications on as they are, and what the server sends of its own to onServerMessage', () => {
    const { child, sent } = fakeChild();
    const bridge = new ChildBridge(child, 1000, () => undefined);
    const own: JSONRPCMessage[] = [];
    bridge.onServerMessage = (m) => void own.push(m);
    bridge.toChild({ jsonrpc: '2.0', method: 'notifications/initialized' }, sink());
    expect(sent).toEqual([{ jsonrpc: '2.0', method: 'notifications/initialized' }]);
    child.onmessage!({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    child.onmessage!({ jsonrpc: '2.0', id: 99, result: {} }); // an answer to nothing svc sent
    expect(own).toEqual([{ jsonrpc: '2.0', method: 'notifications/tools/list_changed' }]);
  });

  it('answers a request the child never answers with a JSON-RPC error once the timeout passes', () => {
    vi.useFakeTimers();
    const { child } = fakeChild();
    const bridge = new ChildBridge(child, 500, () => undefined);
    const a = sink();
    bridge.toChild({ jsonrpc: '2.0', id: 'x', method: 'tools/call', params: { name: 'slow' } }, a);
    expect(a.got).toEqual([]);
    vi.advanceTimersByTime(500);
    expect(a.got).toEqual([{ jsonrpc: '2.0', id: 'x', error: { code: -32001, message: 'The command server did not answer within 500 ms.' } }]);
  });

  it('answers every pending request with an error naming the exit at once when the child ends', () => {
    const { child } = fakeChild();
    const ended: ChildExit[] = [];
    const bridge = new ChildBridge(child, 1000, (e) => void ended.push(e));
    const a = sink();
    bridge.toChild({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'boom' } }, a);
    const exit: ChildExit = { code: 3, signal: null, at: new Date(0).toISOString(), reason: 'crash' };
    child.onexit!(exit);
    expect(a.got).toEqual([{ jsonrpc: '2.0', id: 5, error: { code: -32603, message: 'The command server exited with code 3 before it answered.' } }]);
    expect(ended).toEqual([exit]);
  });
});
