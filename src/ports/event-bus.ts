import type { EventEnvelope, MessageHeaders } from '../domain/events.js';

/** A message as a consumer receives it. */
export interface BusMessage {
  readonly topic: string;
  readonly partition: number;
  /** Position in the partition (the embedded log's offset; JetStream's stream sequence). */
  readonly offset: number;
  readonly headers: MessageHeaders;
  readonly envelope: EventEnvelope;
  /** 1 on first delivery; more when redelivered after a failure or a consumer crash. */
  readonly deliveryCount: number;
  /**
   * A heartbeat for a long handler: the message is still being worked on, so the bus must not
   * hand it to another member yet (NATS: an in-progress acknowledgement, restarting the ack
   * wait). Call it more often than the group's ack wait; it never throws.
   */
  inProgress(): void;
}

/** Throwing makes the bus deliver the message again later (at least once). */
export type MessageHandler = (message: BusMessage) => Promise<void>;

export interface SubscribeOptions {
  /** Consumers of one group share the work: each message goes to one of them. */
  readonly group: string;
  readonly topic: string;
  readonly handler: MessageHandler;
  /**
   * Where a group that has never consumed starts: the whole log (default) or only what comes next,
   * that is, everything published once `subscribe` returns, even while the bus is still connecting
   * (on NATS, whose clock may differ from this process's, from a second before).
   */
  readonly startAt?: 'earliest' | 'latest';
  /**
   * False when the handler does not need a partition's messages one after the other (the event
   * store): the bus may then hand over a batch at once. Ordered by default.
   */
  readonly ordered?: boolean;
  /**
   * Unordered, with at most this many messages in the handler at once, each handed over as soon
   * as there is room and acknowledged on its own: one long message holds up nothing but its
   * place (the executor, whose messages last as long as a script runs or waits to run). A place
   * also counts while it is being fetched (NATS: each partition's puller holds one as it waits).
   */
  readonly concurrency?: number;
  /**
   * How long a message may be held without an acknowledgement or `inProgress()` before the bus
   * gives it to another member (NATS: the consumer's ack wait; the embedded log: the group's
   * partition lease, which a live member renews). The bus's default when absent.
   */
  readonly ackWaitMs?: number;
}

export interface Subscription {
  /** Stops taking messages; the one being handled finishes first. */
  close(): Promise<void>;
}

export interface PublishOptions {
  readonly messageId?: string;
  /** Put it in this partition instead of the key's (a re-publication goes back where it came from). */
  readonly partition?: number;
}

export interface OutgoingMessage {
  readonly topic: string;
  readonly key: string;
  readonly headers: MessageHeaders;
  readonly envelope: EventEnvelope;
}

export interface PublishedPosition {
  readonly partition: number;
  readonly offset: number;
}

/**
 * What became of one message given to `publishAll`: where it is stored, or why it is not. A
 * `permanent` failure can never succeed (larger than the broker takes, not encodable); any other
 * is transient (the broker away), and the message may be published again later.
 */
export type PublishOutcome =
  | { readonly position: PublishedPosition; readonly error?: undefined }
  | { readonly position?: undefined; readonly error: Error; readonly permanent: boolean };

/**
 * A durable, partitioned event log with consumer groups: at-least-once delivery, order kept
 * within a partition, redelivery of whatever a crashed consumer had not acknowledged.
 * Every adapter passes `test/contract/event-bus.contract.test.ts`.
 *
 * @example
 *   await bus.publish('url_events', 'abc123', headers, envelope);
 *   const sub = await bus.subscribe({ group: 'event-store', topic: 'url_events', handler });
 */
export interface EventBus {
  readonly partitions: number;
  /** The messaging system, as telemetry names it (`messaging.system`): `nats`, or the embedded log's name. */
  readonly system: string;
  /**
   * Durable once resolved. `key` picks the partition. A repeated message id (by default the
   * envelope's `event_id`) is stored once; a deliberate re-publication passes a new `messageId`.
   * Rejects with an error whose `permanent` is true when the bus can never take the message.
   */
  publish(
    topic: string,
    key: string,
    headers: MessageHeaders,
    envelope: EventEnvelope,
    options?: PublishOptions,
  ): Promise<PublishedPosition>;
  /**
   * Publishes several messages, in order (the outbox relay's batches); never rejects: each
   * message's outcome, in the same order, says whether it is durable, and if not, why.
   */
  publishAll(messages: readonly OutgoingMessage[]): Promise<PublishOutcome[]>;
  subscribe(options: SubscribeOptions): Promise<Subscription>;
  /** Moves `group` so that its next message in `partition` of `topic` is the one at `offset`. */
  seek(group: string, topic: string, partition: number, offset: number): Promise<void>;
  /** Whether the bus answers (readiness). */
  ping(): Promise<void>;
  close(): Promise<void>;
}
