import { appendFileSync } from 'node:fs';

/** The one command that installs every system package the suite drives (README, .ci/run). */
export const INSTALL_TEST_DEPS = 'bash scripts/install-test-deps.sh';

/**
 * Records that a suite is skipped for lack of something on this machine, so the run ends with a
 * line saying what and how to install it (test/global-setup.ts prints them), never in silence.
 * Answers `present`, for `describe.skipIf(!needs(...))`.
 */
export function needs(present: boolean, suite: string, what: string, install = INSTALL_TEST_DEPS): boolean {
  const file = process.env.SVC_TEST_SKIPS_FILE;
  if (!present && file) appendFileSync(file, `${JSON.stringify({ suite, what, install })}\n`);
  return present;
}
