#!/usr/bin/env node
// Runs svc's microbenchmarks against the build output (dist/): `npm run build && npm run bench`.
// Each benchmark is a module in this folder exporting `name`, `description` and a default async
// function that receives a reporter and returns its checks ({ label, value, target, pass }).
// Add one by writing bench/<name>.js and listing it below. `node bench/run.js bearer` runs one.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const BENCHMARKS = ['bearer', 'proxy', 'messages', 'mcp', 'command', 'footprint', 'activity'];

const dist = fileURLToPath(new URL('../dist/daemon.js', import.meta.url));
if (!existsSync(dist)) {
  console.error('bench: dist/ is missing; run `npm run build` first.');
  process.exit(1);
}

// `--soak` runs the bounded soak alone; it is not part of the default run.
const args = process.argv.slice(2);
// `--store` runs the store-growth benchmark alone; it takes a few minutes.
// `--streams` opens 2,000 (STREAMS=N) MCP GET streams through svc; alone too.
// `--team` runs a team server (PostgreSQL) against the file store; it starts a PostgreSQL cluster.
// `--stages` prints the hot-path budget: each stage's CPU per call, built up piece by piece.
// `--ab` compares a baseline build (BENCH_BASELINE=<checkout>) with this one, interleaved.
const ALONE = ['soak', 'store', 'streams', 'team', 'stages', 'ab'];
const wanted = ALONE.find((a) => args.includes(`--${a}`)) ? [ALONE.find((a) => args.includes(`--${a}`))] : args;
const unknown = wanted.filter((w) => !BENCHMARKS.includes(w) && !ALONE.includes(w));
if (unknown.length) {
  console.error(`bench: unknown benchmark ${unknown.join(', ')}; known: ${BENCHMARKS.join(', ')}`);
  process.exit(2);
}

const report = {
  line: (text = '') => console.log(text),
  /** a measurement printed as `label  value unit` */
  stat: (label, value, unit = '') => console.log(`  ${label.padEnd(44)} ${value}${unit ? ` ${unit}` : ''}`),
};

console.log(`svc benchmarks (node ${process.version}, ${process.platform}/${process.arch})`);
let failed = 0;
for (const name of wanted.length ? wanted : BENCHMARKS) {
  const mod = await import(`./${name}.js`);
  console.log(`\n== ${mod.name ?? name}: ${mod.description ?? ''}`);
  const started = performance.now();
  const checks = (await mod.default(report)) ?? [];
  for (const c of checks) {
    if (!c.pass) failed++;
    console.log(`  ${c.pass ? 'PASS' : 'FAIL'}  ${c.label}: ${c.value} (target ${c.target})`);
  }
  console.log(`  (${((performance.now() - started) / 1000).toFixed(1)} s)`);
}
console.log(failed ? `\n${failed} target(s) missed.` : '\nAll targets met.');
process.exitCode = failed ? 1 : 0;
