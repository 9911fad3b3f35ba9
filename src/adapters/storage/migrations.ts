import { type Migration, Migrator, sql } from 'kysely';
import type { Dialect, AnyKysely } from './database.js';
import { migrationsFor } from './migrations/index.js';

export interface MigrationReport {
  readonly applied: readonly string[];
}

/**
 * Kysely's migrator for `db`, with `migrations` (this service's, by default). Its bookkeeping
 * tables are pinned to the schema in use: Kysely looks for them by name across schemas, and a
 * PostgreSQL database may hold several (one per tenant or test run), each migrated on its own.
 */
export async function migratorFor(
  db: AnyKysely,
  dialect: Dialect,
  migrations: Record<string, Migration> = migrationsFor(dialect),
): Promise<Migrator> {
  const migrationTableSchema =
    dialect === 'postgres'
      ? (await sql<{ schema: string }>`SELECT current_schema() AS schema`.execute(db)).rows[0]?.schema
      : undefined;
  return new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    // Names are reserved per line of work and each migration stands alone, so one named earlier
    // may reach a database after a later one has run there (a database from before 0040 that
    // already has 0051); it runs then instead of the migrator refusing the database.
    allowUnorderedMigrations: true,
    ...(migrationTableSchema ? { migrationTableSchema } : {}),
  });
}

/**
 * Brings the schema up to date with the migrations in ./migrations/; safe to run from several
 * processes at once (the migrator locks).
 */
export async function migrateToLatest(db: AnyKysely, dialect: Dialect): Promise<MigrationReport> {
  const { error, results } = await (await migratorFor(db, dialect)).migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return { applied: (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName) };
}
