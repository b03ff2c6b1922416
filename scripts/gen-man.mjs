#!/usr/bin/env node
// Build step: writes the SYNOPSIS of man/svc.1 from the CLI's own command definitions (dist/).
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const { buildProgram } = await import('../dist/cli/main.js');
const { synopsis, withSynopsis } = await import('../dist/cli/man.js');
const file = fileURLToPath(new URL('../man/svc.1', import.meta.url));
const page = readFileSync(file, 'utf8');
const next = withSynopsis(page, synopsis(buildProgram({ out() {}, err() {}, isTTY: false })));
if (next !== page) writeFileSync(file, next);
