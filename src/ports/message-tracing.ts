import type { MessageHeaders } from '../domain/events.js';

/**
 * Trace context over message headers (spec §6.1): a message published now carries the active
 * trace, and work on a message can continue the trace it carries. With tracing off both cost
 * nothing and the trace headers stay empty. Every adapter passes
 * `test/contract/message-tracing.contract.test.ts`.
 *
 * @example
 *   await tracing.continueTrace('dlq.retry', letter.headers, () =>
 *     bus.publish(topic, key, tracing.headers(eventType, service), envelope),
 *   );
 */
export interface MessageTracing {
  /** Runs `work` in a new span `name`, a child of the context `headers` carry; the span ends with it. */
  continueTrace<T>(name: string, headers: MessageHeaders, work: () => Promise<T>): Promise<T>;
  /** The four headers of spec §6.1 for a message of `eventType` published now, with the active context. */
  headers(eventType: string, service: string): MessageHeaders;
}
