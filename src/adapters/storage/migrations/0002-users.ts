import { sql } from 'kysely';
import { dropTables, type SchemaMigration } from './migration.js';

export const users: SchemaMigration = {
  name: '0002_users',
  async up(db, columns) {
    await db.schema
      .createTable('users')
      .$call(columns.id)
      .addColumn('username', 'text', (c) => c.notNull())
      .addColumn('email', 'text', (c) =>
        c
          .notNull()
          .unique()
          .check(sql`email = lower(email)`),
      )
      .addColumn('role', 'text', (c) => c.notNull().check(sql`role IN ('user', 'admin')`))
      .addColumn('password_hash', 'text', (c) => c.notNull())
      .$call(columns.timestamps('created_at', 'updated_at'))
      .execute();
    // Logins match the username exactly; registration refuses one that differs only in case.
    await db.schema
      .createIndex('users_username_lower_key')
      .on('users')
      .unique()
      .expression(sql`lower(username)`)
      .execute();
  },
  down: dropTables('users'),
};
