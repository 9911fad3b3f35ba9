import { dropTables, type SchemaMigration } from './migration.js';

/**
 * The last click chunk each click buffer (`writer`, one per process start) has written, so that
 * a chunk written again is added once: a flush whose commit went through but whose answer was
 * lost (the connection dropped during COMMIT) used to be retried and its clicks counted twice.
 * A buffer writes its chunks one at a time in `seq` order and writes a chunk that failed again
 * before any later one, so `last_seq` at or past a chunk's `seq` means it is in. One row a
 * process start; rows not written for a week are forgotten (`written_at`, ms since the epoch).
 */
export const clickWriters: SchemaMigration = {
  name: '0080_click_writers',
  async up(db, { bigint }) {
    await db.schema
      .createTable('click_writers')
      .addColumn('writer', 'text', (c) => c.primaryKey())
      .addColumn('last_seq', bigint, (c) => c.notNull())
      .addColumn('written_at', bigint, (c) => c.notNull())
      .execute();
  },
  down: dropTables('click_writers'),
};
