import type { Kysely } from 'kysely';
import { PreparedQuery, PreparedRows } from '../../storage/prepared-query.js';
import type { DatabaseSchema } from '../../storage/schema.js';
import type { LogRow } from './log-entry.js';

/**
 * The statements of every append, read and position commit, built once: appends are on the
 * write path of every change, reads and commits on the path of every batch a consumer handles.
 */
export function logStatements(db: Kysely<DatabaseSchema>) {
  return { ...offsetStatements(db), ...entryStatements(db) };
}

/** The partitions' offsets (taken by appends) and the groups' positions (committed by consumers). */
function offsetStatements(db: Kysely<DatabaseSchema>) {
  return {
    takeOffset: new PreparedQuery(db, (db, p) =>
      db
        .updateTable('event_partitions')
        .set((eb) => ({ next_offset: eb('next_offset', '+', 1) }))
        .where('topic', '=', p('topic'))
        .where('partition_no', '=', p('partition'))
        .returning('next_offset'),
    ),
    /** Takes `count` offsets at once (the appends of a batch): the first is the returned value − count. */
    takeOffsets: new PreparedQuery(db, (db, p) =>
      db
        .updateTable('event_partitions')
        .set((eb) => ({ next_offset: eb('next_offset', '+', p('count')) }))
        .where('topic', '=', p('topic'))
        .where('partition_no', '=', p('partition'))
        .returning('next_offset'),
    ),
    advanceOffset: new PreparedQuery(db, (db, p) =>
      db
        .updateTable('event_partitions')
        .set({ next_offset: p('next') })
        .where('topic', '=', p('topic'))
        .where('partition_no', '=', p('partition'))
        .where('next_offset', '=', p('expected')),
    ),
    createPartition: new PreparedQuery(db, (db, p) =>
      db
        .insertInto('event_partitions')
        .values({ topic: p('topic'), partition_no: p('partition'), next_offset: 0 })
        .onConflict((oc) => oc.columns(['topic', 'partition_no']).doNothing()),
    ),
    commitPosition: new PreparedQuery(db, (db, p) =>
      db
        .updateTable('consumer_offsets')
        .set({ next_offset: p('next_offset') })
        .where('group_name', '=', p('group_name'))
        .where('topic', '=', p('topic'))
        .where('partition_no', '=', p('partition')),
    ),
  };
}

/** The log's entries: appended one at a time or a batch at a time, and read by consumers. */
function entryStatements(db: Kysely<DatabaseSchema>) {
  return {
    /** A consumer's next batch of a partition, from `next` on. */
    readEntries: new PreparedQuery<
      DatabaseSchema,
      LogRow,
      { topic: string; partition: number; next: number; limit: number }
    >(db, (db, p) =>
      db
        .selectFrom('event_log')
        .selectAll()
        .where('topic', '=', p('topic'))
        .where('partition_no', '=', p('partition'))
        .where('log_offset', '>=', p('next'))
        .orderBy('log_offset')
        .limit(p('limit')),
    ),
    /** Entries, one (a publish) or a batch (the outbox's appends): one statement for up to 100 rows. */
    insertEntries: new PreparedRows<DatabaseSchema, LogRow>(db, 100, (db, count, slot) =>
      db.insertInto('event_log').values(
        Array.from({ length: count }, (_, i) => ({
          topic: slot(i, 'topic'),
          partition_no: slot(i, 'partition_no'),
          log_offset: slot(i, 'log_offset'),
          message_id: slot(i, 'message_id'),
          headers: slot(i, 'headers'),
          envelope: slot(i, 'envelope'),
          created_at: slot(i, 'created_at'),
        })),
      ),
    ),
  };
}

export type LogStatements = ReturnType<typeof logStatements>;
