import type { AnyKysely } from '../database.js';
import { type DialectColumns, required } from './columns.js';
import { dropTables, type SchemaMigration } from './migration.js';

/**
 * One row per counted redirect (issue 15): no address and no full `User-Agent`, only what was
 * derived from them. `visited_at_ms` is Unix milliseconds. No foreign key: a deleted mapping's
 * visits are not read any more (ids are never reused) and go with retention. `visit_batches`
 * holds the id of each batch a flush wrote, for a day, so that a batch retried after a commit
 * whose answer was lost is not written twice. No index on the time alone: retention walks the
 * oldest ids (ids follow the times a flush interval apart, see the repository's `prune`), so a
 * visit costs one index besides its row.
 */
export const visits: SchemaMigration = {
  name: '0070_visits',
  async up(db, columns) {
    await createVisitRows(db, columns);
    await db.schema
      .createTable('visit_batches')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('written_at_ms', columns.bigint, (c) => c.notNull())
      .execute();
  },
  down: dropTables('visit_batches', 'visits'),
};

/** The table of a row per visit and its index (also what 0075's `down` puts back). */
export async function createVisitRows(db: AnyKysely, columns: DialectColumns): Promise<void> {
  await db.schema
    .createTable('visits')
    .$call(columns.id)
    .$call(required(columns.bigint, 'url_id', 'visited_at_ms'))
    .addColumn('referrer_host', 'text')
    .addColumn('browser', 'text')
    .addColumn('os', 'text')
    .addColumn('device', 'text', (c) => c.notNull())
    .addColumn('bot', 'integer', (c) => c.notNull())
    .addColumn('country', 'text')
    .execute();
  await db.schema.createIndex('visits_url_time').on('visits').columns(['url_id', 'visited_at_ms', 'id']).execute();
}
