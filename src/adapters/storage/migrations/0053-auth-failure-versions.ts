import { sql } from 'kysely';
import { required } from './columns.js';
import type { SchemaMigration } from './migration.js';

/**
 * A version on each subject's failed logins, and cleared records kept (0 failures) until their
 * window ends. The Redis copy orders copies by the version: a failure's copy that reaches Redis
 * after another instance cleared the failures is refused, where it used to bring the cleared
 * count back for the rest of the window. Existing rows start at version 0; the next change gives
 * the clock's milliseconds times 1,000.
 *
 * PostgreSQL alters the table; SQLite cannot change a CHECK, so the table is built again (the
 * same columns and index, under the same name).
 */
export const authFailureVersions: SchemaMigration = {
  name: '0053_auth_failure_versions',
  async up(db, { bigint }) {
    if (bigint === 'bigint') {
      await sql`ALTER TABLE auth_login_failures
        DROP CONSTRAINT auth_login_failures_failures_check,
        ADD CONSTRAINT auth_login_failures_failures_check CHECK (failures >= 0),
        ADD COLUMN version bigint NOT NULL DEFAULT 0`.execute(db);
      await sql`ALTER TABLE auth_login_failures ALTER COLUMN version DROP DEFAULT`.execute(db);
      return;
    }
    await db.schema
      .createTable('auth_login_failures_next')
      .addColumn('subject', 'text', (c) => c.primaryKey())
      .addColumn('failures', 'integer', (c) => c.notNull().check(sql`failures >= 0`))
      .$call(required(bigint, 'expires_at_ms', 'version'))
      .execute();
    await sql`INSERT INTO auth_login_failures_next (subject, failures, expires_at_ms, version)
      SELECT subject, failures, expires_at_ms, 0 FROM auth_login_failures`.execute(db);
    await db.schema.dropTable('auth_login_failures').execute();
    await db.schema.alterTable('auth_login_failures_next').renameTo('auth_login_failures').execute();
    await db.schema
      .createIndex('auth_login_failures_expiry')
      .on('auth_login_failures')
      .column('expires_at_ms')
      .execute();
  },
};
