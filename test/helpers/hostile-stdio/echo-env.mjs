// Answers tools/call `env` with its environment and argv, so a test sees what svc passed.
import { serve } from './base.mjs';

serve({
  onCall: (msg) =>
    msg.params?.name === 'env' ? { jsonrpc: '2.0', id: msg.id, result: { env: process.env, argv: process.argv.slice(2), cwd: process.cwd() } } : undefined,
});
