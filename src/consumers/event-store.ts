import type { Span } from '@opentelemetry/api';
import type { Kysely } from 'kysely';
import type { EventTables } from '../adapters/event-bus/event-tables.js';
import { TOPICS } from '../domain/events.js';
import type { BusMessage } from '../ports/event-bus.js';
import { BatchWriter } from '../services/batch-writer.js';
import type { ConsumerDefinition } from '../services/consumer-runner.js';
import type { AnyKysely } from '../adapters/storage/database.js';
import { PreparedQuery } from '../adapters/storage/prepared-query.js';

export interface EventStoreOptions {
  readonly batchSize: number;
  readonly maxWaitMs: number;
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
 * partition's messages a batch at a time, and the batch is one transaction.
 */
export function eventStoreConsumer(db: AnyKysely, options: EventStoreOptions): ConsumerDefinition {
  const store = db as Kysely<EventTables>;
  const now = options.clock ?? Date.now;
  // One prepared row statement, run for each event in one transaction: a multi-row insert would
  // be a different statement for every batch size, each prepared anew.
  const insert = new PreparedQuery<EventTables, unknown, EventTables['event_store']>(store, (db, p) =>
    db
      .insertInto('event_store')
      .values({
        event_id: p('event_id'),
        event_type: p('event_type'),
        event_version: p('event_version'),
        topic: p('topic'),
        partition_no: p('partition_no'),
        log_offset: p('log_offset'),
        execution_id: p('execution_id'),
        service: p('service'),
        occurred_at: p('occurred_at'),
        payload: p('payload'),
        headers: p('headers'),
        stored_at: p('stored_at'),
      })
      .onConflict((oc) => oc.column('event_id').doNothing()),
  );
  const writer = new BatchWriter<{ message: BusMessage; span: Span }>(
    async (items) => {
      const storedAt = now();
      await store.transaction().execute(async (trx) => {
        for (const { message } of items) {
          await insert.run(trx, {
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
          });
        }
      });
      for (const { message, span } of items) {
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
