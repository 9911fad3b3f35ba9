import { dropTables, type SchemaMigration } from './migration.js';

export const settings: SchemaMigration = {
  name: '0003_settings',
  async up(db, columns) {
    await db.schema
      .createTable('settings')
      .addColumn('key', 'text', (c) => c.primaryKey())
      .addColumn('value', 'text', (c) => c.notNull())
      .$call(columns.timestamps('updated_at'))
      .execute();
  },
  down: dropTables('settings'),
};
