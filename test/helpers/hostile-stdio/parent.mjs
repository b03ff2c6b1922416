// A stand-in for svc: runs the built supervisor with a record file (argv[2]) and starts a
// well-behaved server, one that ignores SIGTERM and the end of input, and one whose grandchild
// does. When all have answered, it writes their pids (and the watchdog's) as one JSON line on
// stdout and waits to be killed.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createLogger } from '../../../dist/log.js';
import { CommandSupervisor } from '../../../dist/mcp/command/supervisor.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const spec = (name) => ({ command: process.execPath, args: [path.join(here, `${name}.mjs`)], env: {}, cwd: null });
const sup = new CommandSupervisor({
  recordFile: process.argv[2],
  logger: createLogger('warn', process.stderr),
  maxPerInstance: 8,
  maxTotal: 8,
  idleTimeoutMs: 600_000,
  maxLineBytes: 1024 * 1024,
});

function ask(child, id, method, params) {
  return new Promise((resolve) => {
    child.onmessage = (m) => m.id === id && resolve(m);
    child.send({ jsonrpc: '2.0', id, method, params });
  });
}

const init = { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'parent', version: '1' } };
const out = {};
for (const name of ['stateful', 'stubborn', 'grandchild']) {
  const child = await sup.start('inst', name, spec(name), []);
  await ask(child, 1, 'initialize', init);
  out[name] = child.pid;
  if (name === 'grandchild') out.grand = (await ask(child, 2, 'tools/call', { name: 'pid', arguments: {} })).result.grandchild;
}
out.watchdog = sup.watchdogPid;
process.stdout.write(`${JSON.stringify(out)}\n`);
setInterval(() => undefined, 60_000);
