import type { Span } from '@opentelemetry/api';
import type { DeadLetter, DeadLetterPayload, DeadLetterStatus } from '../domain/dead-letter.js';
import { errors } from '../domain/errors.js';
import { TOPICS } from '../domain/events.js';
import type { DeadLetterStore } from '../ports/dead-letter-store.js';
import type { BusMessage, EventBus } from '../ports/event-bus.js';
import type { EventMetrics } from '../ports/event-metrics.js';
import type { MessageTracing } from '../ports/message-tracing.js';
import type { ConsumerDefinition } from '../ports/event-consumer.js';

export interface DeadLetterManagerOptions {
  /** Automatic re-publications of one event for one group before it is parked. */
  readonly maxRetries: number;
  /** Pause before an automatic re-publication. */
  readonly retryDelayMs: number;
  readonly clock?: () => number;
}

/** What the manager works with: where letters are kept, the bus, its counter and the trace context. */
export interface DeadLetterManagerPorts {
  readonly store: DeadLetterStore;
  readonly bus: EventBus;
  readonly metrics: Pick<EventMetrics, 'retried'>;
  readonly tracing: MessageTracing;
}

/**
 * Takes what consumers gave up on from `dead_letter_queue`: records it under a `dlq.consume`
 * span that continues the original trace, re-publishes it to its topic (with that context
 * injected) a few times, and parks it when it keeps coming back. Admins list, inspect, retry
 * and discard what is parked.
 */
export class DeadLetterManager {
  private readonly now: () => number;

  constructor(
    private readonly ports: DeadLetterManagerPorts,
    private readonly options: DeadLetterManagerOptions,
    private readonly service: string,
  ) {
    this.now = options.clock ?? Date.now;
  }

  consumer(): ConsumerDefinition {
    return {
      group: 'dead-letter-manager',
      topics: [TOPICS.deadLetter],
      spanName: 'dlq.consume',
      deadLetter: false, // never dead-letter the dead-letter queue: retry until it is recorded
      handle: (message, span) => this.receive(message, span),
    };
  }

  list(options: { status?: DeadLetterStatus; limit: number; after?: number }): Promise<DeadLetter[]> {
    return this.ports.store.list(options);
  }

  async get(id: number): Promise<DeadLetter> {
    const letter = await this.ports.store.get(id);
    if (!letter) throw errors.deadLetterNotFound();
    return letter;
  }

  /**
   * Re-publishes a dead letter to its topic now, continuing its original trace. One the bus can
   * never take (EVENT_REFUSED) stays as it is: the publication is direct, so nothing waits behind it.
   */
  async retry(id: number): Promise<DeadLetter> {
    const letter = await this.get(id);
    await this.ports.tracing.continueTrace('dlq.retry', letter.headers, async () => {
      try {
        await this.republish(letter);
      } catch (error) {
        // Too large for the broker, say: it stays parked, and the admin is told why.
        if ((error as { permanent?: unknown }).permanent === true) throw errors.eventRefused((error as Error).message);
        throw error;
      }
    });
    return this.setStatus(id, 'retried');
  }

  async discard(id: number): Promise<DeadLetter> {
    await this.get(id);
    return this.setStatus(id, 'discarded');
  }

  private async receive(message: BusMessage, span: Span): Promise<void> {
    const { store } = this.ports;
    const payload = message.envelope.payload as DeadLetterPayload;
    const original = payload.original;
    span.setAttributes({
      'dlq.original.topic': payload.topic,
      'dlq.original.group': payload.group,
      'dlq.original.event_id': original.event_id,
      'dlq.original.event_type': original.event_type,
      'dlq.attempts': payload.attempts,
    });
    const seen = await store.findByMessage(message.envelope.event_id);
    if (seen && seen.status !== 'retrying') return; // a redelivery of something already handled

    const earlier = await store.countOthers(original.event_id, payload.group, message.envelope.event_id);
    const retrying = earlier < this.options.maxRetries;
    span.setAttribute('dlq.decision', retrying ? 'retry' : 'park');
    const id = seen?.id ?? (await this.record(message, payload, retrying ? 'retrying' : 'parked'));
    if (!retrying) return;
    await new Promise((resolve) => setTimeout(resolve, this.options.retryDelayMs));
    // Inside dlq.consume: the re-published message carries this span's context.
    await this.republish(await this.get(id));
    await this.setStatus(id, 'retried');
  }

  private record(message: BusMessage, payload: DeadLetterPayload, status: DeadLetterStatus): Promise<number> {
    const letter = {
      dlq_event_id: message.envelope.event_id,
      topic: payload.topic,
      partition: payload.partition,
      group: payload.group,
      // The original message's headers: the letter is the original event, re-published as such.
      headers: payload.headers ?? message.headers,
      envelope: payload.original,
      error: `${payload.error.name}: ${payload.error.message}`,
      attempts: payload.attempts,
      status,
    };
    return this.ports.store.record(letter, this.now());
  }

  private async republish(letter: DeadLetter): Promise<void> {
    const { envelope } = letter;
    const message = { topic: letter.topic, eventId: envelope.event_id, eventType: envelope.event_type };
    await this.ports.tracing.publish(message, this.service, (headers) =>
      this.ports.bus.publish(letter.topic, envelope.event_id, headers, envelope, {
        messageId: `${envelope.event_id}:retry:${letter.id}:${this.now()}`,
        partition: letter.partition,
      }),
    );
    this.ports.metrics.retried(letter.topic);
  }

  private async setStatus(id: number, status: DeadLetterStatus): Promise<DeadLetter> {
    await this.ports.store.setStatus(id, status, this.now());
    return this.get(id);
  }
}
