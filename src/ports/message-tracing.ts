import type { MessageHeaders } from '../domain/events.js';

/** One message about to be published, as its producer span describes it. */
export interface TracedMessage {
  readonly topic: string;
  readonly eventId: string;
  readonly eventType: string;
}

/**
 * Trace context over message headers (spec §6.1): a message published now carries the active
 * trace, and work on a message can continue the trace it carries. With tracing off no span is
 * made, but a context that came in still travels on in the headers. Every adapter passes
 * `test/contract/message-tracing.contract.test.ts`.
 *
 * @example
 *   await tracing.continueTrace('dlq.retry', letter.headers, () =>
 *     tracing.publish({ topic, eventId, eventType }, service, (headers) => bus.publish(topic, key, headers, envelope)),
 *   );
 */
export interface MessageTracing {
  /** Runs `work` in a new span `name`, a child of the context `headers` carry; the span ends with it. */
  continueTrace<T>(name: string, headers: MessageHeaders, work: () => Promise<T>): Promise<T>;
  /**
   * Runs `work` in the context `headers` carry, with no span of its own: what it publishes is a
   * child of the span that made those headers, even one that ended long ago (a dead letter's
   * retry, published when it comes due, belongs under the `dlq.consume` that decided it).
   */
  resume<T>(headers: MessageHeaders, work: () => Promise<T>): Promise<T>;
  /**
   * The headers of spec §6.1 for a message of `eventType` published now, with the active context
   * (`traceparent` and `tracestate` only when there is one).
   */
  headers(eventType: string, service: string): MessageHeaders;
  /** Runs `publish` in a producer span of `message`, handing it the headers that carry that span. */
  publish<T>(message: TracedMessage, service: string, publish: (headers: MessageHeaders) => Promise<T>): Promise<T>;
}
