import { randomBytes } from 'node:crypto';
import { type Kysely, type RawBuilder, sql } from 'kysely';
import {
  blockStart,
  type DeviceClass,
  DAY_MS,
  dayOf,
  HOUR_MS,
  hourOf,
  ROLLUP_SPANS,
  spanRanges,
  type VisitDimension,
} from '../../domain/visit.js';
import type {
  DimensionCount,
  HourlyCount,
  StatsRange,
  VisitBatch,
  VisitPageQuery,
  VisitPageRow,
  VisitRepository,
  VisitRollups,
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

/** The rollup increments of `visits`, keyed so that every writer adds them in the same order. */
export function rollupsOf(visits: VisitBatch['visits']): VisitRollups {
  // Alike visits first (one key each; most of a batch repeats a few), then their rollups once a group.
  const groups = new Map<string, { visit: VisitBatch['visits'][number]; count: number }>();
  for (const v of visits) {
    const key = `${v.urlId}\u0000${hourOf(v.visitedAt)}\u0000${v.referrerHost}\u0000${v.country}\u0000${v.browser}\u0000${v.os}\u0000${v.device}`;
    const group = groups.get(key);
    if (group) group.count++;
    else groups.set(key, { visit: v, count: 1 });
  }
  const hourly = new Map<string, [number, number]>();
  const daily = new Map<string, number>();
  for (const { visit: v, count } of groups.values()) {
    const hourKey = `${v.urlId}:${hourOf(v.visitedAt)}`;
    const counts = hourly.get(hourKey) ?? [0, 0];
    counts[0] += count;
    // The device class is `bot` exactly when the visit is a bot's, so a group is all bots or none.
    if (v.bot) counts[1] += count;
    hourly.set(hourKey, counts);
    const day = `${v.urlId}:${dayOf(v.visitedAt)}`;
    for (const [dimension, value] of [
      ['referrer', v.referrerHost],
      ['country', v.country],
      ['browser', v.browser],
      ['os', v.os],
      ['device', v.device],
    ] as const) {
      const key = `${day}:${dimension}:${value ?? ''}`;
      daily.set(key, (daily.get(key) ?? 0) + count);
    }
  }
  return { hourly, daily };
}

/** Splits `url:n:rest` keys back into numbers (the rest kept whole: a value may hold ':'). */
function splitKey(key: string): [number, number, string] {
  const first = key.indexOf(':');
  const second = key.indexOf(':', first + 1);
  const rest = second < 0 ? '' : key.slice(second + 1);
  return [Number(key.slice(0, first)), Number(key.slice(first + 1, second < 0 ? undefined : second)), rest];
}

function byKey<T extends { url_id: number; day?: number; hour?: number; dimension?: string; value?: string }>(
  a: T,
  b: T,
): number {
  return (
    a.url_id - b.url_id ||
    (a.hour ?? 0) - (b.hour ?? 0) ||
    (a.day ?? 0) - (b.day ?? 0) ||
    (a.dimension ?? '').localeCompare(b.dimension ?? '') ||
    (a.value! < b.value! ? -1 : a.value! > b.value! ? 1 : 0)
  );
}

/** Each day's counts, for its day and for the 8- and 64-day blocks that hold it, in key order. */
function blockRows(daily: VisitRollups['daily']) {
  const blocks = new Map<
    string,
    { url_id: number; span: number; day: number; dimension: string; value: string; visits: number }
  >();
  for (const [key, visits] of daily) {
    const [url_id, day, rest] = splitKey(key);
    const at = rest.indexOf(':');
    for (const span of ROLLUP_SPANS) {
      const start = blockStart(day, span);
      const blockKey = `${url_id}:${span}:${start}:${rest}`;
      const row = blocks.get(blockKey);
      if (row) row.visits += visits;
      else
        blocks.set(blockKey, {
          url_id,
          span,
          day: start,
          dimension: rest.slice(0, at),
          value: rest.slice(at + 1),
          visits,
        });
    }
  }
  return [...blocks.values()].sort((a, b) => a.span - b.span || byKey(a, b));
}

function* chunks<T>(rows: readonly T[]): Generator<T[]> {
  for (let start = 0; start < rows.length; start += ROWS_PER_STATEMENT) {
    yield rows.slice(start, start + ROWS_PER_STATEMENT);
  }
}

/**
 * Visits, their rollups and the visitor hashes in SQLite or PostgreSQL. A batch is written in
 * one transaction: its id, its visits, the new visitors, and the rollup increments, each table
 * in key order so that concurrent writers on PostgreSQL lock rows in the same order.
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
      await this.applyRollups(trx, rollupsOf(batch.visits));
      await this.addVisitors(trx, batch.visitors);
      return true;
    });
  }

  /** Adds rollup increments (a batch's, or the bench's seed) in one transaction. */
  addRollups(rollups: VisitRollups): Promise<void> {
    return this.db.transaction().execute((trx) => this.applyRollups(trx, rollups));
  }

  private async applyRollups(trx: Kysely<DatabaseSchema>, { hourly, daily }: VisitRollups): Promise<void> {
    const hours = [...hourly].map(([key, [visits, bots]]) => {
      const [url_id, hour] = splitKey(key);
      return { url_id, hour, visits, bots };
    });
    hours.sort(byKey);
    const hourColumns: Column[] = [
      ['url_id', 'BIGINT'],
      ['hour', 'BIGINT'],
      ['visits', 'BIGINT'],
      ['bots', 'BIGINT'],
    ];
    for (const chunk of chunks(hours)) {
      await bulkInsert(
        this.dialect,
        'visit_hourly',
        hourColumns,
        chunk,
        sql`ON CONFLICT (url_id, hour) DO UPDATE SET visits = visit_hourly.visits + excluded.visits, bots = visit_hourly.bots + excluded.bots`,
      ).execute(trx);
    }
    const days = blockRows(daily);
    const dayColumns: Column[] = [
      ['url_id', 'BIGINT'],
      ['span', 'BIGINT'],
      ['day', 'BIGINT'],
      ['dimension', 'TEXT'],
      ['value', 'TEXT'],
      ['visits', 'BIGINT'],
    ];
    for (const chunk of chunks(days)) {
      await bulkInsert(
        this.dialect,
        'visit_daily',
        dayColumns,
        chunk,
        sql`ON CONFLICT (url_id, span, day, dimension, value) DO UPDATE SET visits = visit_daily.visits + excluded.visits`,
      ).execute(trx);
    }
  }

  /** Records the visitors; those new to their mapping and day add to its distinct count. */
  private async addVisitors(trx: Kysely<DatabaseSchema>, visitors: VisitBatch['visitors']): Promise<void> {
    const rows = visitors.map((v) => ({ url_id: v.urlId, day: v.day, hash: v.hash }));
    rows.sort((a, b) => a.url_id - b.url_id || a.day - b.day || a.hash - b.hash);
    const fresh = new Map<string, number>();
    for (const chunk of chunks(rows)) {
      const { rows: inserted } = await (
        bulkInsert(
          this.dialect,
          'visit_visitors',
          [
            ['url_id', 'BIGINT'],
            ['day', 'BIGINT'],
            ['hash', 'BIGINT'],
          ],
          chunk,
          sql`ON CONFLICT (url_id, day, hash) DO NOTHING RETURNING url_id, day`,
        ) as RawBuilder<{ url_id: number; day: number }>
      ).execute(trx);
      for (const { url_id, day } of inserted) fresh.set(`${url_id}:${day}`, (fresh.get(`${url_id}:${day}`) ?? 0) + 1);
    }
    const uniques = [...fresh].map(([key, visitors]) => {
      const [url_id, day] = splitKey(key);
      return { url_id, day, visitors };
    });
    uniques.sort(byKey);
    for (const chunk of chunks(uniques)) {
      await bulkInsert(
        this.dialect,
        'visit_uniques',
        [
          ['url_id', 'BIGINT'],
          ['day', 'BIGINT'],
          ['visitors', 'BIGINT'],
        ],
        chunk,
        sql`ON CONFLICT (url_id, day) DO UPDATE SET visitors = visit_uniques.visitors + excluded.visitors`,
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

  async hourly({ urlId, from, to }: StatsRange, hoursPerRow: 1 | 24 = 1): Promise<HourlyCount[]> {
    // Whole days added up in the database: a year by the day is 365 rows to read, not 8,760.
    const hour = sql<number>`CAST(hour / ${sql.lit(hoursPerRow)} AS BIGINT) * ${sql.lit(hoursPerRow)}`;
    return this.db
      .selectFrom('visit_hourly')
      .select([
        hour.as('hour'),
        sql<number>`CAST(SUM(visits) AS BIGINT)`.as('visits'),
        sql<number>`CAST(SUM(bots) AS BIGINT)`.as('bots'),
      ])
      .where('url_id', '=', urlId)
      .where('hour', '>=', hourOf(from))
      .where('hour', '<', Math.ceil(to / HOUR_MS))
      .groupBy(hour)
      .orderBy(hour)
      .execute();
  }

  async dimensions({ urlId, from, to }: StatsRange): Promise<DimensionCount[]> {
    const ranges = spanRanges(dayOf(from), Math.ceil(to / DAY_MS));
    if (ranges.length === 0) return [];
    const rows = await this.db
      .selectFrom('visit_daily')
      .select(['dimension', 'value', sql<number>`CAST(SUM(visits) AS BIGINT)`.as('visits')])
      .where('url_id', '=', urlId)
      .where((eb) =>
        eb.or(ranges.map((r) => eb.and([eb('span', '=', r.span), eb('day', '>=', r.from), eb('day', '<', r.to)]))),
      )
      .groupBy(['dimension', 'value'])
      .execute();
    return rows.map((r) => ({
      dimension: r.dimension as VisitDimension,
      value: r.value === '' ? null : r.value,
      visits: Number(r.visits),
    }));
  }

  async uniqueVisitors({ urlId, from, to }: StatsRange): Promise<number> {
    const row = await this.db
      .selectFrom('visit_uniques')
      .select(sql<number | null>`CAST(SUM(visitors) AS BIGINT)`.as('visitors'))
      .where('url_id', '=', urlId)
      .where('day', '>=', dayOf(from))
      .where('day', '<', Math.ceil(to / DAY_MS))
      .executeTakeFirst();
    return Number(row?.visitors ?? 0);
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

  async prune(options: { before: number; hashesBefore: number; batchesBefore: number; limit: number }) {
    const { before, hashesBefore, batchesBefore, limit } = options;
    const deleted = await this.db
      .deleteFrom('visits')
      .where('id', 'in', (db) => db.selectFrom('visits').select('id').where('visited_at_ms', '<', before).limit(limit))
      .executeTakeFirst();
    await this.db.deleteFrom('visit_hourly').where('hour', '<', hourOf(before)).execute();
    // A block goes once all its days are out of retention (statistics read no earlier block).
    for (const span of ROLLUP_SPANS) {
      await this.db
        .deleteFrom('visit_daily')
        .where('span', '=', span)
        .where('day', '<=', dayOf(before) - 2 ** span)
        .execute();
    }
    await this.db.deleteFrom('visit_uniques').where('day', '<', dayOf(before)).execute();
    await this.db.deleteFrom('visit_visitors').where('day', '<', hashesBefore).execute();
    await this.db.deleteFrom('visit_salts').where('day', '<', hashesBefore).execute();
    await this.db.deleteFrom('visit_batches').where('written_at_ms', '<', batchesBefore).execute();
    return Number(deleted.numDeletedRows);
  }
}
