import { type Kysely, type Migration, Migrator, sql } from 'kysely';
import type { Dialect } from './database.js';

/**
 * Schema migrations, in order. Each is written once for both dialects; where the SQL differs
 * (identity columns, timestamp types) the dialect is passed in.
 */
function migrations(dialect: Dialect): Record<string, Migration> {
  const pg = dialect === 'postgres';
  return {
    '0001_url_mappings': {
      async up(db: Kysely<any>) {
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
      async down(db: Kysely<any>) {
        await db.schema.dropTable('url_mappings').execute();
      },
    },
  };
}

export interface MigrationReport {
  readonly applied: readonly string[];
}

/** Brings the schema up to date; safe to run from several processes at once (the migrator locks). */
export async function migrateToLatest(db: Kysely<any>, dialect: Dialect): Promise<MigrationReport> {
  // Kysely looks for its bookkeeping tables by name across schemas; pin it to the one in use
  // so a database that holds several schemas (e.g. one per tenant or test run) migrates each.
  const migrationTableSchema =
    dialect === 'postgres'
      ? (await sql<{ schema: string }>`SELECT current_schema() AS schema`.execute(db)).rows[0]?.schema
      : undefined;
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations(dialect) },
    ...(migrationTableSchema ? { migrationTableSchema } : {}),
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return { applied: (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName) };
}
