import SQLite from 'better-sqlite3';
import { afterAll, beforeAll } from 'vitest';
import { type Database, openDatabase, type OpenDatabaseOptions } from '../../src/adapters/storage/database.js';
import { migrateToLatest } from '../../src/adapters/storage/migrations.js';
import { type Backend, type TestDatabase, testConfig, useTestDatabase } from './backends.js';
import { lazy } from './lazy.js';

export interface OpenDatabaseSuiteOptions extends OpenDatabaseOptions {
  /** Besides the backend's own availability: whatever else the suite needs is there. */
  readonly when?: boolean;
  /** Migrate it to the latest schema once opened (the default), or leave it empty. */
  readonly migrate?: boolean;
}

/**
 * A fresh database of `backend` for the suite this is called in, opened (and migrated) in a
 * `beforeAll` when available, closed and dropped in its `afterAll`: `database` for the code under
 * test, `testDatabase` for its URL.
 */
export function useOpenDatabase(
  backend: Backend,
  { when = true, migrate = true, ...options }: OpenDatabaseSuiteOptions = {},
): { readonly database: Database; readonly testDatabase: TestDatabase } {
  const testDatabase = useTestDatabase(backend, when);
  let database: Database | undefined;
  beforeAll(async () => {
    if (!backend.available || !when) return;
    database = openDatabase(testConfig(testDatabase.databaseUrl).database, options);
    if (migrate) await migrateToLatest(database.db, database.dialect);
  });
  afterAll(async () => {
    await database?.close();
  });
  return {
    testDatabase,
    database: lazy(() => {
      if (!database) throw new Error(`the ${backend.name} database is not open (not available, or not opened yet)`);
      return database;
    }),
  };
}

/**
 * Another instance's database for a suite of `useOpenDatabase`, opened in its `beforeAll` after the
 * suite's own: on PostgreSQL a second pool to the same database; on SQLite the same connection (a
 * second one in this process would wait for the first's lock in a busy handler that blocks the
 * event loop the first needs to finish; instances are processes, as in
 * test/server/visits-two-processes.test.ts), so that its calls interleave with the first's.
 */
export function useOtherInstance(
  backend: Backend,
  { database, testDatabase }: { readonly database: Database; readonly testDatabase: TestDatabase },
): Database {
  let second: Database | undefined;
  let other: Database | undefined;
  beforeAll(() => {
    if (!backend.available) return;
    if (database.dialect === 'postgres') second = openDatabase(testConfig(testDatabase.databaseUrl).database);
    other = second ?? database;
  });
  afterAll(async () => {
    await second?.close();
  });
  return lazy(() => {
    if (!other) throw new Error(`no other ${backend.name} instance (not available, or not opened yet)`);
    return other;
  });
}

/**
 * Another process's hold of a SQLite database's write lock (a backup, an import, a third
 * instance): `BEGIN IMMEDIATE` on a connection of the test's own, kept until `release`. Writers
 * wait for it up to their busy timeout and are then refused.
 */
export function holdWriteLock(databaseUrl: string): { release(): void } {
  const holder = new SQLite(new URL(databaseUrl.replace(/^sqlite:/, 'file://')).pathname);
  holder.exec('BEGIN IMMEDIATE');
  return {
    release() {
      holder.exec('ROLLBACK');
      holder.close();
    },
  };
}
