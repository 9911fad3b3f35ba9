import { type Migration, sql } from 'kysely';
import type { Dialect, AnyKysely } from '../storage/database.js';

/**
 * Tables of the embedded event log and of the transactional outbox. Times are Unix milliseconds.
 */
export interface EventTables {
  /** Events waiting to be handed to the bus; written in the same transaction as the change. */
  event_outbox: {
    id: import('kysely').Generated<number>;
    topic: string;
    message_key: string;
    event_id: string;
    headers: string;
    envelope: string;
    created_at: number;
  };
  /** The embedded bus: an append-only log split into partitions. */
  event_log: {
    topic: string;
    partition_no: number;
    log_offset: number;
    /** The envelope's event id, or the id a deliberate re-publication was given. */
    message_id: string;
    headers: string;
    envelope: string;
    created_at: number;
  };
  /** The next offset to assign, per partition (the row lock orders concurrent publishers). */
  event_partitions: { topic: string; partition_no: number; next_offset: number };
  /** Per consumer group and partition: the next offset to deliver. */
  consumer_offsets: { group_name: string; topic: string; partition_no: number; next_offset: number };
  /** Which member of a group holds a partition, until when. Also used for the outbox relay. */
  consumer_leases: { group_name: string; topic: string; partition_no: number; owner: string; expires_at: number };
  /** Live members of a group, refreshed by heartbeat; the partitions are shared among them. */
  consumer_members: { group_name: string; topic: string; member: string; expires_at: number };
  /** Every event, persisted by the event store consumer; one row per event id. */
  event_store: {
    event_id: string;
    event_type: string;
    event_version: number;
    topic: string;
    partition_no: number;
    log_offset: number;
    execution_id: string | null;
    service: string;
    occurred_at: string;
    payload: string;
    headers: string;
    stored_at: number;
  };
  /** Dead-lettered messages, as the dead-letter manager received them. */
  dead_letters: {
    id: import('kysely').Generated<number>;
    dlq_event_id: string;
    event_id: string;
    event_type: string;
    topic: string;
    partition_no: number;
    group_name: string;
    headers: string;
    envelope: string;
    error: string;
    attempts: number;
    status: 'retrying' | 'retried' | 'parked' | 'discarded';
    created_at: number;
    updated_at: number;
  };
}

export function eventMigrations(dialect: Dialect): Record<string, Migration> {
  const pg = dialect === 'postgres';
  const big = pg ? 'bigint' : 'integer';
  return {
    '0010_event_log': {
      async up(db: AnyKysely) {
        await db.schema
          .createTable('event_outbox')
          .addColumn('id', big, (c) =>
            pg ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey().autoIncrement(),
          )
          .addColumn('topic', 'text', (c) => c.notNull())
          .addColumn('message_key', 'text', (c) => c.notNull())
          .addColumn('event_id', 'text', (c) => c.notNull())
          .addColumn('headers', 'text', (c) => c.notNull())
          .addColumn('envelope', 'text', (c) => c.notNull())
          .addColumn('created_at', big, (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('event_log')
          .addColumn('topic', 'text', (c) => c.notNull())
          .addColumn('partition_no', 'integer', (c) => c.notNull())
          .addColumn('log_offset', big, (c) => c.notNull())
          .addColumn('message_id', 'text', (c) => c.notNull().unique())
          .addColumn('headers', 'text', (c) => c.notNull())
          .addColumn('envelope', 'text', (c) => c.notNull())
          .addColumn('created_at', big, (c) => c.notNull())
          .addPrimaryKeyConstraint('event_log_pk', ['topic', 'partition_no', 'log_offset'])
          .execute();
        await db.schema
          .createTable('event_partitions')
          .addColumn('topic', 'text', (c) => c.notNull())
          .addColumn('partition_no', 'integer', (c) => c.notNull())
          .addColumn('next_offset', big, (c) => c.notNull())
          .addPrimaryKeyConstraint('event_partitions_pk', ['topic', 'partition_no'])
          .execute();
        await db.schema
          .createTable('consumer_offsets')
          .addColumn('group_name', 'text', (c) => c.notNull())
          .addColumn('topic', 'text', (c) => c.notNull())
          .addColumn('partition_no', 'integer', (c) => c.notNull())
          .addColumn('next_offset', big, (c) => c.notNull())
          .addPrimaryKeyConstraint('consumer_offsets_pk', ['group_name', 'topic', 'partition_no'])
          .execute();
        await db.schema
          .createTable('consumer_leases')
          .addColumn('group_name', 'text', (c) => c.notNull())
          .addColumn('topic', 'text', (c) => c.notNull())
          .addColumn('partition_no', 'integer', (c) => c.notNull())
          .addColumn('owner', 'text', (c) => c.notNull())
          .addColumn('expires_at', big, (c) => c.notNull())
          .addPrimaryKeyConstraint('consumer_leases_pk', ['group_name', 'topic', 'partition_no'])
          .execute();
        await db.schema
          .createTable('consumer_members')
          .addColumn('group_name', 'text', (c) => c.notNull())
          .addColumn('topic', 'text', (c) => c.notNull())
          .addColumn('member', 'text', (c) => c.notNull())
          .addColumn('expires_at', big, (c) => c.notNull())
          .addPrimaryKeyConstraint('consumer_members_pk', ['group_name', 'topic', 'member'])
          .execute();
        await sql`CREATE INDEX event_log_created_at ON event_log (created_at)`.execute(db);
      },
    },
    '0011_event_store_and_dead_letters': {
      async up(db: AnyKysely) {
        await db.schema
          .createTable('event_store')
          .addColumn('event_id', 'text', (c) => c.primaryKey())
          .addColumn('event_type', 'text', (c) => c.notNull())
          .addColumn('event_version', 'integer', (c) => c.notNull())
          .addColumn('topic', 'text', (c) => c.notNull())
          .addColumn('partition_no', 'integer', (c) => c.notNull())
          .addColumn('log_offset', big, (c) => c.notNull())
          .addColumn('execution_id', 'text')
          .addColumn('service', 'text', (c) => c.notNull())
          .addColumn('occurred_at', 'text', (c) => c.notNull())
          .addColumn('payload', 'text', (c) => c.notNull())
          .addColumn('headers', 'text', (c) => c.notNull())
          .addColumn('stored_at', big, (c) => c.notNull())
          .execute();
        await sql`CREATE INDEX event_store_execution ON event_store (execution_id)`.execute(db);
        await sql`CREATE INDEX event_store_stored_at ON event_store (stored_at)`.execute(db);
        await db.schema
          .createTable('dead_letters')
          .addColumn('id', big, (c) =>
            pg ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey().autoIncrement(),
          )
          .addColumn('dlq_event_id', 'text', (c) => c.notNull().unique())
          .addColumn('event_id', 'text', (c) => c.notNull())
          .addColumn('event_type', 'text', (c) => c.notNull())
          .addColumn('topic', 'text', (c) => c.notNull())
          .addColumn('partition_no', 'integer', (c) => c.notNull())
          .addColumn('group_name', 'text', (c) => c.notNull())
          .addColumn('headers', 'text', (c) => c.notNull())
          .addColumn('envelope', 'text', (c) => c.notNull())
          .addColumn('error', 'text', (c) => c.notNull())
          .addColumn('attempts', 'integer', (c) => c.notNull())
          .addColumn('status', 'text', (c) => c.notNull())
          .addColumn('created_at', big, (c) => c.notNull())
          .addColumn('updated_at', big, (c) => c.notNull())
          .execute();
        await sql`CREATE INDEX dead_letters_event ON dead_letters (event_id, group_name)`.execute(db);
      },
    },
  };
}
