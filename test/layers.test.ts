/**
 * Layers that point one way, checked on the source and the build rather than hoped:
 * no runtime import cycle; `src/store` imports nothing above it; `src/http` and `src/upstream`
 * import no feature; the daemon does not import the CLI; nothing imports a package's private files
 * but the one oidc-provider helper that is pinned and explained; one module alone switches a V8
 * flag at run time.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const FEATURES = ['access-requests', 'activity', 'auth', 'keys', 'mcp', 'models', 'oauth', 'providers', 'proxy', 'ui', 'tui', 'cli'];

function filesUnder(dir: string, ext: RegExp): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...filesUnder(full, ext));
    else if (ext.test(name) && !/\.test\.tsx?$/.test(name)) out.push(full);
  }
  return out;
}

/** Every module specifier a file imports (type-only ones too when `withTypes`). */
function importsOf(file: string, withTypes = true): string[] {
  const src = readFileSync(file, 'utf8');
  const out: string[] = [];
  for (const m of src.matchAll(/^\s*(import|export)(\s+type)?\s[^'"]*?from\s+['"]([^'"]+)['"]|^\s*import\s+['"]([^'"]+)['"]/gm)) {
    if (!withTypes && m[2]) continue;
    out.push(m[3] ?? m[4]);
  }
  return out;
}

const topFolder = (fromFile: string, spec: string) => path.relative(path.join(REPO, 'src'), path.resolve(path.dirname(fromFile), spec)).split(path.sep)[0];

describe('layers', () => {
  it('the build has no runtime import cycle', () => {
    const dist = path.join(REPO, 'dist');
    const graph = new Map<string, string[]>();
    for (const f of filesUnder(dist, /\.js$/)) graph.set(f, importsOf(f).filter((s) => s.startsWith('.')).map((s) => path.resolve(path.dirname(f), s)));
    const cycles: string[] = [];
    const state = new Map<string, number>();
    const stack: string[] = [];
    const visit = (f: string) => {
      state.set(f, 1);
      stack.push(f);
      for (const d of graph.get(f) ?? []) {
        if (state.get(d) === 1) cycles.push(stack.slice(stack.indexOf(d)).map((x) => path.relative(dist, x)).join(' -> '));
        else if (!state.get(d)) visit(d);
      }
      stack.pop();
      state.set(f, 2);
    };
    for (const f of graph.keys()) if (!state.get(f)) visit(f);
    expect(cycles).toEqual([]);
  });

  it('src/store imports nothing of svc above it', () => {
    for (const f of filesUnder(path.join(REPO, 'src', 'store'), /\.ts$/)) {
      const outside = importsOf(f).filter((s) => s.startsWith('.') && topFolder(f, s) !== 'store');
      expect(outside, path.relative(REPO, f)).toEqual([]);
    }
  });

  it('src/http and src/upstream import no feature, and the daemon no part of the CLI', () => {
    for (const dir of ['http', 'upstream']) {
      for (const f of filesUnder(path.join(REPO, 'src', dir), /\.ts$/)) {
        const features = importsOf(f).filter((s) => s.startsWith('.') && FEATURES.includes(topFolder(f, s)));
        expect(features, path.relative(REPO, f)).toEqual([]);
      }
    }
    expect(importsOf(path.join(REPO, 'src', 'daemon.ts')).filter((s) => s.startsWith('./cli/'))).toEqual([]);
  });

  it('outside src/store, everything reaches the data through the repositories', () => {
    // Only the two that open a data dir's store (the daemon, and the offline password reset) may
    // name the store itself; they hand the rest of svc repositories.
    const opensStore = new Set(['src/daemon.ts', 'src/auth/offline.ts']);
    const storeInternals = /\/store\/(store|tables|journal|snapshot|store-repositories)\.js$/;
    const touching: string[] = [];
    for (const f of filesUnder(path.join(REPO, 'src'), /\.tsx?$/)) {
      const rel = path.relative(REPO, f);
      if (rel.startsWith(`src${path.sep}store${path.sep}`)) continue;
      const named = importsOf(f).filter((s) => storeInternals.test(s) && !(opensStore.has(rel) && /\/(store|store-repositories)\.js$/.test(s)));
      if (named.length) touching.push(`${rel}: ${named.join(', ')}`);
    }
    expect(touching).toEqual([]);
  });

  it('only src/store/memory.ts switches a V8 flag at run time (the gc hook)', () => {
    // One place turns the gc hook on, once, and off again; a second would leave it on for good.
    const everyFile = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? everyFile(path.join(dir, e.name)) : /\.tsx?$/.test(e.name) ? [path.join(dir, e.name)] : []));
    const flags = /setFlagsFromString|expose-gc|expose_gc/;
    const touching = everyFile(path.join(REPO, 'src'))
      .filter((f) => !/\.test\.tsx?$/.test(f) && flags.test(readFileSync(f, 'utf8')))
      .map((f) => path.relative(REPO, f).split(path.sep).join('/'));
    expect(touching).toEqual(['src/store/memory.ts']);
  });

  it('no package is reached into past its exports, but the pinned oidc-provider helper', () => {
    const pkg = JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(pkg.dependencies['oidc-provider']).toMatch(/^\d+\.\d+\.\d+$/);
    const deep: string[] = [];
    for (const f of filesUnder(path.join(REPO, 'src'), /\.tsx?$/)) {
      for (const s of importsOf(f)) if (/^oidc-provider\/lib\//.test(s) || /^[^.@][^/]*\/(lib|src|dist\/internal)\//.test(s)) deep.push(`${path.relative(REPO, f)}: ${s}`);
    }
    expect(deep).toEqual(['src/oauth/provider.ts: oidc-provider/lib/helpers/als.js']);
  });
});

describe('shared code lives below its users', () => {
  it('no feature imports another feature\'s routes, and the two proxies import nothing of each other', () => {
    const sideways: string[] = [];
    for (const f of filesUnder(path.join(REPO, 'src'), /\.tsx?$/)) {
      const from = topFolder(f, '.');
      if (path.relative(path.join(REPO, 'src'), f) === 'app.ts') continue;
      for (const spec of importsOf(f).filter((x) => x.startsWith('.'))) {
        const to = topFolder(f, spec);
        const target = path.basename(spec);
        if (to !== from && target === 'routes.js') sideways.push(`${path.relative(REPO, f)} -> ${spec}`);
        if ((from === 'mcp' && to === 'proxy') || (from === 'proxy' && to === 'mcp')) sideways.push(`${path.relative(REPO, f)} -> ${spec}`);
      }
    }
    expect(sideways).toEqual([]);
  });
});

describe('decisions live in the repository', () => {
  it('no source, test or bench file points at a document outside it or at an issue number', () => {
    const outside = /CONTRACT\s*§|SPEC\s*(§|\d)|\bissue\s+\d+/i;
    const offenders: string[] = [];
    const everyFile = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? everyFile(path.join(dir, e.name)) : /\.(ts|tsx|js|mjs)$/.test(e.name) ? [path.join(dir, e.name)] : []));
    for (const dir of ['src', 'test', 'bench', 'scripts']) {
      for (const f of everyFile(path.join(REPO, dir))) {
        readFileSync(f, 'utf8')
          .split('\n')
          .forEach((line, i) => {
            if (outside.test(line)) offenders.push(`${path.relative(REPO, f)}:${i + 1}: ${line.trim()}`);
          });
      }
    }
    expect(offenders).toEqual([]);
    // and what they point at instead is there
    expect(readFileSync(path.join(REPO, 'docs', 'decisions.md'), 'utf8')).toContain('## Errors');
  });
});
