import type { Span } from '@opentelemetry/api';
import type { DeadLetter, DeadLetterPayload, DeadLetterStatus } from '../domain/dead-letter.js';
import { errors } from '../domain/errors.js';
import { type MessageHeaders, TOPICS } from '../domain/events.js';
import type { DeadLetterStore } from '../ports/dead-letter-store.js';
import type { BusMessage, EventBus } from '../ports/event-bus.js';
import type { EventMetrics } from '../ports/event-metrics.js';
import type { MessageTracing } from '../ports/message-tracing.js';
import type { ConsumerDefinition } from '../ports/event-consumer.js';
import { recordSideEffect } from '../support/after-side-effect.js';

/** Letters the sweep reads at a time. */
const DUE_BATCH = 100;
/**
 * How long a claimed retry is this instance's (at least): one that dies while publishing leaves
 * the letter due again after it.
 */
const CLAIM_MS = 30_000;
const TIMER_SLACK_MS = 10;

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
 * span that continues the original trace, re-publishes it to its topic (with that span's context
 * injected) DLQ_RETRY_DELAY_MS later, a few times, and parks it when it keeps coming back. Admins
 * list, inspect, retry and discard letters, a `retrying` one too: their decision stands against
 * the retry it was waiting for. The instances that consume the dead-letter queue run `retryDue`
 * periodically, for retries whose process stopped before they came due.
 */
export class DeadLetterManager {
  private readonly now: () => number;
  /** This process's timers of letters it decided to retry, until they come due. */
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Retries under way (claimed, being published), which `stop` waits for. */
  private readonly inFlight = new Set<Promise<boolean>>();
  private stopped = false;

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
    // Written (and read back) again if the database refuses it for a moment: refused, the admin
    // would be answered 503 about a letter already re-published, and may retry it once more; one
    // left `retrying` would go out again when due.
    return recordSideEffect(() => this.setStatus(id, 'retried'));
  }

  async discard(id: number): Promise<DeadLetter> {
    await this.get(id);
    return this.setStatus(id, 'discarded');
  }

  /**
   * Records a dead-letter message under `dlq.consume` and decides: re-published after
   * DLQ_RETRY_DELAY_MS (`retrying`, due then), or parked. The message is acknowledged at once: the
   * re-publication waits in the table, not in this handler, so letters behind it in the partition
   * are recorded meanwhile, the bus never hands the message to another member for having been
   * held past its ack wait, and an admin can decide before it comes due (`retryIfDue`).
   */
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
    // A redelivery of one recorded already: its retry, if any, is due in the table.
    if (await store.findByMessage(message.envelope.event_id)) return;

    const earlier = await store.countOthers(original.event_id, payload.group, message.envelope.event_id);
    const retrying = earlier < this.options.maxRetries;
    span.setAttribute('dlq.decision', retrying ? 'retry' : 'park');
    const now = this.now();
    const due = now + this.options.retryDelayMs;
    // The re-publication continues this span (dlq.consume): its context, kept with the letter.
    const context = retrying ? this.ports.tracing.headers(original.event_type, this.service) : undefined;
    const id = await this.record(message, payload, now, retrying ? { at: due, context } : undefined);
    if (retrying) this.schedule(id, due);
  }

  /** Letter `id`'s retry, in this process, when it comes due (the sweep, `retryDue`, is the fallback). */
  private schedule(id: number, due: number): void {
    if (this.stopped) return;
    // A timer may fire a little before the clock reads its time (the event loop's time is the
    // turn's start): a little after, so that the letter is due when it looks.
    const timer = setTimeout(
      () => {
        this.timers.delete(timer);
        // A failure leaves the letter due (or rescheduled): the sweep takes it then.
        this.retryIfDue(id).catch(() => undefined);
      },
      due - this.now() + TIMER_SLACK_MS,
    );
    timer.unref();
    this.timers.add(timer);
  }

  /**
   * Re-publishes every `retrying` letter that is due (a batch at a time): those whose process
   * stopped or died before their time, or whose re-publication failed. Run periodically by the
   * instances that consume the dead-letter queue; how many it re-published.
   */
  async retryDue(): Promise<number> {
    let retried = 0;
    for (;;) {
      const ids = await this.ports.store.due(this.now(), DUE_BATCH);
      for (const id of ids) {
        if (this.stopped) return retried;
        if (await this.retryIfDue(id)) retried++;
      }
      if (ids.length < DUE_BATCH) return retried;
    }
  }

  /**
   * Re-publishes letter `id` if it is still `retrying` and due, continuing the trace of the
   * `dlq.consume` that decided it, and marks it `retried` unless an admin decided meanwhile.
   * Whether this call re-published it. Taking it first (`claimRetry`) keeps two instances from
   * both publishing it, and an admin's discard or retry made before it came due from being
   * undone; one made in the moment between the claim and the publication still stands as the
   * letter's status, after one more re-publication (which consumers, idempotent by event id,
   * take as a redelivery). A stopped manager starts none: the letter stays due for another
   * instance.
   */
  async retryIfDue(id: number): Promise<boolean> {
    if (this.stopped) return false;
    const retry = this.claimAndRepublish(id);
    this.inFlight.add(retry);
    try {
      return await retry;
    } finally {
      this.inFlight.delete(retry);
    }
  }

  private async claimAndRepublish(id: number): Promise<boolean> {
    const { store } = this.ports;
    const now = this.now();
    const claimed = await store.claimRetry(id, now, now + Math.max(this.options.retryDelayMs, CLAIM_MS));
    if (!claimed) return false;
    const { letter, context } = claimed;
    try {
      await this.ports.tracing.resume(context ?? letter.headers, () => this.republish(letter));
    } catch (error) {
      // One the bus can never take (too large for the broker, say) is parked for an admin.
      if ((error as { permanent?: unknown }).permanent === true) {
        await store.changeStatus(id, 'retrying', 'parked', this.now());
        return false;
      }
      await store.reschedule(id, this.now() + this.options.retryDelayMs);
      throw error;
    }
    // Written again if the database refuses it for a moment: a letter left `retrying` would go
    // out once more when its claim runs out.
    await recordSideEffect(() => store.changeStatus(id, 'retrying', 'retried', this.now()));
    return true;
  }

  /**
   * Stops retrying in this process, once the retries under way have ended (published and marked,
   * or given back to the table), so that a graceful stop leaves no letter claimed by a process that
   * is gone; the letters not yet due stay in the table for any instance.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    await Promise.allSettled([...this.inFlight]);
  }

  private record(
    message: BusMessage,
    payload: DeadLetterPayload,
    now: number,
    retry: { at: number; context: MessageHeaders | undefined } | undefined,
  ): Promise<number> {
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
      status: retry ? ('retrying' as const) : ('parked' as const),
      ...(retry ? { retry_at: retry.at, ...(retry.context ? { retry_context: retry.context } : {}) } : {}),
    };
    return this.ports.store.record(letter, now);
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
