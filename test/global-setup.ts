import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * Collects the suites that skipped themselves for lack of a system package (test/helpers/
 * requirements.ts) and ends the run with one line each: what is missing and how to install it.
 */
export default function setup() {
  // The root config and each project (vitest.config.ts) name this setup: the first one does it.
  if (process.env.SVC_TEST_SKIPS_FILE) return () => undefined;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-test-skips-'));
  const file = path.join(dir, 'skips.jsonl');
  process.env.SVC_TEST_SKIPS_FILE = file;
  return () => {
    let lines: string[] = [];
    try {
      lines = readFileSync(file, 'utf8').split('\n').filter(Boolean);
    } catch {
      /* nothing was skipped */
    }
    const seen = new Set<string>();
    for (const line of lines) {
      const { suite, what, install } = JSON.parse(line) as { suite: string; what: string; install: string };
      const text = `skipped: ${suite} (needs ${what}; install it with \`${install}\`)`;
      if (seen.has(text)) continue;
      seen.add(text);
      console.log(text);
    }
    rmSync(dir, { recursive: true, force: true });
  };
}
