/**
 * The serving connection waits for another connection's write lock (the checkpointer thread
 * starting the WAL over, another process of `--workers`) off the event loop: requests are served
 * while a transaction, or a write outside one, waits to begin, and it begins once the lock is let
 * go. Writers queued for the connection behind a lock that is kept are all refused about one busy
 * timeout after they came, not one busy timeout after another; so are the group commit's units,
 * whose group is refused at once when its transaction cannot begin (not tried a second time).
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import SQLite from 'better-sqlite3';
import { type Generated, type Kysely, sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/adapters/storage/database.js';
import { GroupCommit } from '../../src/adapters/storage/group-commit.js';
import { sqlite, type TestDatabase, testConfig, useTestDatabase } from '../helpers/backends.js';

interface Tables {
  rows: { id: Generated<number>; body: string };
}

/** A thread with a connection of its own that takes the write lock, says so, and holds it for `holdMs`. */
const HOLDER = `
const { parentPort, workerData } = require('node:worker_threads');
const SQLite = require(workerData.driver);
const db = new SQLite(workerData.file);
db.exec('BEGIN IMMEDIATE');
db.prepare("INSERT INTO rows (body) VALUES ('held')").run();
parentPort.postMessage('locked');
Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, workerData.holdMs);
db.exec('COMMIT');
db.close();
parentPort.postMessage('released');
`;

/** Starts HOLDER on `path`; resolves once it holds the lock, with a promise of its end. */
async function holdLock(path: string, holdMs: number): Promise<{ readonly exited: Promise<unknown> }> {
  const holder = new Worker(HOLDER, {
    eval: true,
    workerData: { file: path, holdMs, driver: createRequire(import.meta.url).resolve('better-sqlite3') },
  });
  const exited = new Promise((resolve) => holder.once('exit', resolve));
  await new Promise<void>((resolve) => holder.once('message', () => resolve()));
  return { exited };
}

/** The test's database opened as the service opens it: its file, the database, and its tables' view. */
function open(file: TestDatabase) {
  const database = openDatabase(testConfig(file.databaseUrl).database);
  return { path: file.databaseUrl.slice('sqlite:'.length), database, db: database.db as unknown as Kysely<Tables> };
}

/** The event loop's turns while `work` runs: while it waits in SQLite's busy handler there are none. */
async function turnsWhile(work: () => Promise<unknown>): Promise<number> {
  let turns = 0;
  const ticking = setInterval(() => turns++, 5);
  try {
    await work();
  } finally {
    clearInterval(ticking);
  }
  return turns;
}

/** Whether another connection can take the write lock at once: no connection holds a transaction open. */
function lockIsFree(path: string): boolean {
  const other = new SQLite(path, { timeout: 0 });
  try {
    other.exec('BEGIN IMMEDIATE');
    other.exec('ROLLBACK');
    return true;
  } catch (error) {
    if ((error as { code?: string }).code?.startsWith('SQLITE_BUSY')) return false;
    throw error;
  } finally {
    other.close();
  }
}

