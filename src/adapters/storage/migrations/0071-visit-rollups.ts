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
      .addPrimaryKeyConstraint('visit_days_pk', ['url_id', 'day'])
      // SQLite: the rows in key order (no rowid), so that a range of one mapping's days is read in place.
      .modifyEnd(bigint === 'integer' ? sql`WITHOUT ROWID` : sql``)
      .execute();
    // Retention deletes by day across mappings.
    await db.schema.createIndex('visit_days_day').on('visit_days').column('day').execute();
  },
  down: dropTables('visit_days'),
};
