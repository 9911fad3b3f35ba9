import { type Kysely, sql } from 'kysely';
import type { Dialect } from '../../src/adapters/storage/database.js';
import { migratorFor } from '../../src/adapters/storage/migrations.js';

/**
 * A database as one version of the migrations left it, recorded by `record-migrations.ts`:
 * the statements each migration ran, by name, and the schema they produced.
 */
export interface MigratedDatabaseFixture {
  readonly dialect: Dialect;
  readonly migrations: readonly RecordedMigration[];
  readonly schema: SchemaDescription;
}

export interface RecordedMigration {
  readonly name: string;
  readonly statements: readonly string[];
}

/** What the catalog says about every table, column, constraint and index, in a stable order. */
export type SchemaDescription = readonly Record<string, unknown>[];

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- these read and write any schema
type AnyDb = Kysely<any>;

/** The schema of the database `db` points at (on PostgreSQL its current schema, named neutrally). */
export async function describeSchema(db: AnyDb, dialect: Dialect): Promise<SchemaDescription> {
  if (dialect === 'sqlite') {
    const { rows } = await sql<Record<string, unknown>>`
      SELECT type, name, tbl_name, sql FROM sqlite_master
      WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name`.execute(db);
    return rows;
  }
  const schema = (await sql<{ schema: string }>`SELECT current_schema() AS schema`.execute(db)).rows[0]!.schema;
  const columns = await sql<Record<string, unknown>>`
    SELECT table_name, column_name, ordinal_position, data_type, is_nullable, column_default,
           is_identity, identity_generation
    FROM information_schema.columns WHERE table_schema = ${schema}
    ORDER BY table_name, ordinal_position`.execute(db);
  const constraints = await sql<Record<string, unknown>>`
    SELECT c.relname AS table_name, k.conname, k.contype, pg_get_constraintdef(k.oid) AS definition
    FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = ${schema} ORDER BY c.relname, k.conname`.execute(db);
  const indexes = await sql<{ tablename: string; indexname: string; indexdef: string }>`
    SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = ${schema}
    ORDER BY tablename, indexname`.execute(db);
  const neutral = (text: string) => text.split(`${schema}.`).join('<schema>.');
  return [
    ...columns.rows.map((row) => ({ kind: 'column', ...row })),
    ...constraints.rows.map((row) => ({ kind: 'constraint', ...row })),
    ...indexes.rows.map((row) => ({ kind: 'index', ...row, indexdef: neutral(row.indexdef) })),
  ];
}

/** The statements that ran, from a Kysely `log` hook, split per migration by the migrator's bookkeeping. */
export class MigrationRecorder {
  private readonly done: RecordedMigration[] = [];
  private pending: string[] = [];

  readonly log = (event: { level: string; query: { sql: string; parameters: readonly unknown[] } }): void => {
    if (event.level !== 'query') return;
    const { sql: text, parameters } = event.query;
    if (/^insert into .*"kysely_migration" /.test(text)) {
      this.done.push({ name: String(parameters[0]), statements: this.pending });
      this.pending = [];
      return;
    }
    // Reads (the migrator's and the introspection's), its locks and bookkeeping tables are no
    // migration's work; what the migrations write is.
    // (A statement written as a template literal starts with a line break: it counts too.)
    if (!/^\s*(create|alter|drop|insert|update|delete)\s/i.test(text)) return;
    if (/kysely_migration|^create schema if not exists /i.test(text)) return;
    if (parameters.length > 0) throw new Error(`a migration ran a statement with parameters: ${text}`);
    this.pending.push(text);
  };

  get migrations(): readonly RecordedMigration[] {
    return this.done;
  }
}

/** Kysely's bookkeeping tables, made by the service's migrator given nothing to run. */
async function createBookkeeping(db: AnyDb, dialect: Dialect): Promise<void> {
  const { error } = await (await migratorFor(db, dialect, {})).migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
}

/**
 * Rebuilds, in an empty database, what the recorded migrations made: their statements and the
 * migrator's record of their names. `omit` leaves migrations out, as if the database predated them.
 */
export async function buildFromFixture(
  db: AnyDb,
  fixture: MigratedDatabaseFixture,
  omit: readonly string[] = [],
): Promise<void> {
  await createBookkeeping(db, fixture.dialect);
  const applied = fixture.migrations.filter((m) => !omit.includes(m.name));
  for (const migration of applied) {
    for (const statement of migration.statements) await sql.raw(statement).execute(db);
  }
  // One fixed time: the migrator orders by name, and the time is all it records besides.
  const timestamp = '2026-01-01T00:00:00.000Z';
  for (const { name } of applied) {
    await db.insertInto('kysely_migration').values({ name, timestamp }).execute();
  }
}
