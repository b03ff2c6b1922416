#!/usr/bin/env node
import { main, outputClosed } from '../dist/cli/main.js';

// `svc ... | head` closes the pipe early (EPIPE), a closed terminal fails writes (EIO); neither is
// an error worth a stack trace. `svc serve` takes it as a request to stop, and stops cleanly
// (outputClosed answers true).
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err) => {
    if (err.code === 'EPIPE' || err.code === 'EIO') {
      if (!outputClosed()) process.exit(process.exitCode ?? 0);
      return;
    }
    throw err;
  });
}

main(process.argv).then(
  (code) => { process.exitCode = code; },
  (err) => { process.stderr.write(`svc: ${err?.message ?? err}\n`); process.exitCode = 1; },
);
