import { randomBytes } from 'node:crypto';
import { type Kysely, sql } from 'kysely';
import { DAY_MS, dayOf } from '../../domain/visit.js';
import { decodeVisitDay, mergeVisitDay, type VisitDay } from '../../domain/visit-day.js';
import { decodeSegment, SEGMENT_SPAN_MS, SEGMENT_VISITS } from '../../domain/visit-segment.js';
import type {
  FoldStep,
  StatsRange,
  StoredVisitDay,
  VisitBatch,
  VisitPageQuery,
  VisitPageRow,
  VisitRepository,
} from '../../ports/visit-repository.js';
import type { Dialect } from './database.js';
import type { DatabaseSchema } from './schema.js';
import { HeldTime, segmentDeltas, type VisitDayDelta, VisitDayRows } from './visit-day-rows.js';
import {
  claimBatch,
  type FoldRange,
  foldStatements,
  type SegmentInserter,
  segmentInserter,
  type UnfoldedSegment,
} from './visit-statements.js';

/** Segments a page of visits reads at a time (newest first). */
const PAGE_SEGMENTS = 64;

/**
 * Visits and their day rows in SQLite or PostgreSQL. A batch is written in one transaction: its
 * id and its segments (src/domain/visit-segment.ts), each listed as not yet folded. The day rows
 * are caught up from the unfolded segments by `fold`, every few seconds by whichever instance runs
 * it first, which also lists them by link and end (`visit_link_segments`, migration 0076: no index
 * of `visit_segments` is written a segment); statistics read the day rows and add the unfolded
 * segments of the link as they read.
 */
export class KyselyVisitRepository implements VisitRepository {
  private readonly foldStatements: ReturnType<typeof foldStatements>;
  private readonly insertSegments: SegmentInserter;
  private readonly dayRows: VisitDayRows;

  constructor(
    private readonly db: Kysely<DatabaseSchema>,
    private readonly dialect: Dialect,
    private readonly now: () => number = Date.now,
  ) {
    this.foldStatements = foldStatements(db);
    this.insertSegments = segmentInserter(db, dialect);
    this.dayRows = new VisitDayRows(db, dialect);
  }

