import { configDefaults, defineConfig } from 'vitest/config';

// Vitest's default: one worker fewer than the cores, so one file at a time on a 2-core machine.
// Two at a time took the suite from 835 s to 576 s on a quiet machine, but on a slower, busier one
// timing tests then failed now and then (a fresh process's first request admitted without a
// rate-limit decision when Redis answered late; an outage test reading the visit buffer mid-flush,
// since fixed): not worth a red CI.

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    reporters: ['default', './test/summary-reporter.ts'],
    projects: [
      {
        extends: true,
        test: { name: 'main', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, 'test/faults/**'] },
      },
      // The fault suite (test/faults) loads the machine and stops and starts servers of its own:
      // it runs after everything else, one file at a time, so no other test shares the machine with it.
      {
        extends: true,
        test: {
          name: 'faults',
          include: ['test/faults/**/*.test.ts'],
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
