import { type Kysely, type Migration, sql } from 'kysely';
import type { Dialect } from '../storage/database.js';

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
    event_id: string;
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
}

export function eventMigrations(dialect: Dialect): Record<string, Migration> {
  const pg = dialect === 'postgres';
  const big = pg ? 'bigint' : 'integer';
  return {
    '0010_event_log': {
      async up(db: Kysely<any>) {
        await db.schema
          .createTable('event_outbox')
          .addColumn('id', big, (c) => (pg ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey().autoIncrement()))
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
          .addColumn('event_id', 'text', (c) => c.notNull().unique())
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
  };
}
