import type { Span } from '@opentelemetry/api';
import type { BusMessage } from './event-bus.js';

/**
 * An event consumer: a group, its topics and its handler, which the composition hands to the
 * bus's consumer runner (adapters/event-bus/consumer-runner.ts). The runner calls `handle` inside
 * a consumer span that continues the publisher's trace, retries it with backoff, then
 * dead-letters the message. Handlers must be idempotent by event id.
 *
 * @example
 *   const auditLog: ConsumerDefinition = {
 *     group: 'audit-log',
 *     topics: [TOPICS.url],
 *     handle: async (message, span) => { span.setAttribute('event.id', message.envelope.event_id); await write(message); },
 *   };
 */
export interface ConsumerDefinition {
  readonly group: string;
  readonly topics: readonly string[];
  readonly startAt?: 'earliest' | 'latest';
  /** False when the handler does not need messages one after the other (see SubscribeOptions). */
  readonly ordered?: boolean;
  /** Messages in the handler at once, each as soon as there is room (see SubscribeOptions). */
  readonly concurrency?: number;
  /** How long a held message may go without `inProgress()` before another member gets it (see SubscribeOptions). */
  readonly ackWaitMs?: number;
  /** Called when the runner stops, before its subscriptions close: give back what waits. */
  stop?(): void;
  /** The consumer span's name; `<topic> process` when absent. */
  readonly spanName?: string;
  /** When false, a failing message is retried for ever instead of being dead-lettered. */
  readonly deadLetter?: boolean;
  handle(message: BusMessage, span: Span): Promise<void>;
}
