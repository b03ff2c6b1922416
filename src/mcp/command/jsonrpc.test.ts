import { describe, expect, it } from 'vitest';
import { isJsonRpcMessage, messagesOfLine } from './jsonrpc.js';

describe('JSON-RPC lines of a command server', () => {
  it('takes requests, notifications, results and errors', () => {
    for (const m of [
      { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      { jsonrpc: '2.0', id: 'a', method: 'sampling/createMessage', params: {} },
      { jsonrpc: '2.0', method: 'notifications/progress', params: { progress: 1 } },
      { jsonrpc: '2.0', id: 1, result: {} },
      { jsonrpc: '2.0', id: 1, result: null },
      { jsonrpc: '2.0', id: 2, error: { code: -32601, message: 'no' } },
      { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'parse error' } },
    ]) {
      expect(isJsonRpcMessage(m), JSON.stringify(m)).toBe(true);
    }
  });

  it('refuses what is not a JSON-RPC 2.0 message', () => {
    for (const m of [
      null,
      'text',
      42,
      [],
      { level: 'info', msg: 'started' },
      { jsonrpc: '1.0', id: 1, method: 'x' },
      { jsonrpc: '2.0' },
      { jsonrpc: '2.0', id: 1 },
      { jsonrpc: '2.0', id: {}, result: 1 },
      { jsonrpc: '2.0', id: 1, result: 1, error: { code: 1, message: 'x' } },
      { jsonrpc: '2.0', id: 1, error: 'bad' },
      { jsonrpc: '2.0', id: null, result: {} },
      { jsonrpc: '2.0', method: 5 },
    ]) {
      expect(isJsonRpcMessage(m), JSON.stringify(m)).toBe(false);
    }
  });

  it('reads a line as its messages, a batch as several, garbage as null', () => {
    expect(messagesOfLine('{"jsonrpc":"2.0","id":1,"result":{}}')).toEqual([{ jsonrpc: '2.0', id: 1, result: {} }]);
    expect(messagesOfLine('[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":1,"result":{}}]')).toHaveLength(2);
    expect(messagesOfLine('[]')).toBeNull();
    expect(messagesOfLine('[{"jsonrpc":"2.0","method":"a"},{"x":1}]')).toBeNull();
    expect(messagesOfLine('Server started on stdio')).toBeNull();
    expect(messagesOfLine('{"jsonrpc":"2.0","id":1,"result":')).toBeNull();
  });
});
