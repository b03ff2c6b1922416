import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    globalSetup: ['test/global-setup.ts'],
    include: ['test/**/*.test.ts', 'test/**/*.test.tsx', 'src/**/*.test.ts', 'src/**/*.test.tsx'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    maxWorkers: 2,
    reporters: ['default'],
    // Files and the tests in them run in a new order each time (the seed is printed, and
    // --sequence.seed=N repeats it): no test may lean on another having run first.
    sequence: { shuffle: true },
  },
});
