import type { SerializedError } from 'vitest';
import type { Reporter, TestModule } from 'vitest/node';

/**
 * Ends the run with the plain closing line CI reads: `tests: N passed, N failed, N skipped`, and
 * `, N failed suites` when a file or a suite failed outside its tests (a `beforeAll` that threw
 * leaves its tests skipped, not failed: the line said "0 failed" of a red run), and `, N unhandled
 * errors` when vitest caught errors outside any test (they fail the run with every test passed).
 *
 * Before it, one `failed: ` line per failed test, suite or file and per unhandled error, with the
 * first line of its error and, when it has more, its last (a server's output ends with why it
 * stopped): CI's record of a run keeps only its last part, and a long run's own failure report
 * sits far above it (`.ci/run` prints these lines again after everything else).
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<SerializedError> = []): void {
    const counts = { passed: 0, failed: 0, skipped: 0 };
    const failures: string[] = [];
    let failedSuites = 0;
    /** A file or suite that failed outside its tests. */
    const suiteFailed = (where: string, errors: ReadonlyArray<SerializedError>) => {
      if (errors.length === 0) return;
      failedSuites++;
      failures.push(`${where}: ${summaryOf(errors[0])}`);
    };
    for (const module of testModules) {
      const file = module.relativeModuleId;
      suiteFailed(file, module.errors());
      for (const suite of module.children.allSuites()) suiteFailed(`${file} > ${suite.fullName}`, suite.errors());
      for (const test of module.children.allTests()) {
        const result = test.result();
        if (result.state === 'passed') counts.passed++;
        else if (result.state === 'failed') {
          counts.failed++;
          failures.push(`${file} > ${test.fullName}: ${summaryOf(result.errors?.[0])}`);
        } else counts.skipped++;
      }
    }
    for (const error of unhandledErrors) failures.push(`unhandled error: ${summaryOf(error)}`);
    const suites = failedSuites > 0 ? `, ${failedSuites} failed suites` : '';
    const unhandled = unhandledErrors.length > 0 ? `, ${unhandledErrors.length} unhandled errors` : '';
    process.stdout.write(
      failures.map((line) => `failed: ${line}\n`).join('') +
        `tests: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped${suites}${unhandled}\n`,
    );
  }
}

function summaryOf(error: SerializedError | undefined): string {
  if (error === undefined) return '(no error recorded)';
  const lines = `${error.name ?? 'Error'}: ${error.message ?? ''}`.split('\n').filter((line) => line.trim() !== '');
  const first = cut(lines[0] ?? '');
  return lines.length > 1 ? `${first} … ${cut(lines.at(-1)!.trim())}` : first;
}

function cut(text: string): string {
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}
