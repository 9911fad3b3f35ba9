import { Migrator, sql } from 'kysely';
import type { Dialect, AnyKysely } from './database.js';
import { migrationsFor } from './migrations/index.js';

export interface MigrationReport {
  readonly applied: readonly string[];
}

/**
 * Brings the schema up to date with the migrations in ./migrations/; safe to run from several
 * processes at once (the migrator locks).
 */
export async function migrateToLatest(db: AnyKysely, dialect: Dialect): Promise<MigrationReport> {
  // Kysely looks for its bookkeeping tables by name across schemas; pin it to the one in use
  // so a database that holds several schemas (e.g. one per tenant or test run) migrates each.
  const migrationTableSchema =
    dialect === 'postgres'
      ? (await sql<{ schema: string }>`SELECT current_schema() AS schema`.execute(db)).rows[0]?.schema
      : undefined;
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrationsFor(dialect) },
    // Names are reserved per line of work and each migration stands alone, so one named earlier
    // may reach a database after a later one has run there (a database from before 0040 that
    // already has 0051); it runs then instead of the migrator refusing the database.
    allowUnorderedMigrations: true,
    ...(migrationTableSchema ? { migrationTableSchema } : {}),
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return { applied: (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName) };
}
