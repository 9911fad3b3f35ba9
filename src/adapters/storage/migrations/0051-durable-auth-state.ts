import { sql } from 'kysely';
import { required } from './columns.js';
import { dropTables, type SchemaMigration } from './migration.js';

/** Token revocations and login failures that outlive a restart of the service and of Redis. */
export const durableAuthState: SchemaMigration = {
  name: '0051_durable_auth_state',
  async up(db, { bigint }) {
    await db.schema
      .createTable('auth_revocations')
      .$call(required('text', 'kind', 'id'))
      .$call(required(bigint, 'expires_at_ms'))
      .addPrimaryKeyConstraint('auth_revocations_pkey', ['kind', 'id'])
      .execute();
    await db.schema.createIndex('auth_revocations_expiry').on('auth_revocations').column('expires_at_ms').execute();
    await db.schema
      .createTable('auth_login_failures')
      .addColumn('subject', 'text', (c) => c.primaryKey())
      .addColumn('failures', 'integer', (c) => c.notNull().check(sql`failures > 0`))
      .$call(required(bigint, 'expires_at_ms'))
      .execute();
    await db.schema
      .createIndex('auth_login_failures_expiry')
      .on('auth_login_failures')
      .column('expires_at_ms')
      .execute();
  },
  down: dropTables('auth_login_failures', 'auth_revocations'),
};
