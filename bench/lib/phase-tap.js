// A preload for a benchmarked daemon (`node --import bench/lib/phase-tap.js`): the wall time of each
// phase of every proxied call, timed inside the process, from outside svc's own code (Node's HTTP
// server and response, and undici's Pool). On SIGUSR2 it writes the medians of the calls since the
// last signal to the file named by SVC_BENCH_PHASES, and starts again.
//
// Why: a daemon's CPU per call, read from outside, differs by a few µs between two copies of one
// build on a shared 2-vCPU machine even once both are warm (and by tens of µs in one run in
// three), about what a step of the hot path saves. The median wall time of a phase, taken in the
// process, moves by 1 to 4 µs between such copies, and a median drops what a collection or a
// preemption adds to one call.
import http from 'node:http';
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const out = process.env.SVC_BENCH_PHASES;
// undici as the daemon's build resolves it (its bin is argv[1])
const { Pool } = createRequire(process.argv[1])('undici');
const now = () => performance.now();
const LIMIT = 50_000;
let calls = [];
let current = null;

/** A call's kind by its path: ids and names left out. */
const kindOf = (url) => (url.startsWith('/v1/') ? url.split('?')[0] : url.startsWith('/svc/v1/apps/mcps/') ? 'mcp' : null);

const emit = http.Server.prototype.emit;
http.Server.prototype.emit = function tapRequest(event, req, res) {
  if (event === 'request') {
    const kind = kindOf(req.url ?? '');
    if (kind) {
      const call = { kind, start: now(), dispatch: NaN, headers: NaN, ended: NaN, idle: NaN };
      current = call;
      res.__phases = call;
      res.once('finish', () =>
        setImmediate(() => {
          call.idle = now();
          if (calls.length < LIMIT) calls.push(call);
        }),
      );
    }
  }
  return emit.apply(this, arguments);
};

const request = Pool.prototype.request;
Pool.prototype.request = function tapDispatch(opts, callback) {
  const call = current;
  if (call) call.dispatch = now();
  const answer = request.call(this, opts, callback);
  if (call && answer && typeof answer.then === 'function') answer.then(() => (call.headers = now()), () => undefined);
  return answer;
};

const end = http.ServerResponse.prototype.end;
http.ServerResponse.prototype.end = function tapEnd() {
  const result = end.apply(this, arguments);
  if (this.__phases) this.__phases.ended = now();
  return result;
};

const median = (xs) => {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] * 1000 : null;
};

/** Each kind's medians in µs: to the upstream call, the upstream's wait, the answer, what follows it, and svc's part. */
function summary(list) {
  const kinds = {};
  for (const c of list) (kinds[c.kind] ??= []).push(c);
  return Object.fromEntries(
    Object.entries(kinds).map(([kind, cs]) => [
      kind,
      {
        calls: cs.length,
        toUpstream: median(cs.map((c) => c.dispatch - c.start)),
        upstream: median(cs.map((c) => c.headers - c.dispatch)),
        answer: median(cs.map((c) => c.ended - c.headers)),
        after: median(cs.map((c) => c.idle - c.ended)),
        inSvc: median(cs.map((c) => c.idle - c.start - (c.headers - c.dispatch))),
      },
    ]),
  );
}

process.on('SIGUSR2', () => {
  const done = calls;
  calls = [];
  if (out) writeFileSync(out, JSON.stringify(summary(done)));
});
