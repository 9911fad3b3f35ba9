import { sql } from 'kysely';
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { KyselyVisitJournal } from '../../src/adapters/storage/kysely-visit-journal.js';
import { mergeJournal } from '../../src/composition/visits.js';
import { decodeJournal, encodeJournal, JournalMerge } from '../../src/domain/visit-journal.js';
import type { JournalEntry } from '../../src/ports/visit-journal.js';
import { UserAgentClassifier } from '../../src/support/user-agents.js';
import { CaptureJournal, VisitCapture } from '../../src/support/visit-capture.js';
import { BACKENDS } from '../helpers/backends.js';
import { useOpenDatabase, useOtherInstance } from '../helpers/storage.js';
import { firstFormatJournal, USER_AGENTS, mergeAllJournal } from '../helpers/visits.js';

const classifier = new UserAgentClassifier();

/** A flush's journal row: `count` visits over links `firstLink`…, from `start`, as the buffer makes it. */
function entry(count: number, links: number, start: number, firstLink = 1): JournalEntry {
  const capture = new VisitCapture();
  for (let n = 0; n < count; n++) {
    const agent = USER_AGENTS[n % USER_AGENTS.length];
    capture.add(firstLink + ((n * 7919) % links), start + n, agent, 'https://r.example/a', 'DE', `10.0.0.${n % 50}`);
  }
  const prepared = new CaptureJournal(capture, new Map(capture.days().map((day) => [day, `salt-${day}`])), classifier);
  while (!prepared.done) prepared.take(10_000);
  return { id: randomUUID(), visits: count, data: encodeJournal(prepared.visits()) };
}

