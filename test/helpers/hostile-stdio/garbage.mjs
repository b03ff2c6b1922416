// Writes a line that is not JSON-RPC (a log line on stdout) once it is asked anything.
// With `json`, the line is JSON but no JSON-RPC message.
import { createInterface } from 'node:readline';

const kind = process.argv[2] ?? 'text';
createInterface({ input: process.stdin }).once('line', () => {
  process.stdout.write(kind === 'json' ? '{"level":"info","msg":"started"}\n' : 'Server listening on stdio...\n');
});
