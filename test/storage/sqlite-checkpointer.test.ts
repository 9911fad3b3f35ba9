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
      // frames; below that, only the thread's checkpoints let the WAL be started over, in one of
      // two ways. Its RESTART checkpoint, once the WAL holds RESTART_FRAMES frames, makes the next
      // writer start over a few hundred frames later. Or one of its PASSIVE checkpoints happens to
      // copy every frame before the next commit, and the next writer starts over at once: on a
      // quiet machine that almost never happens under a steady stream (without the RESTART, the
      // WAL was started over only by the fallback, twice in its first 3 × FALLBACK frames here),
      // but on a loaded one, where this writer is descheduled for milliseconds now and then, it
      // can keep the WAL below RESTART_FRAMES for a while (a CI run on Node 24 saw three in a row
      // by 4,028 frames). Either way the thread has done it, and the WAL is started over by
      // twice RESTART_FRAMES: half of what the fallback lets it reach. (A disk slow to sync can
      // hold the thread back long enough for the WAL to pass that now and then: such a start over
      // is not counted, the loop goes on.)
      const bound = 2 * RESTART_FRAMES;
      expect(bound).toBeLessThanOrEqual(FALLBACK_AUTOCHECKPOINT_PAGES / 2);
      let written = 0;
      let before = walFrames();
      let byTheThread = 0;
      const late: number[] = [];
      while (byTheThread < 3 && written < 10 * FALLBACK_AUTOCHECKPOINT_PAGES) {
        await db.transaction().execute(async (trx) => {
          await trx
            .insertInto('blobs')
            .values(Array.from({ length: 16 }, () => ({ body })))
            .execute();
        });
        const frames = walFrames();
        if (frames < before) {
          if (before <= bound) byTheThread++;
          else late.push(before);
        }
        written += frames >= before ? frames - before : frames;
        before = frames;
        await new Promise(setImmediate);
      }
      expect(byTheThread, `started over only past ${bound} frames, at ${late.join(', ') || 'none'}`).toBe(3);
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
