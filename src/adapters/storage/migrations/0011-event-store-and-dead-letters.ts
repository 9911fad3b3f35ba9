import { sql } from 'kysely';
import { required } from './columns.js';
import type { SchemaMigration } from './migration.js';

/** Every event as the event store consumer keeps it, and the dead letters. */
export const eventStoreAndDeadLetters: SchemaMigration = {
  name: '0011_event_store_and_dead_letters',
  async up(db, { bigint, id }) {
    await db.schema
      .createTable('event_store')
      .addColumn('event_id', 'text', (c) => c.primaryKey())
      .$call(required('text', 'event_type'))
      .$call(required('integer', 'event_version'))
      .$call(required('text', 'topic'))
      .$call(required('integer', 'partition_no'))
      .$call(required(bigint, 'log_offset'))
      .addColumn('execution_id', 'text')
      .$call(required('text', 'service', 'occurred_at', 'payload', 'headers'))
      .$call(required(bigint, 'stored_at'))
      .execute();
    await sql`CREATE INDEX event_store_execution ON event_store (execution_id)`.execute(db);
    await sql`CREATE INDEX event_store_stored_at ON event_store (stored_at)`.execute(db);
    await db.schema
      .createTable('dead_letters')
      .$call(id)
      .addColumn('dlq_event_id', 'text', (c) => c.notNull().unique())
      .$call(required('text', 'event_id', 'event_type', 'topic'))
      .$call(required('integer', 'partition_no'))
      .$call(required('text', 'group_name', 'headers', 'envelope', 'error'))
      .$call(required('integer', 'attempts'))
      .$call(required('text', 'status'))
      .$call(required(bigint, 'created_at', 'updated_at'))
      .execute();
    await sql`CREATE INDEX dead_letters_event ON dead_letters (event_id, group_name)`.execute(db);
  },
};
