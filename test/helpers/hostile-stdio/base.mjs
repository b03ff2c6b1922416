// A small MCP server over stdio, by hand (no SDK, so it starts in a few ms): it answers
// initialize, ping, tools/list and tools/call, one JSON line each. The hostile servers beside it
// change one thing of it. `count` keeps a counter in the process, so two sessions that shared a
// process would see each other's calls.
import { createInterface } from 'node:readline';

let counter = 0;

export const tools = [
  { name: 'count', description: 'Adds one to this process\'s counter and answers it.', inputSchema: { type: 'object', properties: {} } },
  { name: 'pid', description: 'Answers the pid of the server process.', inputSchema: { type: 'object', properties: {} } },
];

export const send = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);

const text = (t) => ({ content: [{ type: 'text', text: String(t) }] });

/** The answer to a request, or undefined for a notification. `onCall` (`onInit`) may answer a tools/call (initialize) first. */
export function answer(msg, onCall, onInit) {
  if (msg.id === undefined) return undefined;
  const ok = (result) => ({ jsonrpc: '2.0', id: msg.id, result });
  switch (msg.method) {
    case 'initialize':
      return onInit?.(msg) ?? ok({ protocolVersion: msg.params?.protocolVersion ?? '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'hostile', version: '1.0.0' } });
    case 'ping':
      return ok({});
    case 'tools/list':
      return ok({ tools });
    case 'tools/call': {
      const own = onCall?.(msg);
      if (own !== undefined) return own;
      if (msg.params?.name === 'count') return ok(text(++counter));
      if (msg.params?.name === 'pid') return ok(text(process.pid));
      return { jsonrpc: '2.0', id: msg.id, error: { code: -32602, message: `Unknown tool: ${msg.params?.name}` } };
    }
    default:
      return { jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'Method not found' } };
  }
}

/** Reads JSON lines from stdin and answers each; exits at end of input unless `keepOnEof`. */
export function serve({ onCall, onInit, keepOnEof = false } = {}) {
  const rl = createInterface({ input: process.stdin });
  rl.on('line', (line) => {
    if (!line.trim()) return;
    const reply = answer(JSON.parse(line), onCall, onInit);
    if (reply) send(reply);
  });
  rl.on('close', () => {
    if (!keepOnEof) process.exit(0);
  });
}
