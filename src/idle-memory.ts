import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

type Collect = (options?: { type?: 'major' | 'minor' }) => void;

/**
 * Gives memory back once the daemon is idle. V8 keeps its young generation at the size its busiest
 * moment needed (32 MiB committed with Node's defaults, whatever is live in it); its memory
 * reducer shrinks it, with a few memory-reducing collections, only once it sees a low allocation
 * rate, and it reads the rate at collections, which an idle process never has: it keeps waiting
 * on the rate of its last busy moment (--trace-gc-verbose: "Memory reducer: high alloc"). A
 * start, a burst of requests or a load test so left the daemon about 25 MiB larger for as long as
 * it ran. Once no request has come for a whole `idleMs` period, one minor collection (a few
 * milliseconds) gives the reducer its reading; within seconds it hands the young generation back
 * (56 to 25 MiB of heap in one trace), and it grows again with the next load. Once per idle
 * spell. A stream left open does not count as busy: MCP hosts keep one open all day, and a pause
 * of a few milliseconds costs an idle stream nothing.
 */
export function reduceMemoryWhenIdle(opts: { idleMs: number; served: () => number; collect?: Collect }): () => void {
  const collect = opts.collect ?? v8Collector();
  if (!collect) return () => undefined;
  let seen = opts.served();
  let reduced = false;
  const timer = setInterval(() => {
    const served = opts.served();
    if (served !== seen) {
      seen = served;
      reduced = false;
      return;
    }
    if (reduced) return;
    reduced = true;
    collect({ type: 'minor' });
  }, opts.idleMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** The one way to reach V8's collector from a running process: the flag only exposes `gc` to contexts made after it, so it is set, read from a new context, and unset. */
function v8Collector(): Collect | undefined {
  try {
    setFlagsFromString('--expose-gc');
    const collect = runInNewContext('gc') as Collect;
    setFlagsFromString('--no-expose-gc');
    return collect;
  } catch {
    return undefined;
  }
}
