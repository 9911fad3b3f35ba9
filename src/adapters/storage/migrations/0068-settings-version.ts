import { sql } from 'kysely';
import { dropTables, type SchemaMigration } from './migration.js';

/**
 * One row: a version of the runtime settings, raised in the transaction of every change, so an
 * instance whose counters are its own (no Redis) notices a change made by another by polling it.
 */
export const settingsVersion: SchemaMigration = {
  name: '0068_settings_version',
  async up(db, { bigint }) {
    await db.schema
      .createTable('settings_version')
      .addColumn('version', bigint, (c) => c.notNull())
      .execute();
    await sql`INSERT INTO settings_version (version) VALUES (0)`.execute(db);
  },
  down: dropTables('settings_version'),
};
