import { type Compilable, type Kysely, type RawBuilder, sql } from 'kysely';
import type { VisitSegmentRow } from '../../domain/visit-segment.js';
import { PreparedQuery, PreparedRows } from './prepared-query.js';
import type { Dialect } from './database.js';
import type { DatabaseSchema } from './schema.js';

/** KyselyVisitRepository's statements (src/adapters/storage/kysely-visit-repository.ts): PostgreSQL's bulk inserts, and those it prepares once. */

export type Column = readonly [name: string, pgType: 'BIGINT' | 'TEXT'];

/**
 * PostgreSQL's `INSERT INTO table (columns) <rows> <tail>` with SQL that is the same whatever the
 * number of rows: the rows as one JSON parameter (`JSON.stringify` with the columns as its
 * replacer), read back by `json_to_recordset` in their order. Building the statement row by row
 * cost more than running it; one array parameter a column (`unnest`) cost node-postgres about
 * twice the JSON's time in the client, every number made a string and every element escaped for
 * an array literal (1.2 against 0.6 µs a segment row; bench/PROFILE.md). (SQLite binds rows to
 * prepared statements: `sqliteInserts`.)
 */
export function recordsetInsert(
  table: string,
  columns: readonly Column[],
  objects: readonly object[],
  tail: RawBuilder<unknown>,
): RawBuilder<unknown> {
  const names = sql.join(columns.map(([name]) => sql.ref(name)));
  // The columns are this module's constants, never input: safe as raw SQL.
  const types = sql.raw(columns.map(([name, type]) => `${name} ${type}`).join(', '));
  const rows = JSON.stringify(
    objects,
    columns.map(([name]) => name),
  );
  return sql`INSERT INTO ${sql.table(table)} (${names})
    SELECT ${names} FROM json_to_recordset(CAST(${rows} AS json)) AS r(${types}) ${tail}`;
}

export const SEGMENT_COLUMNS: readonly Column[] = [
  ['url_id', 'BIGINT'],
  ['day', 'BIGINT'],
  ['first_ms', 'BIGINT'],
  ['last_ms', 'BIGINT'],
  ['visits', 'BIGINT'],
  ['data', 'TEXT'],
];

/**
 * Segments one SQLite insert takes (six parameters each), prepared once for each row count up to
 * it: the rows bound as values cost a segment about a third of what one JSON text of them
 * (`bulkInsert`) did, the text built, escaped and read back by `json_each` a column at a time.
 */
const SEGMENT_ROWS_PER_STATEMENT = 50;

export const DAY_COLUMNS: readonly Column[] = [
  ['url_id', 'BIGINT'],
  ['day', 'BIGINT'],
  ['data', 'TEXT'],
];

export interface FoldRange {
  readonly after: number;
  readonly through: number;
  readonly upTo: number;
}

export type UnfoldedSegment = {
  url_id: number | string;
  day: number | string;
  first_ms: number | string;
  data: string;
};

/**
 * A fold step's statements, prepared once (a step runs them every few ms while a run lasts):
 * - `through`: the mapping of the `skip + 1`th unfolded segment after mapping `after`, in
 *   (mapping, segment) order: where the step ends;
 * - SQLite (the transaction holds the one writer already): `read` the range's segments, `list`
 *   them by link (`visit_link_segments`), `forget` them (off the unfolded list);
 * - PostgreSQL: `take` the range off the unfolded list, skipping the rows another instance has
 *   locked, then `readTaken`: those segments read by id and listed by link in one statement. By
 *   id, as an array: joined to the `DELETE … RETURNING` in one statement, the planner expected
 *   tens of thousands of rows from it and read the whole segments table into a hash (800 ms a
 *   step with 190,000 segments, against 34).
 */
export function foldStatements(db: Kysely<DatabaseSchema>) {
  const prepared = <Row, Params extends object>(
    build: (p: (name: keyof Params & string) => unknown) => RawBuilder<Row>,
  ) => new PreparedQuery<DatabaseSchema, Row, Params>(db, (db, p) => ({ compile: () => build(p).compile(db) }));
  const range = (p: (name: keyof FoldRange & string) => unknown, table = '') =>
    sql`${sql.raw(table)}url_id > ${p('after')} AND ${sql.raw(table)}url_id <= ${p('through')} AND ${sql.raw(table)}segment_id <= ${p('upTo')}`;
  return {
    through: prepared<{ url_id: number | string }, { after: number; upTo: number; skip: number }>(
      (p) => sql`SELECT url_id FROM visit_unfolded WHERE url_id > ${p('after')} AND segment_id <= ${p('upTo')}
        ORDER BY url_id, segment_id LIMIT 1 OFFSET ${p('skip')}`,
    ),
    read: prepared<UnfoldedSegment, FoldRange>(
      (p) => sql`SELECT s.url_id, s.day, s.first_ms, s.data FROM visit_unfolded AS u
        JOIN visit_segments AS s ON s.id = u.segment_id WHERE ${range(p, 'u.')}`,
    ),
    list: prepared<never, FoldRange>(
      (p) => sql`INSERT INTO visit_link_segments (url_id, last_ms, segment_id)
        SELECT u.url_id, s.last_ms, s.id FROM visit_unfolded AS u JOIN visit_segments AS s ON s.id = u.segment_id
        WHERE ${range(p, 'u.')}`,
    ),
    forget: prepared<never, FoldRange>((p) => sql`DELETE FROM visit_unfolded WHERE ${range(p)}`),
    take: prepared<{ segment_id: number | string }, FoldRange>(
      (p) => sql`DELETE FROM visit_unfolded WHERE (url_id, segment_id) IN
        (SELECT url_id, segment_id FROM visit_unfolded WHERE ${range(p)} FOR UPDATE SKIP LOCKED)
        RETURNING segment_id`,
    ),
    readTaken: prepared<UnfoldedSegment, { ids: readonly number[] }>(
      (p) => sql`WITH s AS (SELECT id, url_id, day, first_ms, last_ms, data FROM visit_segments
          WHERE id = ANY(CAST(${p('ids')} AS BIGINT[]))),
        listed AS (INSERT INTO visit_link_segments (url_id, last_ms, segment_id) SELECT url_id, last_ms, id FROM s)
        SELECT url_id, day, first_ms, data FROM s`,
    ),
  };
}

