import type { EventEnvelope, MessageHeaders } from './events.js';

/** `retrying` while it is re-published automatically, `parked` once it keeps coming back; then an admin decides. */
export type DeadLetterStatus = 'retrying' | 'retried' | 'parked' | 'discarded';

/** What a dead-lettered message carries besides its original headers (the `event.dead_lettered` payload). */
export interface DeadLetterPayload {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly group: string;
  readonly attempts: number;
  readonly error: { readonly name: string; readonly message: string };
  readonly original: EventEnvelope;
  /**
   * The original message's headers (its `event_type`, its trace context). The dead letter's own
   * headers describe the dead letter (`event_type` = `dead_letter`). Absent from dead letters
   * written before this field existed: their own headers were the original's.
   */
  readonly headers?: MessageHeaders;
}

/** A dead letter as the admin API shows it. */
export interface DeadLetter {
  readonly id: number;
  readonly event_id: string;
  readonly event_type: string;
  readonly topic: string;
  readonly partition: number;
  readonly group: string;
  readonly status: DeadLetterStatus;
  readonly attempts: number;
  readonly error: string;
  readonly headers: MessageHeaders;
  readonly envelope: EventEnvelope;
  readonly created_at: string;
  readonly updated_at: string;
  /** While `retrying`: when it is re-published unless an admin decides first (RFC 3339); else null. */
  readonly retry_at: string | null;
}
