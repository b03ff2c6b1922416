/**
 * No function in src/ spans more than 150 lines, from its first line to its closing brace (the
 * closures inside it count). A longer one is split into named steps, one file per verb or
 * endpoint where that fits; docs/design.md says how.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MAX_LINES = 150;

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out.push(...sourceFiles(full));
    else if (/\.tsx?$/.test(name) && !/\.test\.tsx?$/.test(name) && !name.endsWith('.d.ts')) out.push(full);
  }
  return out;
}

/** Every function of a file longer than `max` lines: where it starts, its name and its length. */
function longFunctions(file: string, max: number, text = readFileSync(file, 'utf8')): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, file.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS);
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.end).line;
      const lines = last - first + 1;
      if (lines > max) found.push(`${path.relative(REPO, file)}:${first + 1} ${functionName(node)} (${lines} lines)`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function functionName(node: ts.SignatureDeclaration): string {
  if (node.name && ts.isIdentifier(node.name)) return node.name.text;
  const parent = node.parent;
  if (parent && (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) && ts.isIdentifier(parent.name)) return parent.name.text;
  return '(anonymous)';
}

describe('function length', () => {
  it(`no function in src/ spans more than ${MAX_LINES} lines`, () => {
    const files = sourceFiles(path.join(REPO, 'src'));
    expect(files.length).toBeGreaterThan(50);
    expect(files.flatMap((f) => longFunctions(f, MAX_LINES))).toEqual([]);
  });

  it('measures from the first line to the closing brace, closures included, and names each', () => {
    const body = (lines: number) => Array.from({ length: lines - 2 }, (_, i) => `  const v${i} = ${i};`).join('\n');
    const file = path.join(REPO, 'src', 'probe.ts');
    const text = [`export function atLimit() {\n${body(MAX_LINES)}\n}`, `const overLimit = () => {\n${body(MAX_LINES + 1)}\n};`].join('\n');
    expect(longFunctions(file, MAX_LINES, text)).toEqual([`src/probe.ts:${MAX_LINES + 1} overLimit (${MAX_LINES + 1} lines)`]);
    const outer = `function outer() {\n  return function inner() {\n${body(MAX_LINES)}\n  };\n}`;
    expect(longFunctions(file, MAX_LINES, outer)).toEqual([`src/probe.ts:1 outer (${MAX_LINES + 2} lines)`]);
  });
});
