/**
 * Records, for each dialect, what the migrations do to an empty database: the statements of each
 * migration and the schema they leave. `node --import tsx test/storage/record-migrations.ts NAME`
 * writes test/storage/fixtures/NAME-<dialect>.json.
 *
 * The fixtures in that folder were recorded from the code of their time (0052: main before the
 * migrations moved into one folder; 0075: the visit segments, recorded late, at 0075 itself; 0076:
 * the segments listed by link; 0062: SQLite's created_at order, landed after 0076; 0053: the
 * lockouts' versions, landed after 0078);
 * migrations.test.ts checks today's code against them (add the name to its FIXTURE_VERSIONS).
 * Record a new one when a migration is added; never re-record an old one to make that test pass.
 */
import { writeFileSync } from 'node:fs';
import { openDatabase } from '../../src/adapters/storage/database.js';
import { migrateToLatest } from '../../src/adapters/storage/migrations.js';
import { BACKENDS, testConfig } from '../helpers/backends.js';
import { describeSchema, type MigratedDatabaseFixture, MigrationRecorder } from './migrated-database.js';

const name = process.argv[2];
if (!name) throw new Error('usage: record-migrations.ts NAME');

for (const backend of BACKENDS) {
  if (!backend.available) throw new Error(`${backend.name} is needed to record its fixture`);
  const testDb = await backend.create();
  const recorder = new MigrationRecorder();
  const database = openDatabase(testConfig(testDb.databaseUrl).database, { log: recorder.log });
  try {
    await migrateToLatest(database.db, database.dialect);
    const fixture: MigratedDatabaseFixture = {
      dialect: database.dialect,
      migrations: recorder.migrations,
      schema: await describeSchema(database.db, database.dialect),
    };
    const file = new URL(`fixtures/${name}-${backend.name}.json`, import.meta.url);
    writeFileSync(file, JSON.stringify(fixture, null, 2) + '\n');
    console.log(`${file.pathname}: ${fixture.migrations.length} migrations`);
  } finally {
    await database.close();
    await testDb.drop();
  }
}
