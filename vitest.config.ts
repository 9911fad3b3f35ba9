import { availableParallelism } from 'node:os';
import { configDefaults, defineConfig } from 'vitest/config';

// Two files at a time, even on a 2-core machine (Vitest's default would be one there): most test
// files spend their time waiting on servers, timers and child processes rather than computing.
// Two took the suite from 835 s to 576 s. Test files that cut a backend hold their proxy's port
// from start to end (test/helpers/tcp-proxy.ts), so two files never meet on one; a test whose
// subject is not a deadline gives Redis a generous one (test/telemetry/otlp-export.test.ts).
const maxWorkers = Math.max(2, availableParallelism() - 1);

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers,
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