export type DayRow = { url_id: number; day: number; data: string };

/**
 * SQLite's inserts of segments (a flush's) and of day rows (a fold step's, replacing those there):
 * prepared statements of their values, SEGMENT_ROWS_PER_STATEMENT rows each.
 */
export function sqliteInserts(db: Kysely<DatabaseSchema>) {
  const rows = <Row extends object>(
    build: (
      db: Kysely<DatabaseSchema>,
      count: number,
      slot: (row: number, column: keyof Row & string) => unknown,
    ) => Compilable<unknown>,
  ) => new PreparedRows<DatabaseSchema, Row>(db, SEGMENT_ROWS_PER_STATEMENT, build);
  const columns = <Row extends object>(
    names: readonly (keyof Row & string)[],
    count: number,
    slot: (row: number, column: keyof Row & string) => unknown,
  ) => Array.from({ length: count }, (_, i) => Object.fromEntries(names.map((name) => [name, slot(i, name)])) as Row);
  return {
    segments: rows<VisitSegmentRow>((db, count, slot) =>
      db
        .insertInto('visit_segments')
        .values(columns<VisitSegmentRow>(['url_id', 'day', 'first_ms', 'last_ms', 'visits', 'data'], count, slot)),
    ),
    days: rows<DayRow>((db, count, slot) =>
      db
        .insertInto('visit_days')
        .values(columns<DayRow>(['url_id', 'day', 'data'], count, slot))
        .onConflict((oc) => oc.columns(['url_id', 'day']).doUpdateSet({ data: (eb) => eb.ref('excluded.data') })),
    ),
  };
}

/** Rows one bulk statement takes (PostgreSQL: one JSON parameter, whatever its rows). */
const ROWS_PER_STATEMENT = 5_000;

/** `rows` in slices of ROWS_PER_STATEMENT, a statement each. */
export function* chunks<T>(rows: readonly T[]): Generator<T[]> {
  for (let start = 0; start < rows.length; start += ROWS_PER_STATEMENT) {
    yield rows.slice(start, start + ROWS_PER_STATEMENT);
  }
}

/**
 * Records batch `id` (a flush's, written at `writtenAt`) in `visit_batches` within the caller's
 * transaction; false when it is there already (written before: the caller writes nothing).
 */
export async function claimBatch(trx: Kysely<DatabaseSchema>, id: string, writtenAt: number): Promise<boolean> {
  const claimed = await trx
    .insertInto('visit_batches')
    .values({ id, written_at_ms: writtenAt })
    .onConflict((oc) => oc.column('id').doNothing())
    .executeTakeFirst();
  return Number(claimed.numInsertedOrUpdatedRows ?? 0) > 0;
}

/** Inserts segments in a transaction and lists them (`segmentInserter`). */
export type SegmentInserter = (trx: Kysely<DatabaseSchema>, segments: readonly VisitSegmentRow[]) => Promise<void>;

/**
 * Where a segment inserter lists its segments: as not folded yet (`visit_unfolded`: a batch's, which
 * the fold adds to the day rows later), or by link as folded (`visit_link_segments`: the journal's
 * merge, which adds them to the day rows in the same transaction).
 */
export type SegmentListing = 'unfolded' | 'folded';

/**
 * Inserts segments and lists them (`listing`), without their ids coming back to JS. PostgreSQL:
 * one statement (the insert's RETURNING feeds the list's). SQLite: the list's rows are read from
 * the table after the newest id before the insert; nobody else inserts in between, since the
 * transaction holds the one writer from its first statement.
 */
export function segmentInserter(
  db: Kysely<DatabaseSchema>,
  dialect: Dialect,
  listing: SegmentListing = 'unfolded',
): SegmentInserter {
  // The segments' table is `s` in both: its rows just inserted.
  const list =
    listing === 'unfolded'
      ? sql`INSERT INTO visit_unfolded (url_id, segment_id) SELECT url_id, id`
      : sql`INSERT INTO visit_link_segments (url_id, last_ms, segment_id) SELECT url_id, last_ms, id`;
  if (dialect === 'postgres') {
    return async (trx, segments) => {
      for (const chunk of chunks(segments)) {
        const insert = recordsetInsert('visit_segments', SEGMENT_COLUMNS, chunk, sql`RETURNING id, url_id, last_ms`);
        await sql`WITH s AS (${insert}) ${list} FROM s`.execute(trx);
      }
    };
  }
  const segmentRows = sqliteInserts(db).segments;
  return async (trx, segments) => {
    if (segments.length === 0) return;
    const before = await trx
      .selectFrom('visit_segments')
      .select((eb) => eb.fn.max('id').as('id'))
      .executeTakeFirst();
    await segmentRows.run(trx, segments);
    await sql`${list} FROM visit_segments AS s WHERE id > ${Number(before?.id ?? 0)}`.execute(trx);
  };
}
