import type { Kysely } from 'kysely';
import { PreparedQuery } from '../../storage/prepared-query.js';
import type { DatabaseSchema } from '../../storage/schema.js';
import type { LogRow } from './log-entry.js';

/**
 * The statements of every append and of every position commit, built once: appends are on the
 * write path of every change, commits on the path of every batch a consumer handles.
 */
export function logStatements(db: Kysely<DatabaseSchema>) {
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
    insertEntry: new PreparedQuery<DatabaseSchema, unknown, LogRow>(db, (db, p) =>
      db.insertInto('event_log').values({
        topic: p('topic'),
        partition_no: p('partition_no'),
        log_offset: p('log_offset'),
        message_id: p('message_id'),
        headers: p('headers'),
        envelope: p('envelope'),
        created_at: p('created_at'),
      }),
    ),
  };
}

export type LogStatements = ReturnType<typeof logStatements>;
