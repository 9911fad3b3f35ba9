import { sql } from 'kysely';
import { required } from './columns.js';
import type { SchemaMigration } from './migration.js';

/** The transactional outbox and the embedded bus's partitioned log, offsets, leases and members. */
export const eventLog: SchemaMigration = {
  name: '0010_event_log',
  async up(db, { bigint, id }) {
    const partition = required('integer', 'partition_no');
    await db.schema
      .createTable('event_outbox')
      .$call(id)
      .$call(required('text', 'topic', 'message_key', 'event_id', 'headers', 'envelope'))
      .$call(required(bigint, 'created_at'))
      .execute();
    await db.schema
      .createTable('event_log')
      .$call(required('text', 'topic'))
      .$call(partition)
      .$call(required(bigint, 'log_offset'))
      .addColumn('message_id', 'text', (c) => c.notNull().unique())
      .$call(required('text', 'headers', 'envelope'))
      .$call(required(bigint, 'created_at'))
      .addPrimaryKeyConstraint('event_log_pk', ['topic', 'partition_no', 'log_offset'])
      .execute();
    await db.schema
      .createTable('event_partitions')
      .$call(required('text', 'topic'))
      .$call(partition)
      .$call(required(bigint, 'next_offset'))
      .addPrimaryKeyConstraint('event_partitions_pk', ['topic', 'partition_no'])
      .execute();
    await db.schema
      .createTable('consumer_offsets')
      .$call(required('text', 'group_name', 'topic'))
      .$call(partition)
      .$call(required(bigint, 'next_offset'))
      .addPrimaryKeyConstraint('consumer_offsets_pk', ['group_name', 'topic', 'partition_no'])
      .execute();
    await db.schema
      .createTable('consumer_leases')
      .$call(required('text', 'group_name', 'topic'))
      .$call(partition)
      .$call(required('text', 'owner'))
      .$call(required(bigint, 'expires_at'))
      .addPrimaryKeyConstraint('consumer_leases_pk', ['group_name', 'topic', 'partition_no'])
      .execute();
    await db.schema
      .createTable('consumer_members')
      .$call(required('text', 'group_name', 'topic', 'member'))
      .$call(required(bigint, 'expires_at'))
      .addPrimaryKeyConstraint('consumer_members_pk', ['group_name', 'topic', 'member'])
      .execute();
    await sql`CREATE INDEX event_log_created_at ON event_log (created_at)`.execute(db);
  },
};
