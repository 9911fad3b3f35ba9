/**
 * Node releases that abort the whole process (`Assertion failed: (env) != nullptr`, in
 * `node::RemoveEnvironmentCleanupHook` under `Statement::~Statement`) when the garbage collector
 * frees one of better-sqlite3's statements: nodejs/node#65446, in 24.19.0 to 24.21.0. The
 * service prepares statements whose text varies (a batch's size, a listing's filters), so on
 * such a release an embedded database is an abort waiting for a collection: in the CI's Node 24
 * suites on 24.21.0, 29 test processes aborted so; on 24.18.1, 24.22.1 and 24.22.3 none (24.22.0,
 * the first of the fixed line, is not in the npm registry and was not run).
 */
export function abortsOnStatementRelease(version: string): boolean {
  const [major, minor] = version.replace(/^v/, '').split('.').map(Number);
  return major === 24 && minor! >= 19 && minor! <= 21;
}

/** An embedded database refused on a Node release that would abort under it (see above). */
export class UnsupportedRuntimeError extends Error {
  constructor(version: string) {
    super(
      `Node ${version} aborts the process when it frees a SQLite statement (nodejs/node#65446, Node 24.19.0 to 24.21.0); ` +
        'run Node 24.22 or later (or 24.18, 22 or 20), or use PostgreSQL (DATABASE_URL=postgres://…)',
    );
    this.name = 'UnsupportedRuntimeError';
  }
}

/** Throws `UnsupportedRuntimeError` on a Node release that aborts when it frees a statement. */
export function assertSqliteRuntime(version = process.version): void {
  if (abortsOnStatementRelease(version)) throw new UnsupportedRuntimeError(version);
}
