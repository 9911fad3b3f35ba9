import { sql } from 'kysely';
import { required } from './columns.js';
import { dropTables, type SchemaMigration } from './migration.js';

/**
 * What statistics read instead of the visits (issue 15): one row per mapping and UTC day (`day`:
 * Unix days) whose `data` holds everything the statistics need of that day (src/domain/visit-day.ts:
 * visits and bots per hour, visits per dimension value, a HyperLogLog sketch of the visitors), read,
 * added to and written back in the transaction that writes the visits.
 */
export const visitRollups: SchemaMigration = {
  name: '0071_visit_rollups',
  async up(db, { bigint }) {
    await db.schema
      .createTable('visit_days')
      .$call(required(bigint, 'url_id', 'day'))
      .addColumn('data', 'text', (c) => c.notNull())
      // Day first: a flush adds to today's rows of many links, which are then side by side (a few
      // pages written, not one per link); statistics read a link's days one key each; retention
      // deletes a prefix.
      .addPrimaryKeyConstraint('visit_days_pk', ['day', 'url_id'])
      // SQLite: the rows in key order (no rowid).
      .modifyEnd(bigint === 'integer' ? sql`WITHOUT ROWID` : sql``)
      .execute();
  },
  down: dropTables('visit_days'),
};
