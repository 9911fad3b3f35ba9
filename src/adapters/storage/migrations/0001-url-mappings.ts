import { sql } from 'kysely';
import { dropTables, type SchemaMigration } from './migration.js';

export const urlMappings: SchemaMigration = {
  name: '0001_url_mappings',
  async up(db, columns) {
    await db.schema
      .createTable('url_mappings')
      .$call(columns.id)
      .addColumn('code', 'text', (c) => c.notNull().unique())
      .addColumn('url', 'text', (c) => c.notNull())
      .$call(columns.timestamps('created_at'))
      .addColumn('click_count', columns.bigint, (c) =>
        c
          .notNull()
          .defaultTo(0)
          .check(sql`click_count >= 0`),
      )
      .execute();
  },
  down: dropTables('url_mappings'),
};
