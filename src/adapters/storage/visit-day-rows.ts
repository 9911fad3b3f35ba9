import { type Kysely, sql } from 'kysely';
import { decodeVisitDay, emptyVisitDay, encodeVisitDay, mergeVisitDay, type VisitDay } from '../../domain/visit-day.js';
import { addSegment } from '../../domain/visit-segment.js';
import type { Dialect } from './database.js';
import type { PreparedRows } from './prepared-query.js';
import type { DatabaseSchema } from './schema.js';
import { chunks, DAY_COLUMNS, type DayRow, recordsetInsert, sqliteInserts } from './visit-statements.js';

/** PostgreSQL's advisory lock a transaction that adds to day rows holds (any 64-bit constant of ours): one at a time. */
const DAY_ROWS_LOCK = 0x76_64_61_79_72_77; // "vdayrw"

type StoredDayRow = { url_id: number | string; day: number | string; data: string };

/** A mapping's day row to add to (`data`: what some segments add to that day). */
export interface VisitDayDelta {
  readonly url_id: number;
  readonly day: number;
  readonly data: VisitDay;
}

/** What a segment needs to be added to its day row. */
export type SegmentOfDay = {
  readonly url_id: number | string;
  readonly day: number | string;
  readonly first_ms: number | string;
  readonly data: string;
};

/**
 * Adds to the day rows (`visit_days`) inside a caller's transaction: the fold's steps (segments
 * read back from the unfolded list) and the journal's merge steps (segments made in memory) both
 * do it, each in the transaction that makes those segments count.
 */
export class VisitDayRows {
  /** SQLite's inserts of day rows (`sqliteInserts`). */
  private readonly inserts: PreparedRows<DatabaseSchema, DayRow>;

  constructor(
    db: Kysely<DatabaseSchema>,
    private readonly dialect: Dialect,
  ) {
    this.inserts = sqliteInserts(db).days;
  }

  /**
   * Reads the day rows `deltas` add to (one statement), adds to them in memory, writes them back
   * (one statement). On SQLite the transaction already holds the database's one writer lock (its
   * first statement wrote). On PostgreSQL it first takes DAY_ROWS_LOCK until it commits, so no
   * other writer adds to a row between this one's read and its write. (Each row was locked by an
   * upsert before it was read instead: that wrote every existing row twice, the rewrite of a row
   * most of what adding to it cost; bench/PROFILE.md. Only the journal's merge, one instance at a
   * time, writes day rows in a running service.)
   */
  async add(
    trx: Kysely<DatabaseSchema>,
    deltas: readonly VisitDayDelta[],
    work: HeldTime = new HeldTime(this.dialect),
  ) {
    if (deltas.length === 0) return;
    if (this.dialect === 'postgres') await sql`SELECT pg_advisory_xact_lock(${DAY_ROWS_LOCK})`.execute(trx);
    for (const chunk of chunks(deltas)) {
      const keys = JSON.stringify(chunk.map(({ url_id, day }) => [url_id, day]));
      const { rows: found } = await (
        this.dialect === 'sqlite'
          ? sql<StoredDayRow>`SELECT d.url_id, d.day, d.data FROM json_each(${keys}) AS k
              JOIN visit_days AS d ON d.url_id = k.value ->> 0 AND d.day = k.value ->> 1`
          : sql<StoredDayRow>`SELECT d.url_id, d.day, d.data FROM json_array_elements(CAST(${keys} AS json)) AS k
              JOIN visit_days AS d ON d.url_id = CAST(k ->> 0 AS BIGINT) AND d.day = CAST(k ->> 1 AS BIGINT)`
      ).execute(trx);
      const rows = work.run(() => {
        const stored = new Map<string, string>();
        for (const row of found) stored.set(`${row.url_id}:${row.day}`, row.data);
        return chunk.map(({ url_id, day, data }) => {
          const text = stored.get(`${url_id}:${day}`);
          return {
            url_id,
            day,
            data: encodeVisitDay(text ? mergeVisitDay(decodeVisitDay(text), data) : data),
          };
        });
      });
      if (this.dialect === 'sqlite') await this.inserts.run(trx, rows);
      else {
        const upsert = work.run(() =>
          recordsetInsert(
            'visit_days',
            DAY_COLUMNS,
            rows,
            sql`ON CONFLICT (url_id, day) DO UPDATE SET data = excluded.data`,
          ),
        );
        await upsert.execute(trx);
      }
    }
  }
}

/** What the segments add to each (mapping, UTC day), in the day rows' key order (day, mapping). */
export function segmentDeltas(segments: readonly SegmentOfDay[]): VisitDayDelta[] {
  const days = new Map<string, VisitDayDelta>();
  for (const segment of segments) {
    const url_id = Number(segment.url_id);
    const day = Number(segment.day);
    const key = `${url_id}:${day}`;
    let delta = days.get(key);
    if (delta === undefined) days.set(key, (delta = { url_id, day, data: emptyVisitDay() }));
    addSegment(delta.data, Number(segment.first_ms), segment.data);
  }
  return [...days.values()].sort((a, b) => a.day - b.day || a.url_id - b.url_id);
}

/**
 * What a step kept requests waiting for, from its start: on SQLite its whole time (better-sqlite3
 * runs every statement synchronously, so the step holds the loop from start to commit); on
 * PostgreSQL only its JavaScript between statements, summed by `run` (its statements' round trips
 * keep nobody waiting). What the fold's and the merge's steps are sized by.
 */
export class HeldTime {
  private readonly started = performance.now();
  private ms = 0;

  constructor(private readonly dialect: Dialect) {}

  run<T>(work: () => T): T {
    const started = performance.now();
    try {
      return work();
    } finally {
      this.ms += performance.now() - started;
    }
  }

  /** Milliseconds held so far. */
  get heldMs(): number {
    return this.dialect === 'sqlite' ? performance.now() - this.started : this.ms;
  }
}
