// Preloaded into the daemon (NODE_OPTIONS=--import=...): the longest event-loop stall, written to
// STALL_FILE every 250 ms, and reset when that file is removed (so each phase reads its own).
import { writeFileSync, existsSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';

const file = process.env.STALL_FILE;
if (file) {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  setInterval(() => {
    if (!existsSync(file)) h.reset();
    writeFileSync(file, String(h.max / 1e6));
  }, 250).unref();
}
