/**
 * WAL checkpoints of a SQLite file from a thread of its own: committed pages reach the database
 * file without the serving connection checkpointing (its auto-checkpoint is far above what is
 * written here), and everything committed is there after close.
 */
import { statSync } from 'node:fs';
import { type Generated, type Kysely, sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../src/adapters/storage/database.js';
import { sqlite, testConfig, useTestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';

interface Tables {
  blobs: { id: Generated<number>; body: string };
}

describe('SQLite checkpoints in the background', () => {
  const file = useTestDatabase(sqlite);

  const size = (suffix = '') => statSync(`${file.databaseUrl.slice('sqlite:'.length)}${suffix}`).size;
  const autoCheckpointOf = async (database: Database) =>
    (await sql<{ wal_autocheckpoint: number }>`PRAGMA wal_autocheckpoint`.execute(database.db)).rows[0]!
      .wal_autocheckpoint;

  it('copies committed pages into the database file, off the serving connection', async () => {
    let database: Database | undefined = openDatabase(testConfig(file.databaseUrl).database, {
      checkpointIntervalMs: 20,
    });
    try {
      const db = database.db as unknown as Kysely<Tables>;
      const autocheckpoint = await autoCheckpointOf(database);
      await sql`CREATE TABLE blobs (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`.execute(db);
      const before = size();
      // About 2 MiB: 500 pages, far below the serving connection's auto-checkpoint.
      const body = 'x'.repeat(4000);
      await db.transaction().execute(async (trx) => {
        for (let i = 0; i < 500; i++) await trx.insertInto('blobs').values({ body }).execute();
      });
      expect(autocheckpoint).toBeGreaterThan(500 * 2);
      expect(size('-wal')).toBeGreaterThan(2_000_000);
      await eventually(() => expect(size()).toBeGreaterThan(before + 2_000_000));
      await database.close();
      database = undefined;
      const reopened = openDatabase(testConfig(file.databaseUrl).database);
      const count = await (reopened.db as unknown as Kysely<Tables>)
        .selectFrom('blobs')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow();
      await reopened.close();
      expect(Number(count.n)).toBe(500);
    } finally {
      await database?.close();
    }
  });

  it('without it, the serving connection keeps SQLite’s own auto-checkpoint', async () => {
    const database = openDatabase(testConfig(file.databaseUrl).database);
    try {
      expect(await autoCheckpointOf(database)).toBe(1000);
    } finally {
      await database.close();
    }
  });
});
