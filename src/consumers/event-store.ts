import type { Span } from '@opentelemetry/api';
import type { Kysely } from 'kysely';
import type { EventTables } from '../adapters/event-bus/event-tables.js';
import { TOPICS } from '../domain/events.js';
import type { BusMessage } from '../ports/event-bus.js';
import { BatchWriter } from '../support/batch-writer.js';
import type { ConsumerDefinition } from '../services/consumer-runner.js';
import type { AnyKysely } from '../adapters/storage/database.js';
import { PreparedRows } from '../adapters/storage/prepared-query.js';
import { eachInItsOwnTransaction, type TransactionRunner } from '../adapters/event-bus/outbox.js';

export interface EventStoreOptions {
  readonly batchSize: number;
  readonly maxWaitMs: number;
  /** How the batch's transaction runs: on SQLite, in the group commit of the service's writes. */
  readonly transactions?: TransactionRunner;
  readonly clock?: () => number;
}

/** The execution an event belongs to, when it names one. */
function executionIdOf(message: BusMessage): string | null {
  const payload = message.envelope.payload as { execution_id?: unknown } | null;
  return typeof payload?.execution_id === 'string' ? payload.execution_id : null;
}

/**
 * Persists every event of every topic, in batches, once per event id (a redelivery or a
 * re-published retry is stored once). Order does not matter to it, so the bus hands it a
 * partition's messages a batch at a time, and the batch is one transaction of a few statements.
 */
export function eventStoreConsumer(db: AnyKysely, options: EventStoreOptions): ConsumerDefinition {
  const store = db as Kysely<EventTables>;
  const now = options.clock ?? Date.now;
  const transactions = options.transactions ?? eachInItsOwnTransaction;
  // Built once for a few batch sizes: a statement of its own for every size would be prepared anew.
  const insert = new PreparedRows<EventTables, EventTables['event_store']>(store, [100, 10, 1], (db, count, slot) =>
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
  const writer = new BatchWriter<{ message: BusMessage; span: Span }>(
    async (items) => {
      const storedAt = now();
      const rows = items.map(({ message }) => ({
        event_id: message.envelope.event_id,
        event_type: message.envelope.event_type,
        event_version: message.envelope.event_version,
        topic: message.topic,
        partition_no: message.partition,
        log_offset: message.offset,
        execution_id: executionIdOf(message),
        service: message.envelope.service,
        occurred_at: message.envelope.occurred_at,
        payload: JSON.stringify(message.envelope.payload),
        headers: JSON.stringify(message.headers),
        stored_at: storedAt,
      }));
      await transactions(store, (trx) => insert.run(trx, rows));
      for (const { message, span } of items) {
        if (!span.isRecording()) continue;
        const executionId = executionIdOf(message);
        span.setAttributes({
          'event.id': message.envelope.event_id,
          'event.type': message.envelope.event_type,
          'event_store.batch_size': items.length,
          ...(executionId ? { 'execution.id': executionId } : {}),
        });
      }
    },
    options.batchSize,
    options.maxWaitMs,
  );
  return {
    group: 'event-store',
    topics: [TOPICS.url, TOPICS.execution, TOPICS.notification, TOPICS.deadLetter],
    ordered: false,
    handle: (message, span) => writer.add({ message, span }),
  };
}

/** Deletes stored events and delivered log entries older than the retention. */
export async function pruneEvents(db: AnyKysely, olderThan: number): Promise<void> {
  const store = db as Kysely<EventTables>;
  await store.deleteFrom('event_store').where('stored_at', '<', olderThan).execute();
  await store.deleteFrom('event_log').where('created_at', '<', olderThan).execute();
}
