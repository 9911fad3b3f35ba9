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
  /** A `retrying` letter's: when its automatic re-publication is due (ms since the epoch). */
  readonly retry_at?: number;
  /** A `retrying` letter's: the trace context its re-publication continues (the deciding span's headers). */
  readonly retry_context?: MessageHeaders;
}

/** A `retrying` letter taken for its automatic re-publication, with the context to publish it in. */
export interface ClaimedRetry {
  readonly letter: DeadLetter;
  /** The deciding span's headers; absent for letters recorded before they were kept. */
  readonly context: MessageHeaders | undefined;
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
 *
 * A `retrying` letter's re-publication is due at its `retry_at`: any instance may take it
 * (`claimRetry`, which moves `retry_at` on to the end of its claim, so a claimant that dies leaves
 * it due again), and only while it is still `retrying`: an admin's decision in the meantime
 * (discarded, retried by hand) stands.
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
  /** Sets `to` only if the letter is still `from`; whether it was. */
  changeStatus(id: number, from: DeadLetterStatus, to: DeadLetterStatus, now: number): Promise<boolean>;
  /** Ids of `retrying` letters due at `now` (`retry_at` passed, or none recorded), the longest due first. */
  due(now: number, limit: number): Promise<number[]>;
  /**
   * Takes letter `id` for its re-publication if it is `retrying` and due at `now`: its `retry_at`
   * becomes `until`. Undefined when it is not (another instance took it, or an admin decided).
   */
  claimRetry(id: number, now: number, until: number): Promise<ClaimedRetry | undefined>;
  /** Moves a `retrying` letter's re-publication to `at` (one that failed is tried again then). */
  reschedule(id: number, at: number): Promise<void>;
}
