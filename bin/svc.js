#!/usr/bin/env node
import { main } from '../dist/cli/main.js';

main(process.argv).then(
  (code) => { process.exitCode = code; },
  (err) => { process.stderr.write(`svc: ${err?.message ?? err}\n`); process.exitCode = 1; },
);
