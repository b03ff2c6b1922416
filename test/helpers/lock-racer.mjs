// One contender for a data dir's lock, for test/store-lock.test.ts: loads the lock (the build's,
// dist/store/lock.js), says "ready", waits for a wall-clock instant on stdin, takes the lock at
// that instant, prints what happened as one JSON line, then holds on until stdin ends and exits
// without releasing anything, as a crashed daemon would.
import { createInterface } from 'node:readline';

const [dataDir, lockModule] = process.argv.slice(2);
const { lockDataDir } = await import(lockModule);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
process.stdout.write('ready\n');
const at = Number((await lines.next()).value);
// Spin rather than sleep: a timer would wake each contender up to a few milliseconds late.
while (Date.now() < at);
let result;
try {
  await lockDataDir(dataDir);
  result = { won: true, pid: process.pid };
} catch (err) {
  result = { won: false, name: err.name, holder: err.pid, message: err.message };
}
process.stdout.write(`${JSON.stringify(result)}\n`);
while (!(await lines.next()).done);
