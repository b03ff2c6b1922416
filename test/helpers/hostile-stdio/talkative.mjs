// The well-behaved server with more to say: instructions and the list-changed and logging
// capabilities at initialize, and a `notify` tool that sends the session a log message and
// notifications/tools/list_changed (each naming its pid) before it answers.
import { send, serve } from './base.mjs';

serve({
  onInit: (msg) => ({
    jsonrpc: '2.0',
    id: msg.id,
    result: {
      protocolVersion: msg.params?.protocolVersion ?? '2025-06-18',
      capabilities: { tools: { listChanged: true }, logging: {}, tasks: { list: {} } },
      serverInfo: { name: 'talkative', version: '2.1.0' },
      instructions: 'Call count to count.',
    },
  }),
  onCall: (msg) => {
    if (msg.params?.name !== 'notify') return undefined;
    send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: `hello from ${process.pid}` } });
    send({ jsonrpc: '2.0', method: 'notifications/tools/list_changed', params: { _meta: { pid: process.pid } } });
    return { jsonrpc: '2.0', id: msg.id, result: { content: [{ type: 'text', text: String(process.pid) }] } };
  },
});
