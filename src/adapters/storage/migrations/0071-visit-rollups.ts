import { required } from './columns.js';
import { dropTables, type SchemaMigration } from './migration.js';

/**
 * What statistics read instead of the visits (issue 15), added to in the transaction that writes
 * the visits: per mapping and hour (`hour`: Unix hours) the visits and bots; per mapping, UTC day
 * (`day`: Unix days), dimension (`referrer`, `country`, `browser`, `os`, `device`) and value
 * (`''` for unknown) the visits; per mapping and day the distinct visitors.
 */
export const visitRollups: SchemaMigration = {
  name: '0071_visit_rollups',
  async up(db, { bigint }) {
    await db.schema
      .createTable('visit_hourly')
      .$call(required(bigint, 'url_id', 'hour', 'visits', 'bots'))
      .addPrimaryKeyConstraint('visit_hourly_pk', ['url_id', 'hour'])
      .execute();
    await db.schema
      .createTable('visit_daily')
      .$call(required(bigint, 'url_id', 'day'))
      .$call(required('text', 'dimension', 'value'))
      .addColumn('visits', bigint, (c) => c.notNull())
      .addPrimaryKeyConstraint('visit_daily_pk', ['url_id', 'day', 'dimension', 'value'])
      .execute();
    await db.schema
      .createTable('visit_uniques')
      .$call(required(bigint, 'url_id', 'day', 'visitors'))
      .addPrimaryKeyConstraint('visit_uniques_pk', ['url_id', 'day'])
      .execute();
    // Retention deletes by day or hour across mappings.
    await db.schema.createIndex('visit_hourly_hour').on('visit_hourly').column('hour').execute();
    await db.schema.createIndex('visit_daily_day').on('visit_daily').column('day').execute();
    await db.schema.createIndex('visit_uniques_day').on('visit_uniques').column('day').execute();
  },
  down: dropTables('visit_uniques', 'visit_daily', 'visit_hourly'),
};
