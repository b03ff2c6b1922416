import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isId = (v: unknown) => typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v));

/**
 * Whether a parsed line is one JSON-RPC 2.0 message: a request or notification (a string method),
 * a result or an error answer (with an id). Only the envelope is checked, so the cost does not grow
 * with the size of a result; what is inside is the reader's to check, as for an HTTP server's answer.
 */
export function isJsonRpcMessage(v: unknown): v is JSONRPCMessage {
  if (!isObject(v) || v.jsonrpc !== '2.0') return false;
  if (typeof v.method === 'string') return v.id === undefined || isId(v.id);
  if (!isId(v.id) && !(v.id === null && 'error' in v)) return false;
  if ('result' in v) return !('error' in v);
  return isObject(v.error) && typeof v.error.code === 'number' && typeof v.error.message === 'string';
}

/**
 * The messages of one line of a child's stdout, or null when it is not JSON-RPC. A line may hold a
 * batch (an array of messages), as the protocol's earlier versions let servers send.
 */
export function messagesOfLine(text: string): JSONRPCMessage[] | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (Array.isArray(value)) return value.length > 0 && value.every(isJsonRpcMessage) ? value : null;
  return isJsonRpcMessage(value) ? [value] : null;
}
