/**
 * Group commit on a real SQLite file: units that arrive together share one transaction, each in
 * its own savepoint; a unit's failure is its own; nothing resolves before the commit. And the
 * embedded log's offsets when a transaction that appended is rolled back.
 */
import { type Generated, type Kysely, sql } from 'kysely';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Database } from '../../src/adapters/storage/database.js';
import { GroupCommit } from '../../src/adapters/storage/group-commit.js';
import { PreparedQuery } from '../../src/adapters/storage/prepared-query.js';
import { EmbeddedLogEventBus } from '../../src/adapters/event-bus/embedded-log/embedded-log-event-bus.js';
import type { EventTables } from '../../src/adapters/storage/schema.js';
import { createEvent } from '../../src/domain/events.js';
import { sqlite } from '../helpers/backends.js';
import { FAST_BUS } from '../helpers/event-buses.js';
import { useOpenDatabase } from '../helpers/storage.js';

interface Tables {
  items: { id: Generated<number>; name: string };
}

/** The database with just the `items` table. */
async function itemsTable(database: Database): Promise<Kysely<Tables>> {
  const db = database.db as unknown as Kysely<Tables>;
  await sql`CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)`.execute(db);
  return db;
}

describe('GroupCommit on SQLite', () => {
  let db: Kysely<Tables>;
  let begins: number;
  const { database } = useOpenDatabase(sqlite, {
    migrate: false,
    log: (event) => {
      if (/^begin/i.test(event.query.sql)) begins++;
    },
  });
  beforeAll(async () => {
    db = await itemsTable(database);
  });
  beforeEach(async () => {
    await db.deleteFrom('items').execute();
    begins = 0;
  });

  const names = async () => (await db.selectFrom('items').select('name').orderBy('name').execute()).map((r) => r.name);

  it('units queued in the same turn commit in one transaction and each gets its own result', async () => {
    const group = new GroupCommit(db);
    const results = await Promise.all(
      ['a', 'b', 'c', 'd'].map((name) =>
        group.run(async (trx) => {
          await trx.insertInto('items').values({ name }).execute();
          return name.toUpperCase();
        }),
      ),
    );
    expect(results).toEqual(['A', 'B', 'C', 'D']);
    expect(await names()).toEqual(['a', 'b', 'c', 'd']);
    expect(begins).toBe(1);
  });

  it('a failing unit is rolled back alone, even after it wrote, and only its caller sees the error', async () => {
    const group = new GroupCommit(db);
    const outcomes = await Promise.allSettled([
      group.run((trx) => trx.insertInto('items').values({ name: 'kept-1' }).execute()),
      group.run(async (trx) => {
        await trx.insertInto('items').values({ name: 'half-written' }).execute();
        await trx.insertInto('items').values({ name: 'kept-1' }).execute(); // taken: fails
      }),
      group.run((trx) => trx.insertInto('items').values({ name: 'kept-2' }).execute()),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(String((outcomes[1] as PromiseRejectedResult).reason)).toMatch(/UNIQUE/);
    expect(await names()).toEqual(['kept-1', 'kept-2']);
    // The optimistic attempt, rolled back at the failure, then the group again with savepoints.
    expect(begins).toBe(2);
  });

  it('no unit resolves before the shared commit, and a failed commit fails every unit', async () => {
    const group = new GroupCommit(db);
    // A deferred foreign-key style failure at COMMIT: a constraint checked only then.
    await sql`PRAGMA foreign_keys = ON`.execute(db);
    await sql`CREATE TABLE IF NOT EXISTS parents (id INTEGER PRIMARY KEY)`.execute(db);
    await sql`CREATE TABLE IF NOT EXISTS children (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES parents(id) DEFERRABLE INITIALLY DEFERRED)`.execute(
      db,
    );
    const outcomes = await Promise.allSettled([
      group.run((trx) => trx.insertInto('items').values({ name: 'lost-1' }).execute()),
      group.run((trx) => sql`INSERT INTO children (parent) VALUES (42)`.execute(trx)),
      group.run((trx) => trx.insertInto('items').values({ name: 'lost-2' }).execute()),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(String((outcomes[0] as PromiseRejectedResult).reason)).toMatch(/FOREIGN KEY/);
    expect(await names()).toEqual([]);
  });

  it('units queued while a group commits form the next group', async () => {
    const group = new GroupCommit(db);
    const second: Promise<unknown>[] = [];
    const first = ['x1', 'x2'].map((name) =>
      group.run(async (trx) => {
        await trx.insertInto('items').values({ name }).execute();
        // Queued while this group's transaction is open.
        if (name === 'x1')
          for (const later of ['y1', 'y2', 'y3'])
            second.push(group.run((t) => t.insertInto('items').values({ name: later }).execute()));
      }),
    );
    await Promise.all(first);
    await Promise.all(second);
    expect(await names()).toEqual(['x1', 'x2', 'y1', 'y2', 'y3']);
    expect(begins).toBe(2);
  });

  it('a lone unit runs in a plain transaction and a group never exceeds its size', async () => {
    const group = new GroupCommit(db, 3);
    await group.run((trx) => trx.insertInto('items').values({ name: 'alone' }).execute());
    expect(begins).toBe(1);
    await Promise.all(
      Array.from({ length: 7 }, (_, i) =>
        group.run((trx) =>
          trx
            .insertInto('items')
            .values({ name: `n${i}` })
            .execute(),
        ),
      ),
    );
    expect(begins).toBe(1 + 3); // 3 + 3 + 1
    expect((await names()).length).toBe(8);
  });
});

describe('PreparedQuery', () => {
  let db: Kysely<Tables>;
  const { database } = useOpenDatabase(sqlite, { migrate: false });
  beforeAll(async () => {
    db = await itemsTable(database);
  });

  it('runs with each call’s values, constants included, on the database or a transaction', async () => {
    const insert = new PreparedQuery(db, (db, p) =>
      db
        .insertInto('items')
        .values({ id: p('id'), name: p('name') })
        .returning(['id', 'name']),
    );
    const byName = new PreparedQuery(db, (db, p) =>
      db.selectFrom('items').select('id').where('name', '=', p('name')).where('id', '>', 0),
    );
    expect((await insert.run(db, { id: 7, name: 'seven' })).rows).toEqual([{ id: 7, name: 'seven' }]);
    await db.transaction().execute((trx) => insert.run(trx, { id: 8, name: 'eight' }));
    expect((await byName.run(db, { name: 'eight' })).rows).toEqual([{ id: 8 }]);
    expect((await byName.run(db, { name: 'seven' })).rows).toEqual([{ id: 7 }]);
  });

  it('lets plugins see every run, and refuses one that rewrites the query', async () => {
    const seen: string[] = [];
    const observed = db.withPlugin({
      transformQuery: ({ node }) => (seen.push(node.kind), node),
      transformResult: async ({ result }) => result,
    });
    const count = new PreparedQuery(db, (db) => db.selectFrom('items').select((eb) => eb.fn.countAll().as('n')));
    await count.run(observed, {});
    await count.run(observed, {});
    expect(seen).toEqual(['SelectQueryNode', 'SelectQueryNode']);
    const rewriting = db.withPlugin({
      transformQuery: ({ node }) => ({ ...node }),
      transformResult: async ({ result }) => result,
    });
    expect(() => count.run(rewriting, {})).toThrow(/rewrites/);
  });
});

describe('EmbeddedLogEventBus offsets after a rolled-back append', () => {
  const { database } = useOpenDatabase(sqlite);

  it('takes the offsets a rolled-back transaction had taken again: no gap, no repeat', async () => {
    const bus = new EmbeddedLogEventBus(database.db, FAST_BUS);
    const message = (n: number) => {
      const e = createEvent('test.offsets', { n }, { service: 'urlshortener', topic: 'offsets', key: 'one' });
      return {
        topic: 'offsets',
        key: 'one',
        headers: { event_type: 'test.offsets', service: 'urlshortener' },
        envelope: e.envelope,
      };
    };
    const first = await bus.publish('offsets', 'one', message(0).headers, message(0).envelope);
    await expect(
      database.db.transaction().execute(async (trx) => {
        await bus.appendInTransaction(trx, [message(1), message(2)]);
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    const after = (await bus.publishAll([message(3), message(4)])).map((outcome) => outcome.position);
    expect([first, ...after].map((p) => p?.offset)).toEqual([0, 1, 2]);
    const log = await (database.db as unknown as Kysely<EventTables>)
      .selectFrom('event_log')
      .select('log_offset')
      .where('topic', '=', 'offsets')
      .orderBy('log_offset')
      .execute();
    expect(log.map((r) => Number(r.log_offset))).toEqual([0, 1, 2]);
    await bus.close();
  });
});
