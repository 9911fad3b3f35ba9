import type { Span } from '@opentelemetry/api';
import { executionIdOf, TOPICS } from '../domain/events.js';
import type { BusMessage } from '../ports/event-bus.js';
import type { EventStore } from '../ports/event-store.js';
import type { ConsumerDefinition } from '../ports/event-consumer.js';
import { BatchWriter } from '../support/batch-writer.js';

export interface EventStoreOptions {
  readonly batchSize: number;
  readonly maxWaitMs: number;
  /**
   * How long a member's unacknowledged batch waits before another member gets it: a worker
   * killed mid-batch would otherwise hold its partitions for the bus's whole ack wait. A batch is
   * written in well under a second, and a repeat is stored once (by event id).
   */
  readonly ackWaitMs?: number;
  readonly clock?: () => number;
}

/**
 * Persists every event of every topic, in batches, once per event id (a redelivery or a
 * re-published retry is stored once). Order does not matter to it, so the bus hands it a
 * partition's messages a batch at a time, and the batch is one transaction of a few statements.
 */
export function eventStoreConsumer(store: EventStore, options: EventStoreOptions): ConsumerDefinition {
  const now = options.clock ?? Date.now;
  const writer = new BatchWriter<{ message: BusMessage; span: Span }>(
    async (items) => {
      await store.append(
        items.map((item) => item.message),
        now(),
      );
      for (const { message, span } of items) {
        if (!span.isRecording()) continue;
        const executionId = executionIdOf(message.envelope);
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
    ...(options.ackWaitMs === undefined ? {} : { ackWaitMs: options.ackWaitMs }),
    handle: (message, span) => writer.add({ message, span }),
  };
}
