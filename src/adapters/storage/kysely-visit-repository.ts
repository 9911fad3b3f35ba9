import { randomBytes } from 'node:crypto';
import { type Kysely, type RawBuilder, sql } from 'kysely';
import { type DeviceClass, DAY_MS, dayOf } from '../../domain/visit.js';
import {
  addVisit,
  addVisitor,
  decodeVisitDay,
  emptyVisitDay,
  encodeVisitDay,
  mergeVisitDay,
  type VisitDay,
} from '../../domain/visit-day.js';
import type {
  StatsRange,
  StoredVisitDay,
  VisitBatch,
  VisitPageQuery,
  VisitPageRow,
  VisitRepository,
} from '../../ports/visit-repository.js';
import type { Dialect } from './database.js';
import type { DatabaseSchema } from './schema.js';

/** Rows per statement (each statement has one parameter per column, whatever its rows). */
const ROWS_PER_STATEMENT = 5_000;

type Column = readonly [name: string, pgType: 'BIGINT' | 'TEXT'];

/**
 * `INSERT INTO table (columns) <rows> <tail>` with SQL that is the same whatever the number of
 * rows: the rows as one JSON text (SQLite's `json_each`) or one array per column (PostgreSQL's
 * `unnest`), in the order given. Building the statement row by row cost more than running it.
 */
function bulkInsert(
  dialect: Dialect,
  table: string,
  columns: readonly Column[],
  rows: readonly Readonly<Record<string, unknown>>[],
  tail: RawBuilder<unknown>,
): RawBuilder<unknown> {
  const names = sql.join(columns.map(([name]) => sql.ref(name)));
  if (dialect === 'sqlite') {
    const json = JSON.stringify(rows.map((row) => columns.map(([name]) => row[name] ?? null)));
    const values = sql.join(columns.map((_, i) => sql.raw(`value ->> ${i}`)));
    // `WHERE true`: without it SQLite would read ON CONFLICT as a join constraint.
    return sql`INSERT INTO ${sql.table(table)} (${names}) SELECT ${values} FROM json_each(${json}) WHERE true ${tail}`;
  }
  const arrays = sql.join(
    columns.map(([name, type]) => sql`CAST(${rows.map((row) => row[name] ?? null)} AS ${sql.raw(type)}[])`),
  );
  return sql`INSERT INTO ${sql.table(table)} (${names}) SELECT * FROM unnest(${arrays}) ${tail}`;
}

const VISIT_COLUMNS: readonly Column[] = [
  ['url_id', 'BIGINT'],
  ['visited_at_ms', 'BIGINT'],
  ['referrer_host', 'TEXT'],
  ['browser', 'TEXT'],
  ['os', 'TEXT'],
  ['device', 'TEXT'],
  ['bot', 'BIGINT'],
  ['country', 'TEXT'],
];

/** A mapping's day row to add to (`data`: what a batch adds to that day). */
export interface VisitDayDelta {
  readonly url_id: number;
  readonly day: number;
  readonly data: VisitDay;
}

/** What a batch adds to each (mapping, UTC day) it touches, in key order (day, mapping: every writer locks rows in that order). */
export function visitDaysOf({ visits, visitors }: Pick<VisitBatch, 'visits' | 'visitors'>): VisitDayDelta[] {
  const days = new Map<string, VisitDayDelta>();
  const dayOfKey = (url_id: number, day: number) => {
    const key = `${url_id}:${day}`;
    let delta = days.get(key);
    if (delta === undefined) days.set(key, (delta = { url_id, day, data: emptyVisitDay() }));
    return delta.data;
  };
  for (const v of visits) addVisit(dayOfKey(v.urlId, dayOf(v.visitedAt)), v);
  for (const v of visitors) addVisitor(dayOfKey(v.urlId, v.day), v.hash);
  return [...days.values()].sort((a, b) => a.day - b.day || a.url_id - b.url_id);
}

const DAY_COLUMNS: readonly Column[] = [
  ['url_id', 'BIGINT'],
  ['day', 'BIGINT'],
  ['data', 'TEXT'],
];

function* chunks<T>(rows: readonly T[]): Generator<T[]> {
  for (let start = 0; start < rows.length; start += ROWS_PER_STATEMENT) {
    yield rows.slice(start, start + ROWS_PER_STATEMENT);
  }
}

/**
 * Visits and their day rows in SQLite or PostgreSQL. A batch is written in one transaction: its
 * id, its visits (one statement per 5,000), and one read, add and write-back of the day rows it
 * touches (one row per mapping and UTC day, whatever the visits).
 */
export class KyselyVisitRepository implements VisitRepository {
  constructor(
    private readonly db: Kysely<DatabaseSchema>,
    private readonly dialect: Dialect,
    private readonly now: () => number = Date.now,
  ) {}

