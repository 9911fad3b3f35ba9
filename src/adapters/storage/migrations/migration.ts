import type { AnyKysely } from '../database.js';
import type { DialectColumns } from './columns.js';

/**
 * One schema change, written once for both dialects. Kysely records it by `name` once it has run,
 * so a released migration keeps its name and its statements; a change to the schema is a new one.
 */
export interface SchemaMigration {
  /** Reserved per line of work (0010 events, 0020 executions, …): they may land out of order. */
  readonly name: string;
  up(db: AnyKysely, columns: DialectColumns): Promise<void>;
  down?(db: AnyKysely): Promise<void>;
}

/** A `down` that drops the tables an `up` created, in the order given. */
export function dropTables(...tables: string[]): (db: AnyKysely) => Promise<void> {
  return async (db) => {
    for (const table of tables) await db.schema.dropTable(table).execute();
  };
}

/** A `down` that drops the indexes an `up` created, in the order given. */
export function dropIndexes(...indexes: string[]): (db: AnyKysely) => Promise<void> {
  return async (db) => {
    for (const index of indexes) await db.schema.dropIndex(index).execute();
  };
}
