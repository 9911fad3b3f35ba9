import { required } from './columns.js';
import { dropTables, type SchemaMigration } from './migration.js';

/** API keys, stored only as the SHA-256 of the key; a user's keys go with the user. */
export const apiKeys: SchemaMigration = {
  name: '0066_api_keys',
  async up(db, columns) {
    await db.schema
      .createTable('api_keys')
      .$call(columns.id)
      .addColumn('user_id', columns.bigint, (c) => c.notNull().references('users.id').onDelete('cascade'))
      .$call(required('text', 'name', 'prefix'))
      .addColumn('key_hash', 'text', (c) => c.notNull().unique())
      .$call(columns.timestamps('created_at'))
      .addColumn('last_used_at', columns.timestamp)
      .addColumn('expires_at', columns.timestamp)
      .addColumn('revoked_at', columns.timestamp)
      .execute();
    await db.schema.createIndex('api_keys_user').on('api_keys').column('user_id').execute();
  },
  down: dropTables('api_keys'),
};
