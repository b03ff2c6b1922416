// Forks a grandchild that ignores SIGTERM and the end of input (stubborn.mjs, in this process
// group), and only then serves: answers `pid` with its own pid and the grandchild's in
// `grandchild`, and exits at end of input, leaving the grandchild behind unless its whole group
// is ended.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { serve } from './base.mjs';

const grand = spawn(process.execPath, [fileURLToPath(new URL('./stubborn.mjs', import.meta.url))], { stdio: ['ignore', 'ignore', 'pipe'] });
grand.stderr.once('data', () => {
  process.stderr.write(`grandchild ${grand.pid}\n`);
  serve({
    onCall: (msg) =>
      msg.params?.name === 'pid' ? { jsonrpc: '2.0', id: msg.id, result: { content: [{ type: 'text', text: String(process.pid) }], grandchild: grand.pid } } : undefined,
  });
});
