import type { DeadLetter, DeadLetterStatus } from '../domain/dead-letter.js';
import type { EventEnvelope, MessageHeaders } from '../domain/events.js';

/** A dead letter as it is first recorded, from the dead-letter message `dlq_event_id`. */
export interface NewDeadLetter {
  readonly dlq_event_id: string;
  readonly topic: string;
  readonly partition: number;
  readonly group: string;
  readonly headers: MessageHeaders;
  readonly envelope: EventEnvelope;
  /** `Name: message` of the last failure. */
  readonly error: string;
  readonly attempts: number;
  readonly status: DeadLetterStatus;
}

/**
 * What consumers gave up on, one row per dead-letter message, with the original event, headers
 * and the last error; times are ms since the epoch, shown as RFC 3339. Every adapter passes
 * `test/contract/dead-letter-store.contract.test.ts`.
 *
 * @example
 *   const id = await store.record({ dlq_event_id, topic, partition, group, headers, envelope, error, attempts, status: 'parked' }, now);
 *   await store.setStatus(id, 'discarded', now);
 *   await store.list({ status: 'parked', limit: 100 }); // oldest first
 */
export interface DeadLetterStore {
  /** Oldest first; `after` is the id the previous page ended with. */
  list(options: { status?: DeadLetterStatus; limit: number; after?: number }): Promise<DeadLetter[]>;
  get(id: number): Promise<DeadLetter | undefined>;
  /** The letter recorded from the dead-letter message `dlqEventId`, if any (it is being redelivered). */
  findByMessage(dlqEventId: string): Promise<{ id: number; status: DeadLetterStatus } | undefined>;
  /** How many letters other dead-letter messages than `dlqEventId` recorded for `eventId` in `group`. */
  countOthers(eventId: string, group: string, dlqEventId: string): Promise<number>;
  /** Records it at `now`; returns its id. A second record of one `dlq_event_id` is refused. */
  record(letter: NewDeadLetter, now: number): Promise<number>;
  setStatus(id: number, status: DeadLetterStatus, now: number): Promise<void>;
}