  writeBatch(batch: VisitBatch): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      const claimed = await trx
        .insertInto('visit_batches')
        .values({ id: batch.id, written_at_ms: this.now() })
        .onConflict((oc) => oc.column('id').doNothing())
        .executeTakeFirst();
      if (Number(claimed.numInsertedOrUpdatedRows ?? 0) === 0) return false;
      for (const chunk of chunks(batch.visits)) {
        const rows = chunk.map((v) => ({
          url_id: v.urlId,
          visited_at_ms: v.visitedAt,
          referrer_host: v.referrerHost,
          browser: v.browser,
          os: v.os,
          device: v.device,
          bot: v.bot ? 1 : 0,
          country: v.country,
        }));
        await bulkInsert(this.dialect, 'visits', VISIT_COLUMNS, rows, sql``).execute(trx);
      }
      await this.mergeDays(trx, visitDaysOf(batch));
      return true;
    });
  }

  /** Adds to the day rows (a batch's additions, or the bench's seed) in one transaction. */
  addVisitDays(deltas: readonly VisitDayDelta[]): Promise<void> {
    return this.db.transaction().execute((trx) => this.mergeDays(trx, deltas));
  }

  /**
   * Reads the day rows `deltas` add to (one statement), adds to them in memory, writes them back
   * (one statement). On SQLite the transaction already holds the database's one writer lock (its
   * first statement wrote the batch id). On PostgreSQL the read is an upsert that locks every row,
   * new or not, in key order, so two writers wait for each other's rows in one order and never
   * deadlock, and neither adds to a row the other has not committed yet.
   */
  private async mergeDays(trx: Kysely<DatabaseSchema>, deltas: readonly VisitDayDelta[]): Promise<void> {
    for (const chunk of chunks(deltas)) {
      const keys = chunk.map(({ url_id, day }) => ({ url_id, day, data: '' }));
      const current = (
        this.dialect === 'sqlite'
          ? sql`SELECT d.url_id, d.day, d.data FROM json_each(${JSON.stringify(keys.map((k) => [k.url_id, k.day]))}) AS k
              JOIN visit_days AS d ON d.url_id = k.value ->> 0 AND d.day = k.value ->> 1`
          : bulkInsert(
              this.dialect,
              'visit_days',
              DAY_COLUMNS,
              keys,
              sql`ON CONFLICT (url_id, day) DO UPDATE SET data = visit_days.data RETURNING url_id, day, data`,
            )
      ) as RawBuilder<{ url_id: number | string; day: number | string; data: string }>;
      const stored = new Map<string, string>();
      for (const row of (await current.execute(trx)).rows) stored.set(`${row.url_id}:${row.day}`, row.data);
      const rows = chunk.map(({ url_id, day, data }) => {
        const text = stored.get(`${url_id}:${day}`);
        return {
          url_id,
          day,
          data: encodeVisitDay(text ? mergeVisitDay(decodeVisitDay(text), data) : data),
        };
      });
      await bulkInsert(
        this.dialect,
        'visit_days',
        DAY_COLUMNS,
        rows,
        sql`ON CONFLICT (url_id, day) DO UPDATE SET data = excluded.data`,
      ).execute(trx);
    }
  }

  async daySalt(day: number): Promise<string> {
    await this.db
      .insertInto('visit_salts')
      .values({ day, salt: randomBytes(32).toString('base64') })
      .onConflict((oc) => oc.column('day').doNothing())
      .execute();
    const row = await this.db.selectFrom('visit_salts').select('salt').where('day', '=', day).executeTakeFirstOrThrow();
    return row.salt;
  }

  async days({ urlId, from, to }: StatsRange): Promise<StoredVisitDay[]> {
    const days: number[] = [];
    for (let day = dayOf(from); day < Math.ceil(to / DAY_MS); day++) days.push(day);
    if (days.length === 0) return [];
    // One key lookup a day (the key is day first).
    const list =
      this.dialect === 'sqlite'
        ? sql<number>`(SELECT value FROM json_each(${JSON.stringify(days)}))`
        : sql<number>`(SELECT unnest(CAST(${days} AS BIGINT[])))`;
    const rows = await this.db
      .selectFrom('visit_days')
      .select(['day', 'data'])
      .where('url_id', '=', urlId)
      .where('day', 'in', list)
      .orderBy('day')
      .execute();
    return rows.map((r) => ({ day: Number(r.day), data: decodeVisitDay(r.data) }));
  }

  async page({ urlId, from, to, limit, before }: VisitPageQuery): Promise<VisitPageRow[]> {
    let query = this.db
      .selectFrom('visits')
      .selectAll()
      .where('url_id', '=', urlId)
      .where('visited_at_ms', '>=', from)
      .where('visited_at_ms', '<', to);
    if (before !== undefined) {
      query = query.where(sql<boolean>`(visited_at_ms, id) < (${before.visitedAt}, ${before.id})`);
    }
    const rows = await query.orderBy('visited_at_ms', 'desc').orderBy('id', 'desc').limit(limit).execute();
    return rows.map((r) => ({
      id: r.id,
      urlId: r.url_id,
      visitedAt: r.visited_at_ms,
      referrerHost: r.referrer_host,
      browser: r.browser,
      os: r.os,
      device: r.device as DeviceClass,
      bot: Boolean(r.bot),
      country: r.country,
    }));
  }

  /**
   * Retention walks the oldest ids rather than an index of times (one index less for every visit
   * to keep up): of the `limit` lowest ids, those older than `before` go. Ids follow the visits'
   * times but for the batches held while the database was away, written late: such a visit goes
   * once the visits written before it are past the cutoff too.
   */
  async prune(options: { before: number; hashesBefore: number; batchesBefore: number; limit: number }) {
    const { before, hashesBefore, batchesBefore, limit } = options;
    const deleted = await this.db
      .deleteFrom('visits')
      .where('id', 'in', (db) => db.selectFrom('visits').select('id').orderBy('id').limit(limit))
      .where('visited_at_ms', '<', before)
      .executeTakeFirst();
    await this.db.deleteFrom('visit_days').where('day', '<', dayOf(before)).execute();
    await this.db.deleteFrom('visit_salts').where('day', '<', hashesBefore).execute();
    await this.db.deleteFrom('visit_batches').where('written_at_ms', '<', batchesBefore).execute();
    return Number(deleted.numDeletedRows);
  }
}
