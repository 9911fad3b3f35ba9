import { sql } from 'kysely';
import { dialectOf } from '../database.js';
import type { DeviceClass, VisitRecord } from '../../../domain/visit.js';
import { segmentsOf } from '../../../domain/visit-segment.js';
import { createVisitRows } from './0070-visits.js';
import { dialectColumns, required } from './columns.js';
import { dropIndexes, type SchemaMigration } from './migration.js';

/** Visits read per step of the conversion (keyset order), and segments inserted per statement. */
const CONVERT_VISITS = 10_000;
const INSERT_SEGMENTS = 500;

/**
 * Visits stored as segments (src/domain/visit-segment.ts: one row per mapping, UTC day and flush
 * batch, holding those visits column by column) instead of a row each, and the day rows caught up
 * from them by a fold every few seconds instead of in every flush: `visit_unfolded` lists the
 * segments not yet added to their day rows (statistics add them as they read). The visits of
 * 0070's table become segments (already in their day rows, so none is listed as unfolded), and
 * the table goes.
 */
export const visitSegments: SchemaMigration = {
  name: '0075_visit_segments',
  async up(db, columns) {
    await db.schema
      .createTable('visit_segments')
      .$call(columns.id)
      .$call(required(columns.bigint, 'url_id', 'day', 'first_ms', 'last_ms', 'visits'))
      .addColumn('data', 'text', (c) => c.notNull())
      .execute();
    // A page of a link's visits before an instant: its segments ending at most SEGMENT_SPAN_MS after it.
    await db.schema
      .createIndex('visit_segments_url_last')
      .on('visit_segments')
      .columns(['url_id', 'last_ms'])
      .execute();
    // Keyed by link first (SQLite: the rows in key order, no rowid): a fold takes a few links'
    // segments, statistics read one link's, and a segment costs one row, no index besides.
    await db.schema
      .createTable('visit_unfolded')
      .$call(required(columns.bigint, 'url_id', 'segment_id'))
      .addPrimaryKeyConstraint('visit_unfolded_pk', ['url_id', 'segment_id'])
      .modifyEnd(columns.bigint === 'integer' ? sql`WITHOUT ROWID` : sql``)
      .execute();

    let after: { url_id: number; visited_at_ms: number; id: number } | undefined;
    for (;;) {
      let query = db
        .selectFrom('visits')
        .selectAll()
        .orderBy('url_id')
        .orderBy('visited_at_ms')
        .orderBy('id')
        .limit(CONVERT_VISITS);
      if (after)
        query = query.where(
          sql<boolean>`(url_id, visited_at_ms, id) > (${after.url_id}, ${after.visited_at_ms}, ${after.id})`,
        );
      const rows = await query.execute();
      if (rows.length === 0) break;
      const visits: VisitRecord[] = rows.map((r) => ({
        urlId: Number(r.url_id),
        visitedAt: Number(r.visited_at_ms),
        referrerHost: r.referrer_host,
        browser: r.browser,
        os: r.os,
        device: r.device as DeviceClass,
        bot: Boolean(Number(r.bot)),
        country: r.country,
      }));
      const segments = segmentsOf(visits);
      for (let at = 0; at < segments.length; at += INSERT_SEGMENTS) {
        await db
          .insertInto('visit_segments')
          .values(segments.slice(at, at + INSERT_SEGMENTS))
          .execute();
      }
      const last = rows.at(-1)!;
      after = { url_id: Number(last.url_id), visited_at_ms: Number(last.visited_at_ms), id: Number(last.id) };
    }
    await db.schema.dropTable('visits').execute();
  },
  /** Back to 0070's table, empty: the segments' visits are not turned back into rows. */
  async down(db) {
    await dropIndexes('visit_segments_url_last')(db);
    await db.schema.dropTable('visit_unfolded').execute();
    await db.schema.dropTable('visit_segments').execute();
    await createVisitRows(db, dialectColumns(dialectOf(db)));
  },
};
