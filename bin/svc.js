#!/usr/bin/env node
import { main } from '../dist/cli/main.js';

// `svc ... | head` closes the pipe early; that is not an error worth a stack trace.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  });
}

main(process.argv).then(
  (code) => { process.exitCode = code; },
  (err) => { process.stderr.write(`svc: ${err?.message ?? err}\n`); process.exitCode = 1; },
);
