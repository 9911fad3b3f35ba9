import type { DeadLetterPayload } from '../../domain/dead-letter.js';
import { createEvent, EVENT_TYPES, TOPICS } from '../../domain/events.js';
import type { BusMessage, EventBus, Subscription } from '../../ports/event-bus.js';
import type { ConsumerDefinition } from '../../ports/event-consumer.js';
import type { EventMetrics } from '../../ports/event-metrics.js';
import { inMessageSpan, inProducerSpan } from '../telemetry/message-tracing.js';

export interface RetryPolicy {
  /** Attempts before the message goes to the dead-letter queue. */
  readonly attempts: number;
  /** First delay between attempts; it doubles each time, up to `maxBackoffMs`. */
  readonly backoffMs: number;
  readonly maxBackoffMs: number;
  /**
   * Failures that say nothing about the message (the database cannot be reached right now): they
   * are retried with the same backoff for as long as they last, and do not count as attempts, so
   * an outage does not send what its consumers would have handled to the dead-letter queue.
   */
  readonly transient?: (error: unknown) => boolean;
}

export interface ConsumerLogger {
  warn(object: unknown, message: string): void;
}

/**
 * Runs consumers on the bus: each message inside a consumer span that continues the
 * publisher's trace, retried with backoff, then sent to `dead_letter_queue` with the error, from
 * a producer span inside the consumer span, so the dead letter stays in the original trace. Its
 * headers describe it like any message's: `event_type` is its envelope's (`dead_letter`); the
 * original event, its type included, is in the payload.
 */
export class ConsumerRunner {
  private readonly subscriptions: Subscription[] = [];
  private readonly started: ConsumerDefinition[] = [];
  private stopping = false;

  constructor(
    private readonly bus: EventBus,
    private readonly policy: RetryPolicy,
    private readonly metrics: EventMetrics,
    private readonly logger: ConsumerLogger,
    private readonly service: string,
  ) {}

  async start(consumer: ConsumerDefinition): Promise<void> {
    this.started.push(consumer);
    for (const topic of consumer.topics) {
      this.subscriptions.push(
        await this.bus.subscribe({
          group: consumer.group,
          topic,
          startAt: consumer.startAt,
          ordered: consumer.ordered,
          concurrency: consumer.concurrency,
          ackWaitMs: consumer.ackWaitMs,
          handler: (message) => this.handle(consumer, message),
        }),
      );
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    for (const consumer of this.started.splice(0)) consumer.stop?.();
    await Promise.all(this.subscriptions.splice(0).map((s) => s.close()));
  }

  private handle(consumer: ConsumerDefinition, message: BusMessage): Promise<void> {
    return inMessageSpan(consumer.spanName, message, this.bus.system, consumer.group, async (span) => {
      // `attempt`: failures that count (see RetryPolicy.transient); `tries`: all, for the backoff.
      for (let attempt = 1, tries = 1; ; tries++) {
        try {
          await consumer.handle(message, span);
          this.metrics.consumed(message.topic, consumer.group);
          return;
        } catch (error) {
          this.metrics.failed(message.topic, consumer.group);
          span.addEvent('attempt failed', { attempt, 'exception.message': (error as Error).message });
          // Stopping: no retry and no dead letter; the bus delivers it again, here or elsewhere.
          if (this.stopping) throw error;
          const transient = this.policy.transient?.(error) === true;
          if (!transient && attempt >= this.policy.attempts) {
            if (consumer.deadLetter === false) throw error; // the bus delivers it again later
            await this.deadLetter(consumer, message, error as Error, attempt);
            return;
          }
          if (!transient) attempt++;
          const delay = Math.min(this.policy.backoffMs * 2 ** Math.min(tries - 1, 30), this.policy.maxBackoffMs);
          await new Promise((resolve) => setTimeout(resolve, delay));
        }
      }
    });
  }

  private async deadLetter(consumer: ConsumerDefinition, message: BusMessage, error: Error, attempts: number) {
    const payload: DeadLetterPayload = {
      topic: message.topic,
      partition: message.partition,
      offset: message.offset,
      group: consumer.group,
      attempts,
      error: { name: error.name, message: error.message },
      original: message.envelope,
      headers: message.headers,
    };
    const event = createEvent(EVENT_TYPES.deadLettered, payload, {
      service: this.service,
      topic: TOPICS.deadLetter,
      key: message.envelope.event_id,
    });
    // Published from the consumer span: the dead-letter manager continues the original trace.
    const traced = { topic: TOPICS.deadLetter, eventId: event.envelope.event_id, eventType: event.envelope.event_type };
    await inProducerSpan(traced, this.service, this.bus.system, (headers) =>
      this.bus.publish(TOPICS.deadLetter, event.key, headers, event.envelope),
    );
    this.metrics.deadLettered(message.topic, consumer.group);
    this.logger.warn(
      { event_id: message.envelope.event_id, topic: message.topic, group: consumer.group, attempts, err: error },
      'event dead-lettered',
    );
  }
}