  writeBatch(batch: VisitBatch): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      if (!(await claimBatch(trx, batch.id, this.now()))) return false;
      await this.insertSegments(trx, batch.segments);
      return true;
    });
  }

  /**
   * The newest unfolded segment (0: none): a fold run goes up to it, not after what keeps arriving.
   * (The journal's merge writes its segments folded: the list holds only batches' segments.)
   */
  async foldMark(): Promise<number> {
    const row = await this.db
      .selectFrom('visit_unfolded')
      .select((eb) => eb.fn.max('segment_id').as('mark'))
      .executeTakeFirst();
    return Number(row?.mark ?? 0);
  }

  async unfoldedUpTo(upTo: number): Promise<boolean> {
    const row = await this.db
      .selectFrom('visit_unfolded')
      .select('segment_id')
      .where('segment_id', '<=', upTo)
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  }

  /**
   * One step of a fold run: adds the unfolded segments up to `upTo` of the mappings after `after`
   * (lowest ids first), about `segments` of them, to their day rows, in one transaction that takes
   * them off the unfolded list. The last mapping's segments are all taken (a step ends at a
   * mapping's last segment), so each day row is read and written once a run. The step is a range
   * of mapping ids: a run walks the unfolded list once, its next step starting at `through`,
   * instead of looking past the segments that arrived since its mark for the mappings it has
   * done, at every step. Instances fold at once without waiting for each other (PostgreSQL: each
   * takes the segments of its range the others have not locked) and without adding a segment twice.
   */
  async fold(segments: number, upTo: number, after: number): Promise<FoldStep> {
    const work = new HeldTime(this.dialect);
    // Reads, then writes: on SQLite it takes the write lock first, as every transaction not
    // read-only does (database.ts; another process may be folding).
    const step = await this.db.transaction().execute(async (trx) => {
      const end = await this.foldStatements.through.run(trx, { after, upTo, skip: Math.max(0, segments - 1) });
      const last = end.rows[0];
      const through = last === undefined ? Number.MAX_SAFE_INTEGER : Number(last.url_id);
      const taken = await this.takeRange(trx, { after, through, upTo });
      if (taken.length > 0)
        await this.dayRows.add(
          trx,
          work.run(() => segmentDeltas(taken)),
          work,
        );
      if (last !== undefined) return { segments: taken.length, through };
      // The rest of the list: its last mapping, or none left.
      const reached = taken.reduce((most, row) => Math.max(most, Number(row.url_id)), -1);
      return { segments: taken.length, through: reached < 0 ? undefined : reached };
    });
    return { ...step, heldMs: work.heldMs };
  }

  /** The range's unfolded segments, taken off the list and listed by link (see `foldStatements`). */
  private async takeRange(trx: Kysely<DatabaseSchema>, range: FoldRange): Promise<UnfoldedSegment[]> {
    const statements = this.foldStatements;
    if (this.dialect === 'sqlite') {
      const { rows } = await statements.read.run(trx, range);
      await statements.list.run(trx, range);
      await statements.forget.run(trx, range);
      return rows;
    }
    const ids = (await statements.take.run(trx, range)).rows.map((row) => Number(row.segment_id));
    return ids.length === 0 ? [] : (await statements.readTaken.run(trx, { ids })).rows;
  }

  /** A list of (link, end, segment) keys to compare with `IN` (one parameter a column, whatever its length). */
  private keyList(keys: readonly (readonly [number, number, number])[]) {
    return this.dialect === 'sqlite'
      ? sql`(SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(${JSON.stringify(keys)}))`
      : sql`(SELECT * FROM unnest(CAST(${keys.map((k) => k[0])} AS BIGINT[]), CAST(${keys.map((k) => k[1])} AS BIGINT[]), CAST(${keys.map((k) => k[2])} AS BIGINT[])))`;
  }

  /** A list of numbers to compare with `IN` (one parameter, whatever its length). */
  private numberList(numbers: readonly number[]) {
    return this.dialect === 'sqlite'
      ? sql<number>`(SELECT value FROM json_each(${JSON.stringify(numbers)}))`
      : sql<number>`(SELECT unnest(CAST(${numbers} AS BIGINT[])))`;
  }

  /** Adds to the day rows (a batch's additions, or the bench's seed) in one transaction. */
  addVisitDays(deltas: readonly VisitDayDelta[]): Promise<void> {
    return this.db.transaction().execute((trx) => this.dayRows.add(trx, deltas));
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

  /**
   * The day rows of the range and what the link's unfolded segments add to them, read in one
   * transaction (one snapshot: a fold committing meanwhile is seen whole or not at all).
   */
  async days({ urlId, from, to }: StatsRange): Promise<StoredVisitDay[]> {
    const days: number[] = [];
    for (let day = dayOf(from); day < Math.ceil(to / DAY_MS); day++) days.push(day);
    if (days.length === 0) return [];
    const read = async (trx: Kysely<DatabaseSchema>) => {
      // One key lookup a day (the key is day first).
      const rows = await trx
        .selectFrom('visit_days')
        .select(['day', 'data'])
        .where('url_id', '=', urlId)
        .where('day', 'in', this.numberList(days))
        .execute();
      const pending = await trx
        .selectFrom('visit_unfolded as u')
        .innerJoin('visit_segments as s', 's.id', 'u.segment_id')
        .select(['s.url_id', 's.day', 's.first_ms', 's.data'])
        .where('u.url_id', '=', urlId)
        .where('s.day', '>=', days[0]!)
        .where('s.day', '<=', days.at(-1)!)
        .execute();
      const byDay = new Map<number, VisitDay>(rows.map((r) => [Number(r.day), decodeVisitDay(r.data)]));
      for (const { day, data } of segmentDeltas(pending)) {
        const stored = byDay.get(day);
        byDay.set(day, stored ? mergeVisitDay(stored, data) : data);
      }
      return [...byDay].sort(([a], [b]) => a - b).map(([day, data]) => ({ day, data }));
    };
    return this.dialect === 'postgres'
      ? this.db.transaction().setIsolationLevel('repeatable read').setAccessMode('read only').execute(read)
      : this.db.transaction().setAccessMode('read only').execute(read);
  }

  /**
   * Newest first: the link's segments that can hold visits before the page's end, newest-ending
   * first, PAGE_SEGMENTS at a time, until the visits found newer than every segment not yet read
   * fill the page.
   */
  async page({ urlId, from, to, limit, before }: VisitPageQuery): Promise<VisitPageRow[]> {
    const upper = before ? before.visitedAt : to - 1;
    const found: VisitPageRow[] = [];
    let after: { last: number; id: number } | undefined;
    for (;;) {
      const segments = await this.pageSegments(urlId, from, upper, after);
      for (const segment of segments) {
        const visits = decodeSegment(urlId, Number(segment.first_ms), segment.data);
        for (let i = 0; i < visits.length; i++) {
          const visit = visits[i]!;
          const id = Number(segment.id) * SEGMENT_VISITS + i;
          if (visit.visitedAt < from || visit.visitedAt >= to) continue;
          if (
            before &&
            (visit.visitedAt > before.visitedAt || (visit.visitedAt === before.visitedAt && id >= before.id))
          )
            continue;
          found.push({ id, ...visit });
        }
      }
      const last = segments.at(-1);
      if (segments.length < PAGE_SEGMENTS || last === undefined) break;
      after = { last: Number(last.last_ms), id: Number(last.id) };
      // Segments not read yet end at or before `after.last`: what is newer is in its place.
      if (found.filter((v) => v.visitedAt > after!.last).length >= limit) break;
    }
    return found.sort((a, b) => b.visitedAt - a.visitedAt || b.id - a.id).slice(0, limit);
  }

  /**
   * The next PAGE_SEGMENTS of the link's segments that can hold visits from `from` to `upper`,
   * newest-ending first, after `after`: the unfolded ones (through `visit_unfolded`) and the folded
   * ones (through `visit_link_segments`), PAGE_SEGMENTS of each, merged. The unfolded are read
   * first: a segment the fold moves from one list to the other between the two reads is then read
   * twice, and kept once, rather than missed.
   */
  private async pageSegments(urlId: number, from: number, upper: number, after?: { last: number; id: number }) {
    // The folded list in its key's order (url_id, last_ms, segment id), so that its LIMIT stops the
    // read early; the unfolded list holds a few segments a link, ordered by the segments' own columns.
    const page = async (list: 'visit_unfolded' | 'visit_link_segments', end: string, id: string) =>
      (
        await sql<{ id: number | string; first_ms: number | string; last_ms: number | string; data: string }>`
          SELECT s.id, s.first_ms, s.last_ms, s.data FROM ${sql.table(list)} AS l
          JOIN visit_segments AS s ON s.id = l.segment_id
          WHERE l.url_id = ${urlId} AND ${sql.ref(end)} >= ${from} AND ${sql.ref(end)} <= ${upper + SEGMENT_SPAN_MS}
            AND s.first_ms <= ${upper}
            ${after ? sql`AND (${sql.ref(end)}, ${sql.ref(id)}) < (${after.last}, ${after.id})` : sql``}
          ORDER BY ${sql.ref(end)} DESC, ${sql.ref(id)} DESC LIMIT ${PAGE_SEGMENTS}`.execute(this.db)
      ).rows;
    const unfolded = await page('visit_unfolded', 's.last_ms', 's.id');
    const folded = await page('visit_link_segments', 'l.last_ms', 'l.segment_id');
    const byId = new Map([...unfolded, ...folded].map((segment) => [Number(segment.id), segment]));
    return [...byId.values()]
      .sort((a, b) => Number(b.last_ms) - Number(a.last_ms) || Number(b.id) - Number(a.id))
      .slice(0, PAGE_SEGMENTS);
  }

  /**
   * Retention walks the oldest segments rather than an index of times (one index less to keep up):
   * of the `limit` lowest ids, the folded segments wholly older than `before` go. Ids follow the
   * visits' times but for the batches held while the database was away, written late: such a
   * segment goes once the segments written before it are past the cutoff too.
   */
  async prune(options: { before: number; hashesBefore: number; batchesBefore: number; limit: number }) {
    const { before, hashesBefore, batchesBefore, limit } = options;
    // The segments and their entries by link go together (an entry left alone would point at nothing).
    const deleted = await this.db.transaction().execute(async (trx) => {
      const rows = await trx
        .deleteFrom('visit_segments')
        .where('id', 'in', (db) => db.selectFrom('visit_segments').select('id').orderBy('id').limit(limit))
        .where('last_ms', '<', before)
        .where('id', 'not in', (db) => db.selectFrom('visit_unfolded').select('segment_id'))
        .returning(['id', 'url_id', 'last_ms', 'visits'])
        .execute();
      if (rows.length > 0) {
        const keys = this.keyList(rows.map((r) => [Number(r.url_id), Number(r.last_ms), Number(r.id)] as const));
        await sql`DELETE FROM visit_link_segments WHERE (url_id, last_ms, segment_id) IN ${keys}`.execute(trx);
      }
      return rows;
    });
    await this.db.deleteFrom('visit_days').where('day', '<', dayOf(before)).execute();
    await this.db.deleteFrom('visit_salts').where('day', '<', hashesBefore).execute();
    await this.db.deleteFrom('visit_batches').where('written_at_ms', '<', batchesBefore).execute();
    return { segments: deleted.length, visits: deleted.reduce((sum, row) => sum + Number(row.visits), 0) };
  }
}
