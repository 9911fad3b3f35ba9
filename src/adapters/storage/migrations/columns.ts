import type { ColumnDataType, CreateTableBuilder } from 'kysely';
import type { Dialect } from '../database.js';

/** A step that adds columns to a table being created, for `CreateTableBuilder.$call`. */
export type AddColumns<CN extends string> = <TB extends string, C extends string>(
  table: CreateTableBuilder<TB, C>,
) => CreateTableBuilder<TB, C | CN>;

/** The column types and keys the two dialects spell differently; migrations are written once for both. */
export interface DialectColumns {
  /** A 64-bit integer: `bigint` on PostgreSQL; SQLite's `integer` holds 64 bits already. */
  readonly bigint: 'bigint' | 'integer';
  /** An instant: `timestamptz` on PostgreSQL, canonical RFC 3339 text on SQLite. */
  readonly timestamp: 'timestamptz' | 'text';
  /** The generated primary key `id`: an identity column on PostgreSQL, an autoincrement rowid on SQLite. */
  readonly id: AddColumns<'id'>;
  /** Required instants (`created_at`, `updated_at`, …), in the order named. */
  timestamps<CN extends string>(...names: CN[]): AddColumns<CN>;
}

export function dialectColumns(dialect: Dialect): DialectColumns {
  const pg = dialect === 'postgres';
  const bigint = pg ? 'bigint' : 'integer';
  const timestamp = pg ? 'timestamptz' : 'text';
  return {
    bigint,
    timestamp,
    id: (table) =>
      table.addColumn('id', bigint, (c) =>
        pg ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey().autoIncrement(),
      ),
    timestamps: (...names) => required(timestamp, ...names),
  };
}

/** Columns of one type that may not be null, in the order named. */
export function required<CN extends string>(type: ColumnDataType, ...names: CN[]): AddColumns<CN> {
  return <TB extends string, C extends string>(table: CreateTableBuilder<TB, C>) => {
    let built: CreateTableBuilder<TB, C | CN> = table;
    for (const name of names) built = built.addColumn(name, type, (c) => c.notNull());
    return built;
  };
}
