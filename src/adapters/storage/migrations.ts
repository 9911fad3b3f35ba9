import { type Migration, Migrator, sql } from 'kysely';
import { eventMigrations } from '../event-bus/event-tables.js';
import { executionMigrations } from './kysely-execution-repository.js';
import { notificationMigrations } from './kysely-notification-repository.js';
import type { Dialect, AnyKysely } from './database.js';

/**
 * Schema migrations, in order. Each is written once for both dialects; where the SQL differs
 * (identity columns, timestamp types) the dialect is passed in.
 */
function migrations(dialect: Dialect): Record<string, Migration> {
  const pg = dialect === 'postgres';
  return {
    // Other concerns keep their migrations beside their adapters; names order them.
    ...eventMigrations(dialect),
    ...executionMigrations(dialect),
    ...notificationMigrations(dialect),
    '0001_url_mappings': {
      async up(db: AnyKysely) {
        await db.schema
          .createTable('url_mappings')
          .addColumn('id', pg ? 'bigint' : 'integer', (c) =>
            pg ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey().autoIncrement(),
          )
          .addColumn('code', 'text', (c) => c.notNull().unique())
          .addColumn('url', 'text', (c) => c.notNull())
          .addColumn('created_at', pg ? 'timestamptz' : 'text', (c) => c.notNull())
          .addColumn('click_count', pg ? 'bigint' : 'integer', (c) =>
            c
              .notNull()
              .defaultTo(0)
              .check(sql`click_count >= 0`),
          )
          .execute();
      },
      async down(db: AnyKysely) {
        await db.schema.dropTable('url_mappings').execute();
      },
    },
    '0002_users': {
      async up(db: AnyKysely) {
        await db.schema
          .createTable('users')
          .addColumn('id', pg ? 'bigint' : 'integer', (c) =>
            pg ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey().autoIncrement(),
          )
          .addColumn('username', 'text', (c) => c.notNull())
          .addColumn('email', 'text', (c) =>
            c
              .notNull()
              .unique()
              .check(sql`email = lower(email)`),
          )
          .addColumn('role', 'text', (c) => c.notNull().check(sql`role IN ('user', 'admin')`))
          .addColumn('password_hash', 'text', (c) => c.notNull())
          .addColumn('created_at', pg ? 'timestamptz' : 'text', (c) => c.notNull())
          .addColumn('updated_at', pg ? 'timestamptz' : 'text', (c) => c.notNull())
          .execute();
        // Logins match the username exactly; registration refuses one that differs only in case.
        await db.schema
          .createIndex('users_username_lower_key')
          .on('users')
          .unique()
          .expression(sql`lower(username)`)
          .execute();
      },
      async down(db: AnyKysely) {
        await db.schema.dropTable('users').execute();
      },
    },
    '0003_settings': {
      async up(db: AnyKysely) {
        await db.schema
          .createTable('settings')
          .addColumn('key', 'text', (c) => c.primaryKey())
          .addColumn('value', 'text', (c) => c.notNull())
          .addColumn('updated_at', pg ? 'timestamptz' : 'text', (c) => c.notNull())
          .execute();
      },
      async down(db: AnyKysely) {
        await db.schema.dropTable('settings').execute();
      },
    },
    // Click flushes add here instead of updating `url_mappings` rows all over its B-tree;
    // compaction folds these into `click_count` now and then (KyselyUrlMappingRepository).
    '0040_url_click_deltas': {
      async up(db: AnyKysely) {
        await db.schema
          .createTable('url_click_deltas')
          .addColumn('url_id', pg ? 'bigint' : 'integer', (c) => c.primaryKey())
          .addColumn('delta', pg ? 'bigint' : 'integer', (c) => c.notNull().check(sql`delta > 0`))
          .execute();
      },
      async down(db: AnyKysely) {
        await db.schema.dropTable('url_click_deltas').execute();
      },
    },
  };
}

export interface MigrationReport {
  readonly applied: readonly string[];
}

/** Brings the schema up to date; safe to run from several processes at once (the migrator locks). */
export async function migrateToLatest(db: AnyKysely, dialect: Dialect): Promise<MigrationReport> {
  // Kysely looks for its bookkeeping tables by name across schemas; pin it to the one in use
  // so a database that holds several schemas (e.g. one per tenant or test run) migrates each.
  const migrationTableSchema =
    dialect === 'postgres'
      ? (await sql<{ schema: string }>`SELECT current_schema() AS schema`.execute(db)).rows[0]?.schema
      : undefined;
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations(dialect) },
    // A migration missing from a database that has later ones is applied, not refused (changes
    // developed side by side get their names in advance and may reach a database in any order).
    allowUnorderedMigrations: true,
    ...(migrationTableSchema ? { migrationTableSchema } : {}),
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return { applied: (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName) };
}
