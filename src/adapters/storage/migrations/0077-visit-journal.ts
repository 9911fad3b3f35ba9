import { sql } from 'kysely';
import { required } from './columns.js';
import type { SchemaMigration } from './migration.js';

/**
 * The visit journal (src/domain/visit-journal.ts): a flush writes its prepared visits as one row
 * here, and every few seconds the rows are merged into segments, a link's visits of several
 * flushes in one, and deleted. `merged_through` is the link a row is merged through so far (a
 * merge takes several transactions, each of a range of links): a merge interrupted goes on from
 * there, whoever takes it up.
 */
export const visitJournal: SchemaMigration = {
  name: '0077_visit_journal',
  async up(db, columns) {
    await db.schema
      .createTable('visit_journal')
      .$call(columns.id)
      .$call(required(columns.bigint, 'written_at_ms', 'merged_through', 'visits'))
      .addColumn('data', 'text', (c) => c.notNull())
      .execute();
    // Written once, read once and deleted: compressing it would cost more than it saves.
    if (columns.bigint === 'bigint')
      await sql`ALTER TABLE visit_journal ALTER COLUMN data SET STORAGE EXTERNAL`.execute(db);
  },
  async down(db) {
    await db.schema.dropTable('visit_journal').execute();
  },
};
