import { sql } from 'kysely';
import { required } from './columns.js';
import { dropTables, type SchemaMigration } from './migration.js';

/**
 * What statistics read instead of the visits (issue 15), added to in the transaction that writes
 * the visits: per mapping and hour (`hour`: Unix hours) the visits and bots; per mapping, UTC day
 * (`day`: Unix days), dimension (`referrer`, `country`, `browser`, `os`, `device`) and value
 * (`''` for unknown) the visits, kept three times over: per day (`span` 0), per block of 8 days
 * and per block of 64 days (`span` 3 and 6; `day` the block's first, a multiple of 2^span), so
 * that a year's top lists add up some 40 rows per value rather than 365; per mapping and day the
 * distinct visitors.
 */
export const visitRollups: SchemaMigration = {
  name: '0071_visit_rollups',
  async up(db, { bigint }) {
    // SQLite: the rows in key order (no rowid), so that a range of one mapping's rows is read in place.
    const clustered = bigint === 'integer' ? sql`WITHOUT ROWID` : sql``;
    await db.schema
      .createTable('visit_hourly')
      .$call(required(bigint, 'url_id', 'hour', 'visits', 'bots'))
      .addPrimaryKeyConstraint('visit_hourly_pk', ['url_id', 'hour'])
      .modifyEnd(clustered)
      .execute();
    await db.schema
      .createTable('visit_daily')
      .$call(required(bigint, 'url_id', 'span', 'day'))
      .$call(required('text', 'dimension', 'value'))
      .addColumn('visits', bigint, (c) => c.notNull())
      .addPrimaryKeyConstraint('visit_daily_pk', ['url_id', 'span', 'day', 'dimension', 'value'])
      .modifyEnd(clustered)
      .execute();
    await db.schema
      .createTable('visit_uniques')
      .$call(required(bigint, 'url_id', 'day', 'visitors'))
      .addPrimaryKeyConstraint('visit_uniques_pk', ['url_id', 'day'])
      .modifyEnd(clustered)
      .execute();
    // Retention deletes by day or hour across mappings.
    await db.schema.createIndex('visit_hourly_hour').on('visit_hourly').column('hour').execute();
    await db.schema.createIndex('visit_daily_day').on('visit_daily').column('day').execute();
    await db.schema.createIndex('visit_uniques_day').on('visit_uniques').column('day').execute();
  },
  down: dropTables('visit_uniques', 'visit_daily', 'visit_hourly'),
};