describe('SQLite write lock held by another connection', () => {
  const file = useTestDatabase(sqlite);

  it('a transaction waits for it on timers, not in the busy handler, and then commits', async () => {
    const { path, database, db } = open(file);
    try {
      await sql`CREATE TABLE rows (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`.execute(db);
      const { exited } = await holdLock(path, 400);
      const turns = await turnsWhile(() =>
        db.transaction().execute(async (trx) => {
          // Begun after the other connection committed and let the lock go.
          expect((await trx.selectFrom('rows').select('body').execute()).map((row) => row.body)).toEqual(['held']);
          await trx.insertInto('rows').values({ body: 'after' }).execute();
        }),
      );
      await exited;
      expect(turns).toBeGreaterThanOrEqual(10);
      const bodies = await db.selectFrom('rows').select('body').orderBy('id').execute();
      expect(bodies.map((row) => row.body)).toEqual(['held', 'after']);
    } finally {
      await database.close();
    }
  });

  it('a write outside a transaction waits for it on timers too, and is committed after it', async () => {
    const { path, database, db } = open(file);
    try {
      const { exited } = await holdLock(path, 400);
      // On its own, as the embedded log's membership heartbeat runs its upsert.
      const turns = await turnsWhile(() => db.insertInto('rows').values({ body: 'alone' }).execute());
      await exited;
      expect(turns).toBeGreaterThanOrEqual(10);
      expect(lockIsFree(path)).toBe(true);
      const bodies = await db.selectFrom('rows').select('body').orderBy('id').execute();
      expect(bodies.map((row) => row.body)).toEqual(['held', 'after', 'held', 'alone']);
      // A failing one leaves no transaction open behind it.
      await expect(
        db
          .insertInto('rows')
          .values({ body: null as unknown as string })
          .execute(),
      ).rejects.toThrow(/NOT NULL/);
      expect(lockIsFree(path)).toBe(true);
      expect((await db.selectFrom('rows').select('body').execute()).length).toBe(4);
      await db.insertInto('rows').values({ body: 'next' }).execute();
    } finally {
      await database.close();
    }
  });

  it('a transaction that says it only reads does not take the lock, and reads what is committed', async () => {
    const { path, database, db } = open(file);
    try {
      const { exited } = await holdLock(path, 400);
      const count = await db
        .transaction()
        .setAccessMode('read only')
        .execute(async (trx) => (await trx.selectFrom('rows').select('body').execute()).length);
      // The earlier tests' five rows: it read at once, before the other connection's insert committed.
      expect(count).toBe(5);
      await exited;
    } finally {
      await database.close();
    }
  });

  it('writers queued behind a lock that is kept are all refused within the busy timeout, not one after another', async () => {
    const { path, database, db } = open(file);
    try {
      // Held past one busy timeout (5 s), short of two: counted per writer from its turn, the
      // first was refused at 5 s, the second would have been at 10 s, and so began after the
      // holder let go at 8 s, as did every writer behind it.
      const { exited } = await holdLock(path, 8_000);
      const writers = Array.from({ length: 6 }, (_, n) =>
        db
          .transaction()
          .execute((trx) =>
            trx
              .insertInto('rows')
              .values({ body: `queued ${n}` })
              .execute(),
          )
          .then(
            () => 'committed',
            (error: { code?: string }) => error.code ?? String(error),
          ),
      );
      const outcomes = await Promise.race([
        Promise.all(writers),
        exited.then(() => Promise.all(writers)).then((all) => ['after the holder let go:', ...all]),
      ]);
      expect(outcomes).toEqual(Array.from({ length: 6 }, () => 'SQLITE_BUSY'));
      await exited;
      const queued = await db.selectFrom('rows').select('body').where('body', 'like', 'queued%').execute();
      expect(queued).toEqual([]);
      // And the next writer, once the lock is free, commits.
      await db.insertInto('rows').values({ body: 'free again' }).execute();
    } finally {
      await database.close();
    }
  }, 30_000);

  it('group commits behind a lock that is kept are refused within the busy timeout of their arrival', async () => {
    const { path, database, db } = open(file);
    try {
      const writes = new GroupCommit(db);
      // Held past one busy timeout (5 s), short of two: a group refused, then tried again with
      // savepoints, began after the holder let go; and so did the group queued behind it.
      const { exited } = await holdLock(path, 8_000);
      const units = (label: string) =>
        Array.from({ length: 10 }, (_, n) =>
          writes
            .run((trx) =>
              trx
                .insertInto('rows')
                .values({ body: `${label} ${n}` })
                .execute(),
            )
            .then(
              () => 'committed',
              (error: { code?: string }) => error.code ?? String(error),
            ),
        );
      const first = units('grouped');
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      const behind = units('behind');
      const outcomes = await Promise.race([
        Promise.all([...first, ...behind]),
        exited.then(() => Promise.all([...first, ...behind])).then((all) => ['after the holder let go:', ...all]),
      ]);
      expect(outcomes).toEqual(Array.from({ length: 20 }, () => 'SQLITE_BUSY'));
      await exited;
      const rows = await db
        .selectFrom('rows')
        .select('body')
        .where((eb) => eb.or([eb('body', 'like', 'grouped%'), eb('body', 'like', 'behind%')]))
        .execute();
      expect(rows).toEqual([]);
      await writes.run((trx) => trx.insertInto('rows').values({ body: 'grouped after' }).execute());
    } finally {
      await database.close();
    }
  }, 30_000);
});
