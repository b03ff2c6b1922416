// Answers as the base does, and after initialize writes notifications to stdout as fast as the
// pipe takes them, for ever: svc must keep up without its memory growing.
import { serve, send } from './base.mjs';

serve();
const note = { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'x'.repeat(1000) } };
const line = `${JSON.stringify(note)}\n`.repeat(64);
function pump() {
  while (process.stdout.write(line));
  process.stdout.once('drain', pump);
}
process.stdin.once('data', () => setImmediate(pump));
void send;
