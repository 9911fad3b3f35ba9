import { availableParallelism } from 'node:os';
import { configDefaults, defineConfig } from 'vitest/config';

// Two files at a time, even on a 2-core machine (Vitest's default would be one there): most test
// files spend their time waiting on servers, timers and child processes rather than computing.
// Two took the suite from 835 s to 576 s. Test files that cut a backend hold their proxy's port
// from start to end (test/helpers/tcp-proxy.ts), so two files never meet on one; a test whose
// subject is not a deadline gives Redis a generous one (test/telemetry/otlp-export.test.ts).
const maxWorkers = Math.max(2, availableParallelism() - 1);

/** The test files that run with modules of their own (the project `main-isolated`; see below). */
const OWN_MODULES = [
  'test/telemetry/**/*.test.ts',
  'test/events/**/*.test.ts',
  'test/notifications/**/*.test.ts',
  'test/contract/message-tracing.contract.test.ts',
];

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers,
    reporters: ['default', './test/summary-reporter.ts'],
    // TEST_CPU_LOG=FILE: each test file's wall time and CPU (its own and its child processes'),
    // a JSON line each; `node scripts/test-cpu-summary.mjs FILE` sums them (see the README).
    setupFiles: process.env.TEST_CPU_LOG ? ['./test/cpu-per-file.ts'] : [],
    projects: [
      // Most files share their worker's modules with the files it ran before (isolate: false):
      // isolated, each file imported the service's modules and drivers afresh, about a second of
      // CPU per file. Both projects alone, CI=true, on a 2-core machine: 609 s of wall time and
      // 845 s of CPU with every file isolated, 536 s and 711 s so. Each test file keeps to a
      // database, schema, stream prefix, port and files of its own already, whichever process
      // runs it. A file that fails in a full run but passes alone may be meeting what an earlier
      // file left behind: move it (or that file) to OWN_MODULES.
      {
        extends: true,
        test: {
          name: 'main',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, 'test/faults/**', ...OWN_MODULES],
          isolate: false,
        },
      },
      // These get modules of their own: they install and read process-wide tracing state (the
      // OpenTelemetry API's global provider and propagator) or mock a node module, which a file
      // run before them in the same worker would have set otherwise (seen with isolate: false:
      // trace headers left by an earlier file's tracer, a mock of node:dns that never applied).
      { extends: true, test: { name: 'main-isolated', include: [...OWN_MODULES] } },
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
