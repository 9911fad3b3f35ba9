import { sql } from 'kysely';
import { dropTables, type SchemaMigration } from './migration.js';

/**
 * Click flushes add here instead of updating `url_mappings` rows all over its B-tree; compaction
 * folds these into `click_count` now and then (KyselyUrlMappingRepository).
 */
export const urlClickDeltas: SchemaMigration = {
  name: '0040_url_click_deltas',
  async up(db, { bigint }) {
    await db.schema
      .createTable('url_click_deltas')
      .addColumn('url_id', bigint, (c) => c.primaryKey())
      .addColumn('delta', bigint, (c) => c.notNull().check(sql`delta > 0`))
      .execute();
  },
  down: dropTables('url_click_deltas'),
};
