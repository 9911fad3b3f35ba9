/**
 * Counters of the event backbone: what the bus took, what consumers handled, failed and gave up
 * on, and what was re-published. Every adapter passes `test/contract/event-metrics.contract.test.ts`.
 *
 * @example
 *   metrics.consumed('url_events', 'event-store');
 *   metrics.retried('execution_events'); // a dead letter went back to its topic
 */
export interface EventMetrics {
  /** The bus took the event (counted when it did, never when it was only stored). */
  published(topic: string, eventType: string): void;
  /** The bus can never take the event; the outbox relay moved it to the dead letters. */
  outboxDeadLettered(topic: string, eventType: string): void;
  consumed(topic: string, group: string): void;
  failed(topic: string, group: string): void;
  deadLettered(topic: string, group: string): void;
  retried(topic: string): void;
}
