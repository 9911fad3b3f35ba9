/**
 * WAL checkpoints of a SQLite file from a thread of its own: committed pages reach the database
 * file without the serving connection checkpointing (its auto-checkpoint is far above what is
 * written here), and everything committed is there after close.
 */
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { type Generated, type Kysely, sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../src/adapters/storage/database.js';
import { FALLBACK_AUTOCHECKPOINT_PAGES, RESTART_FRAMES } from '../../src/adapters/storage/sqlite-checkpointer.js';
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

  /** The frames in the WAL now, as its index (the `-shm` file) says: `mxFrame` of its header, 0 after a restart. */
  function walFrames(): number {
    const fd = openSync(`${file.databaseUrl.slice('sqlite:'.length)}-shm`, 'r');
    try {
      const header = Buffer.alloc(20);
      readSync(fd, header, 0, 20, 0);
      return header.readUInt32LE(16);
    } finally {
      closeSync(fd);
    }
  }

  it('under a steady stream of commits, starts the WAL over itself, long before the serving connection would', async () => {
    const database = openDatabase(testConfig(file.databaseUrl).database, { checkpointIntervalMs: 10 });
    try {
      const db = database.db as unknown as Kysely<Tables>;
      await sql`CREATE TABLE IF NOT EXISTS blobs (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`.execute(db);
      const body = 'y'.repeat(4000); // a page a row
      // Transactions of 16 pages one after another, as a busy service commits. The serving
      // connection starts the WAL over itself only once it holds FALLBACK_AUTOCHECKPOINT_PAGES
      // frames; a start over below that is the thread's. (A disk slow to sync can hold the thread
      // back long enough for the fallback to come due now and then: that is what it is for.)
      let written = 0;
      let before = walFrames();
      let most = 0;
      let byTheThread = 0;
      while (byTheThread < 3 && written < 10 * FALLBACK_AUTOCHECKPOINT_PAGES) {
        await db.transaction().execute(async (trx) => {
          await trx
            .insertInto('blobs')
            .values(Array.from({ length: 16 }, () => ({ body })))
            .execute();
        });
        const frames = walFrames();
        if (frames < before && before < FALLBACK_AUTOCHECKPOINT_PAGES) {
          byTheThread++;
          most = Math.max(most, before);
        }
        written += frames >= before ? frames - before : frames;
        before = frames;
        await new Promise(setImmediate);
      }
      // Before the thread did so, the WAL was started over only by the fallback (twice in the
      // first 3 × FALLBACK_AUTOCHECKPOINT_PAGES frames here).
      expect(byTheThread).toBe(3);
      expect(most).toBeGreaterThanOrEqual(RESTART_FRAMES);
    } finally {
      await database.close();
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
