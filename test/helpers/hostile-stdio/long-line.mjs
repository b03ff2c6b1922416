// At the first message, writes one line of the given size (20 MiB by default) with no newline
// until its end, in 64 KiB writes, then keeps running.
import { createInterface } from 'node:readline';

const size = Number(process.argv[2] ?? 20 * 1024 * 1024);
const chunk = Buffer.alloc(64 * 1024, 0x61);
let sent = 0;
function pump() {
  while (sent < size) {
    const n = Math.min(chunk.length, size - sent);
    sent += n;
    if (!process.stdout.write(chunk.subarray(0, n))) return process.stdout.once('drain', pump);
  }
  process.stdout.write('\n');
}
createInterface({ input: process.stdin }).once('line', pump);
setInterval(() => undefined, 60_000);
