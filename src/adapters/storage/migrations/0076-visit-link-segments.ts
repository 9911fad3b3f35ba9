import { sql } from 'kysely';
import { required } from './columns.js';
import { dropIndexes, type SchemaMigration } from './migration.js';

/**
 * A link's segments found through `visit_link_segments`, written by the fold, instead of an index
 * on `visit_segments (url_id, last_ms)` written by every flush. An index keyed by link puts each
 * segment a flush writes on another page (one a link), and a page changed is a page written to
 * the WAL whole: that index was most of what writing a segment cost (about three quarters, on
 * SQLite with 200 segments a link). The fold takes a link's segments of several flushes at once,
 * so each of its pages is written once a fold run, not once a flush. The segments not yet folded
 * are found through `visit_unfolded`, keyed by link already. The segments written before are
 * listed here, but for those not yet folded: the fold lists them.
 */
export const visitLinkSegments: SchemaMigration = {
  name: '0076_visit_link_segments',
  async up(db, columns) {
    await db.schema
      .createTable('visit_link_segments')
      .$call(required(columns.bigint, 'url_id', 'last_ms', 'segment_id'))
      .addPrimaryKeyConstraint('visit_link_segments_pk', ['url_id', 'last_ms', 'segment_id'])
      .modifyEnd(columns.bigint === 'integer' ? sql`WITHOUT ROWID` : sql``)
      .execute();
    await sql`INSERT INTO visit_link_segments (url_id, last_ms, segment_id)
      SELECT url_id, last_ms, id FROM visit_segments AS s
      WHERE NOT EXISTS (SELECT 1 FROM visit_unfolded AS u WHERE u.url_id = s.url_id AND u.segment_id = s.id)`.execute(
      db,
    );
    await dropIndexes('visit_segments_url_last')(db);
  },
  async down(db) {
    await db.schema
      .createIndex('visit_segments_url_last')
      .on('visit_segments')
      .columns(['url_id', 'last_ms'])
      .execute();
    await db.schema.dropTable('visit_link_segments').execute();
  },
};
