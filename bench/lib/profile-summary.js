#!/usr/bin/env node
// Summarises the profiles a daemon wrote under BENCH_PROFILE=<dir> (`--cpu-prof`, `--heap-prof`):
// CPU self time and sampled heap allocation by where the code lives (svc, a dependency, Node
// itself), then the top functions. `node bench/lib/profile-summary.js <dir>`
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const dir = process.argv[2];
if (!dir) {
  console.error('usage: profile-summary.js <dir>');
  process.exit(2);
}

/** svc, node_modules/<package>, node:internal or (program/GC/idle) */
function owner(url, name) {
  if (!url) return `(${name || 'native'})`;
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1];
  if (url.startsWith('node:')) return 'node (built-in modules)';
  if (/\/dist\//.test(url)) return `svc ${url.replace(/^.*\/dist\//, '')}`.replace(/^svc ([^/]+)\/.*$/, 'svc $1/');
  return url;
}

const top = (map, n) => [...map].sort((a, b) => b[1] - a[1]).slice(0, n);
const pct = (v, total) => `${((100 * v) / total).toFixed(1)}%`.padStart(6);

for (const file of readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))) {
  const prof = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
  const self = new Map(prof.nodes.map((n) => [n.id, 0]));
  for (let i = 0; i < prof.samples.length; i++) self.set(prof.samples[i], (self.get(prof.samples[i]) ?? 0) + (prof.timeDeltas[i] ?? 0));
  const byOwner = new Map();
  const byFn = new Map();
  let total = 0;
  for (const n of prof.nodes) {
    const t = self.get(n.id) ?? 0;
    if (n.callFrame.functionName === '(idle)') continue;
    total += t;
    const o = owner(n.callFrame.url, n.callFrame.functionName);
    byOwner.set(o, (byOwner.get(o) ?? 0) + t);
    const fn = `${n.callFrame.functionName || '(anonymous)'} ${o}:${n.callFrame.lineNumber + 1}`;
    byFn.set(fn, (byFn.get(fn) ?? 0) + t);
  }
  console.log(`\nCPU ${file}: ${(total / 1000).toFixed(0)} ms busy (idle left out)`);
  for (const [o, t] of top(byOwner, 14)) console.log(`  ${pct(t, total)}  ${o}`);
  console.log('  top functions (self time):');
  for (const [f, t] of top(byFn, 15)) console.log(`  ${pct(t, total)}  ${f}`);
}

for (const file of readdirSync(dir).filter((f) => f.endsWith('.heapprofile'))) {
  const prof = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
  const byOwner = new Map();
  let total = 0;
  const walk = (node) => {
    const size = (node.selfSize ?? 0);
    total += size;
    const o = owner(node.callFrame.url, node.callFrame.functionName);
    byOwner.set(o, (byOwner.get(o) ?? 0) + size);
    for (const c of node.children ?? []) walk(c);
  };
  walk(prof.head);
  console.log(`\nHeap ${file}: ${(total / 2 ** 20).toFixed(1)} MiB live at exit (sampled), by allocating code`);
  for (const [o, t] of top(byOwner, 14)) console.log(`  ${pct(t, total)}  ${o}`);
}