/** The journal's storage on both backends: rows written once, read in order, and merged once under concurrency. */
describe.each(BACKENDS)('VisitJournal on $name', (backend) => {
  const suite = useOpenDatabase(backend);
  const { database } = suite;
  const otherDatabase = useOtherInstance(backend, suite);
  // PostgreSQL: a schema of its own in the same database (SQLite: not opened).
  const elsewhereDatabase = useOpenDatabase(backend, { when: backend.name === 'postgres' }).database;
  let journal: KyselyVisitJournal;
  let other: KyselyVisitJournal;
  let elsewhere: KyselyVisitJournal;
  const test = it.skipIf(!backend.available);

  beforeAll(() => {
    if (!backend.available) return;
    journal = new KyselyVisitJournal(database.db, database.dialect);
    other = new KyselyVisitJournal(otherDatabase.db, otherDatabase.dialect);
    if (backend.name === 'postgres')
      elsewhere = new KyselyVisitJournal(elsewhereDatabase.db, elsewhereDatabase.dialect);
  });

  const emptied = async () => {
    // Until none is left: a run stops where another instance is merging (PostgreSQL's merge lock
    // is the database's, shared with other tests' services on other schemas).
    await mergeAllJournal(database.db);
    await database.db.deleteFrom('visit_segments').execute();
    await database.db.deleteFrom('visit_unfolded').execute();
  };
  const segments = () =>
    database.db
      .selectFrom('visit_segments')
      .select(['url_id', 'day', 'first_ms', 'last_ms', 'visits', 'data'])
      .orderBy('url_id')
      .orderBy('first_ms')
      .execute();
  /** The segments, their numbers as numbers (PostgreSQL's bigints come as strings). */
  const storedSegments = async () =>
    (await segments()).map((s) => ({
      ...s,
      url_id: Number(s.url_id),
      day: Number(s.day),
      first_ms: Number(s.first_ms),
      last_ms: Number(s.last_ms),
      visits: Number(s.visits),
    }));

  test('writes a row once, however often its write is retried', async () => {
    await emptied();
    const row = entry(30, 3, Date.UTC(2026, 10, 28, 12));
    expect(await journal.write(row)).toBe(true);
    expect(await other.write(row)).toBe(false);
    const pending = await journal.pending(1_000);
    expect(pending.map((r) => [r.visits, r.mergedThrough, r.data])).toEqual([[30, 0, row.data]]);
  });

  test('its backlog: the visits of the rows waiting and the oldest one’s age; none once merged', async () => {
    await emptied();
    let now = Date.UTC(2026, 10, 28, 12);
    const clocked = new KyselyVisitJournal(database.db, database.dialect, () => now);
    expect(await clocked.backlog()).toEqual({ visits: 0, oldestAgeSeconds: 0 });
    await clocked.write(entry(30, 3, now));
    now += 2_500;
    await clocked.write(entry(20, 2, now));
    now += 1_000;
    expect(await clocked.backlog()).toEqual({ visits: 50, oldestAgeSeconds: 3.5 });
    await mergeAllJournal(database.db); // until merged: a run stops where another instance is merging
    expect(await clocked.backlog()).toEqual({ visits: 0, oldestAgeSeconds: 0 });
  });

  test('hands the oldest rows out first, as many as hold the visits asked for, at least one', async () => {
    await emptied();
    const rows = [entry(100, 5, 1_000), entry(100, 5, 2_000), entry(100, 5, 3_000)];
    for (const row of rows) await journal.write(row);
    const dataOf = async (visits: number) => (await journal.pending(visits)).map((r) => r.data);
    expect(await dataOf(10)).toEqual([rows[0]!.data]);
    expect(await dataOf(250)).toEqual([rows[0]!.data, rows[1]!.data]);
    expect(await dataOf(300)).toEqual(rows.map((r) => r.data));
  });

  test('a merge step goes on only from where its rows were read, or writes nothing', async () => {
    await emptied();
    await journal.write(entry(40, 4, Date.UTC(2026, 10, 28, 12)));
    const [read] = await journal.pending(1_000);
    const merge = new JournalMerge([{ visits: decodeJournal(read!.data), mergedThrough: 0 }], {
      rows: 2,
      visits: 1_000,
    });
    const first = merge.take()!;
    const rows = [{ id: read!.id, mergedThrough: 0 }];
    expect(await journal.merge({ rows, through: first.through, segments: first.rows })).toBeDefined();
    // Another instance that read the row before that step: its step finds it moved on.
    expect(await other.merge({ rows, through: first.through, segments: first.rows })).toBeUndefined();
    expect(await other.merge({ rows, through: undefined, segments: merge.take()!.rows })).toBeUndefined();
    expect((await segments()).map((s) => Number(s.url_id))).toEqual([1, 2]);
    expect((await journal.pending(1_000)).map((r) => r.mergedThrough)).toEqual([2]);
    // From where it is now, the rest; the last step deletes the row.
    const rest = new JournalMerge([{ visits: decodeJournal(read!.data), mergedThrough: 2 }], {
      rows: 10,
      visits: 1_000,
    });
    const last = rest.take()!;
    expect(
      await journal.merge({ rows: [{ id: read!.id, mergedThrough: 2 }], through: undefined, segments: last.rows }),
    ).toBeDefined();
    expect((await segments()).map((s) => [Number(s.url_id), Number(s.visits)])).toEqual([
      [1, 10],
      [2, 10],
      [3, 10],
      [4, 10],
    ]);
    expect(await journal.pending(1_000)).toEqual([]);
    // Its text went with it (a table of its own: the steps before moved the mark, never the text).
    expect(await database.db.selectFrom('visit_journal_data').select('id').execute()).toEqual([]);
  });

  test("a merge step rewrites the row's mark, not its text", async () => {
    await emptied();
    await journal.write(entry(40, 4, Date.UTC(2026, 10, 28, 12)));
    const [read] = await journal.pending(1_000);
    const first = new JournalMerge([{ visits: decodeJournal(read!.data), mergedThrough: 0 }], {
      rows: 2,
      visits: 1_000,
    }).take()!;
    const columns = async () =>
      Object.keys((await database.db.selectFrom('visit_journal').selectAll().executeTakeFirstOrThrow()) as object);
    expect(await columns()).not.toContain('data');
    await journal.merge({ rows: [{ id: read!.id, mergedThrough: 0 }], through: first.through, segments: first.rows });
    const [after] = await journal.pending(1_000);
    expect([after!.mergedThrough, after!.data]).toEqual([first.through, read!.data]);
  });

  test('a merge cut off goes on with rows written since, each row from its own mark', async () => {
    await emptied();
    const start = Date.UTC(2026, 10, 28, 12);
    await journal.write(entry(400, 40, start));
    await journal.write(entry(400, 40, start + 1_000));
    // The first step of a merge of those two rows, through link 20, then the merge stops (cut off).
    const read = await journal.pending(1_000_000);
    const first = new JournalMerge(
      read.map((row) => ({ visits: decodeJournal(row.data), mergedThrough: 0 })),
      { rows: 20, visits: 100_000 },
    ).take()!;
    expect(first.through).toBe(20);
    const rows = read.map(({ id }) => ({ id, mergedThrough: 0 }));
    expect(await journal.merge({ rows, through: first.through, segments: first.rows })).toBeDefined();
    // A flush since, of the same links: the next merge takes all three, its first steps ending
    // before link 20 (the new row's links), which must leave the first two rows' marks at 20.
    await journal.write(entry(400, 40, start + 2_000));
    for (let runs = 0; (await journal.pending(1)).length > 0; runs++) {
      expect(runs).toBeLessThan(5);
      await mergeJournal(journal, { rows: 3, visits: 100_000 });
    }
    const perLink = new Map<number, number>();
    for (const s of await segments())
      perLink.set(Number(s.url_id), (perLink.get(Number(s.url_id)) ?? 0) + Number(s.visits));
    expect([...perLink.values()].reduce((sum, n) => sum + n, 0)).toBe(1_200);
    expect(new Set(perLink.values())).toEqual(new Set([30]));
  });

  test('merges a row of the first format (JSON text), as an upgrade finds one, with the rows written now', async () => {
    await emptied();
    const start = Date.UTC(2026, 10, 28, 12);
    const rows = [entry(300, 30, start), entry(200, 20, start + 2_000)];
    const alone = new JournalMerge(
      rows.map((row) => ({ visits: decodeJournal(row.data), mergedThrough: 0 })),
      { rows: 1_000_000, visits: 1_000_000 },
    ).take()!.rows;
    // The older row as the version before wrote it: its text, in the tables as they are.
    const { id } = await database.db
      .insertInto('visit_journal')
      .values({ written_at_ms: start, merged_through: 0, visits: 300 })
      .returning('id')
      .executeTakeFirstOrThrow();
    const text = firstFormatJournal(decodeJournal(rows[0]!.data));
    await database.db
      .insertInto('visit_journal_data')
      .values({ id: Number(id), data: text })
      .execute();
    await journal.write(rows[1]!);
    expect((await journal.pending(1_000)).map((r) => typeof r.data)).toEqual(['string', 'object']);
    // Until merged: a run stops where another instance is merging.
    await mergeAllJournal(database.db);
    expect(await journal.pending(1_000)).toEqual([]);
    const stored = await storedSegments();
    expect(stored).toEqual(alone);
  });

  if (backend.name === 'postgres')
    test('holds its merge lock for its own schema: a merge elsewhere in the database goes on meanwhile', async () => {
      await emptied();
      const start = Date.UTC(2026, 10, 28, 12);
      await journal.write(entry(100, 10, start));
      await elsewhere.write(entry(100, 10, start));
      // A merge of this schema under way (its lock held until the transaction ends).
      await database.db.transaction().execute(async (trx) => {
        const held = await sql<{
          locked: boolean;
        }>`SELECT pg_try_advisory_xact_lock(${KyselyVisitJournal.PG_MERGE_LOCK}) AS locked`.execute(trx);
        expect(held.rows[0]?.locked).toBe(true);
        // Another instance of this schema leaves the rows to it; the other schema's merge does not wait.
        expect(await mergeJournal(other)).toBe(0);
        expect(await mergeJournal(elsewhere)).toBe(100);
      });
      expect(await mergeJournal(other)).toBe(100);
      expect(await elsewhere.pending(1_000)).toEqual([]);
    });

  test('instances merging the same rows at once write every visit once, in the segments one merge makes', async () => {
    await emptied();
    const start = Date.UTC(2026, 10, 28, 12);
    const rows = [entry(2_000, 500, start), entry(3_000, 700, start + 5_000), entry(1_000, 300, start + 10_000, 200)];
    for (const row of rows) await journal.write(row);
    // What one merge alone makes of them.
    const alone = new JournalMerge(
      rows.map((row) => ({ visits: decodeJournal(row.data), mergedThrough: 0 })),
      { rows: 1_000_000, visits: 1_000_000 },
    ).take()!.rows;
    // Four runs, two an instance, 20 segments a transaction: each step is raced for.
    const group = { rows: 20, visits: 10_000 };
    await Promise.all([
      mergeJournal(journal, group),
      mergeJournal(other, group),
      mergeJournal(journal, group),
      mergeJournal(other, group),
    ]);
    await mergeJournal(journal, group); // what was left when every run had lost a race
    expect(await journal.pending(1_000_000)).toEqual([]);
    const stored = await storedSegments();
    expect(stored.reduce((sum, s) => sum + s.visits, 0)).toBe(6_000);
    expect(stored).toEqual(alone);
  });
});
