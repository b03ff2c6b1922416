import { defineConfig } from 'vitest/config';
import { ShuffledLongFirst } from './test/sequencer.js';

export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Three on two cores: much of the suite waits on other processes (a daemon's signals, a
    // database stopped or frozen, Chromium), and with two workers a core sat idle about a fifth
    // of the run; a third fills it (155 s to about 135 s, docs/testing.md).
    maxWorkers: 3,
    reporters: ['default'],
    // Files and the tests in them run in a new order each time (the seed is printed, and
    // --sequence.seed=N repeats it): no test may lean on another having run first. The files
    // that took long last time start first (test/sequencer.ts), so none is left to run alone at the end.
    sequence: { shuffle: true, sequencer: ShuffledLongFirst },
    projects: [
      {
        // The system tests share a worker's loaded modules from one file to the next (about
        // 0.5 s of imports a file saved): each file starts and stops what it runs, and puts back
        // what it changes of the process (held-calls-lifecycle's PATH).
        extends: true,
        test: { name: 'system', include: ['test/**/*.test.ts', 'test/**/*.test.tsx'], isolate: false, setupFiles: ['test/setup-system.ts'] },
      },
      {
        // The unit tests keep a process each: the TUI's force colour support before chalk loads.
        extends: true,
        test: { name: 'unit', include: ['src/**/*.test.ts', 'src/**/*.test.tsx'] },
      },
    ],
  },
});
