import { sql } from 'kysely';
import type { SchemaMigration } from './migration.js';

/**
 * A journal row's text in a table of its own (`visit_journal_data`, deleted with its row). A
 * merge moves each of its rows' `merged_through` on at every step (a transaction of a few links),
 * and SQLite rewrites a whole row to change one column: with the text in it, a step over ten
 * rows of a few hundred KB each wrote megabytes (and as much again to the WAL) however few links
 * it merged, holding the event loop for up to 13 ms. The text is now written once, read once,
 * and deleted with its row (bench/PROFILE.md).
 */
export const visitJournalData: SchemaMigration = {
  name: '0078_visit_journal_data',
  async up(db, columns) {
    await db.schema
      .createTable('visit_journal_data')
      .addColumn('id', columns.bigint, (c) => c.primaryKey().references('visit_journal.id').onDelete('cascade'))
      .addColumn('data', 'text', (c) => c.notNull())
      .execute();
    // Written once, read once and deleted: compressing it would cost more than it saves.
    if (columns.bigint === 'bigint')
      await sql`ALTER TABLE visit_journal_data ALTER COLUMN data SET STORAGE EXTERNAL`.execute(db);
    await sql`INSERT INTO visit_journal_data (id, data) SELECT id, data FROM visit_journal`.execute(db);
    await db.schema.alterTable('visit_journal').dropColumn('data').execute();
  },
  async down(db) {
    await db.schema
      .alterTable('visit_journal')
      .addColumn('data', 'text', (c) => c.notNull().defaultTo(''))
      .execute();
    await sql`UPDATE visit_journal SET data = (SELECT d.data FROM visit_journal_data d WHERE d.id = visit_journal.id)
      WHERE id IN (SELECT id FROM visit_journal_data)`.execute(db);
    await db.schema.dropTable('visit_journal_data').execute();
  },
};
