import type { Kysely, Selectable } from 'kysely';
import { executionIdOf, type EventEnvelope, type MessageHeaders } from '../../domain/events.js';
import type { EventStore, StorableMessage, StoredEvent } from '../../ports/event-store.js';
import type { DatabaseSchema, EventTables } from './schema.js';
import { eachInItsOwnTransaction, type TransactionRunner } from '../event-bus/outbox.js';
import { PreparedRows } from './prepared-query.js';

type Row = EventTables['event_store'];

/** `event_store` in the service's database (SQLite or PostgreSQL). */
export class KyselyEventStore implements EventStore {
  private readonly db: Kysely<DatabaseSchema>;
  private readonly insert: PreparedRows<DatabaseSchema, Row>;

  /** @param transactions how a batch's transaction runs: on SQLite, in the group commit of the service's writes */
  constructor(
    db: Kysely<DatabaseSchema>,
    private readonly transactions: TransactionRunner = eachInItsOwnTransaction,
  ) {
    this.db = db;
    // Built once for each batch size it meets, up to 100 rows a statement.
    this.insert = new PreparedRows<DatabaseSchema, Row>(this.db, 100, (db, count, slot) =>
      db
        .insertInto('event_store')
        .values(
          Array.from({ length: count }, (_, i) => ({
            event_id: slot(i, 'event_id'),
            event_type: slot(i, 'event_type'),
            event_version: slot(i, 'event_version'),
            topic: slot(i, 'topic'),
            partition_no: slot(i, 'partition_no'),
            log_offset: slot(i, 'log_offset'),
            execution_id: slot(i, 'execution_id'),
            service: slot(i, 'service'),
            occurred_at: slot(i, 'occurred_at'),
            payload: slot(i, 'payload'),
            headers: slot(i, 'headers'),
            stored_at: slot(i, 'stored_at'),
          })),
        )
        .onConflict((oc) => oc.column('event_id').doNothing()),
    );
  }

  async append(messages: readonly StorableMessage[], storedAt: number): Promise<void> {
    if (messages.length === 0) return;
    const rows = messages.map((message) => toRow(message, storedAt));
    await this.transactions(this.db, (trx) => this.insert.run(trx, rows));
  }

  async get(eventId: string): Promise<StoredEvent | undefined> {
    const row = await this.db.selectFrom('event_store').selectAll().where('event_id', '=', eventId).executeTakeFirst();
    return row && toStoredEvent(row);
  }

  async prune(olderThan: number): Promise<void> {
    await this.db.deleteFrom('event_store').where('stored_at', '<', olderThan).execute();
  }
}

function toRow({ envelope, topic, partition, offset, headers }: StorableMessage, storedAt: number): Row {
  return {
    event_id: envelope.event_id,
    event_type: envelope.event_type,
    event_version: envelope.event_version,
    topic,
    partition_no: partition,
    log_offset: offset,
    execution_id: executionIdOf(envelope),
    service: envelope.service,
    occurred_at: envelope.occurred_at,
    payload: JSON.stringify(envelope.payload),
    headers: JSON.stringify(headers),
    stored_at: storedAt,
  };
}

function toStoredEvent(row: Selectable<Row>): StoredEvent {
  return {
    event_id: row.event_id,
    event_type: row.event_type,
    event_version: row.event_version,
    topic: row.topic,
    partition: row.partition_no,
    offset: Number(row.log_offset),
    execution_id: row.execution_id,
    service: row.service,
    occurred_at: row.occurred_at,
    payload: JSON.parse(row.payload) as EventEnvelope['payload'],
    headers: JSON.parse(row.headers) as MessageHeaders,
    stored_at: Number(row.stored_at),
  };
}
