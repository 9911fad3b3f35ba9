import type { EventEnvelope, MessageHeaders } from '../../../domain/events.js';
import type { PublishedPosition } from '../../../ports/event-bus.js';
import type { EventTables } from '../../storage/schema.js';

/** A row of the log, as the table holds it. */
export type LogRow = EventTables['event_log'];

/** A log entry, with its headers and envelope as objects when this process wrote it (no parsing them back). */
export type LogEntry = LogRow & {
  readonly decoded?: { readonly headers: MessageHeaders; readonly envelope: EventEnvelope };
};

/** One partition of one topic, as a map key. */
export const partitionKey = (topic: string, partition: number) => `${topic}\u0000${partition}`;

export const positionOf = (entry: LogRow): PublishedPosition => ({
  partition: entry.partition_no,
  offset: entry.log_offset,
});
