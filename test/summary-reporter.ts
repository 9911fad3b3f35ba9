import type { Reporter, TestModule } from 'vitest/node';

/**
 * Ends the run with the plain closing line CI reads: `tests: N passed, N failed, N skipped`, and
 * `, N failed suites` when a file or a suite failed outside its tests (a `beforeAll` that threw
 * leaves its tests skipped, not failed: the line said "0 failed" of a red run).
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const counts = { passed: 0, failed: 0, skipped: 0 };
    let failedSuites = 0;
    for (const module of testModules) {
      if (module.errors().length > 0) failedSuites++;
      for (const suite of module.children.allSuites()) if (suite.errors().length > 0) failedSuites++;
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') counts.passed++;
        else if (state === 'failed') counts.failed++;
        else counts.skipped++;
      }
    }
    const suites = failedSuites > 0 ? `, ${failedSuites} failed suites` : '';
    process.stdout.write(
      `tests: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped${suites}\n`,
    );
  }
}
