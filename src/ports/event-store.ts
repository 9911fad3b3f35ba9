import type { EventEnvelope, MessageHeaders } from '../domain/events.js';
import type { BusMessage } from './event-bus.js';

/** What the store keeps of a message: where the bus had it, its headers and its envelope. */
export type StorableMessage = Pick<BusMessage, 'topic' | 'partition' | 'offset' | 'headers' | 'envelope'>;

/** One stored event, as it was received. */
export interface StoredEvent {
  readonly event_id: string;
  readonly event_type: string;
  readonly event_version: number;
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  /** The execution the event belongs to, when its payload names one. */
  readonly execution_id: string | null;
  readonly service: string;
  readonly occurred_at: string;
  readonly payload: EventEnvelope['payload'];
  readonly headers: MessageHeaders;
  /** When it was stored, in ms since the epoch: what retention goes by. */
  readonly stored_at: number;
}

/**
 * The permanent record of every event, once per event id: a redelivery or a re-published retry
 * is stored once (the first copy stays). Every adapter passes
 * `test/contract/event-store.contract.test.ts`.
 *
 * @example
 *   await store.append(batch, Date.now()); // one transaction for the batch
 *   await store.prune(Date.now() - retentionMs);
 */
export interface EventStore {
  /** Stores the messages not stored yet, all in one transaction, each marked `storedAt`. */
  append(messages: readonly StorableMessage[], storedAt: number): Promise<void>;
  get(eventId: string): Promise<StoredEvent | undefined>;
  /** Deletes the events stored before `olderThan` (ms since the epoch). */
  prune(olderThan: number): Promise<void>;
}
