import { trace } from '@opentelemetry/api';
import type { Kysely, Selectable } from 'kysely';
import type { EventTables } from '../adapters/storage/schema.js';
import type { EventMetrics } from '../adapters/telemetry/event-metrics.js';
import { extractedContext, injectedHeaders } from '../adapters/telemetry/message-tracing.js';
import { errors } from '../domain/errors.js';
import { type EventEnvelope, type MessageHeaders, TOPICS } from '../domain/events.js';
import type { BusMessage, EventBus } from '../ports/event-bus.js';
import type { ConsumerDefinition, DeadLetterPayload } from './consumer-runner.js';
import type { AnyKysely } from '../adapters/storage/database.js';

export type DeadLetterStatus = EventTables['dead_letters']['status'];

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
}

export interface DeadLetterManagerOptions {
  /** Automatic re-publications of one event for one group before it is parked. */
  readonly maxRetries: number;
  /** Pause before an automatic re-publication. */
  readonly retryDelayMs: number;
  readonly clock?: () => number;
}

const tracer = trace.getTracer('urlshortener.events');

const notFound = errors.deadLetterNotFound;

/**
 * Takes what consumers gave up on from `dead_letter_queue`: records it under a `dlq.consume`
 * span that continues the original trace, re-publishes it to its topic (with that context
 * injected) a few times, and parks it when it keeps coming back. Admins list, inspect, retry
 * and discard what is parked.
 */
export class DeadLetterManager {
  private readonly db: Kysely<EventTables>;
  private readonly now: () => number;

  constructor(
    db: AnyKysely,
    private readonly bus: EventBus,
    private readonly metrics: EventMetrics,
    private readonly options: DeadLetterManagerOptions,
    private readonly service: string,
  ) {
    this.db = db as Kysely<EventTables>;
    this.now = options.clock ?? Date.now;
  }

  consumer(): ConsumerDefinition {
    return {
      group: 'dead-letter-manager',
      topics: [TOPICS.deadLetter],
      spanName: 'dlq.consume',
      deadLetter: false, // never dead-letter the dead-letter queue: retry until it is recorded
      handle: (message) => this.receive(message),
    };
  }

  async list(options: { status?: DeadLetterStatus; limit: number; after?: number }): Promise<DeadLetter[]> {
    let query = this.db.selectFrom('dead_letters').selectAll().orderBy('id').limit(options.limit);
    if (options.status) query = query.where('status', '=', options.status);
    if (options.after !== undefined) query = query.where('id', '>', options.after);
    return (await query.execute()).map(toDeadLetter);
  }

  async get(id: number): Promise<DeadLetter> {
    const row = await this.db.selectFrom('dead_letters').selectAll().where('id', '=', id).executeTakeFirst();
    if (!row) throw notFound();
    return toDeadLetter(row);
  }

  /**
   * Re-publishes a dead letter to its topic now, continuing its original trace. One the bus can
   * never take (EVENT_REFUSED) stays as it is: the publication is direct, so nothing waits behind it.
   */
  async retry(id: number): Promise<DeadLetter> {
    const letter = await this.get(id);
    await tracer.startActiveSpan('dlq.retry', {}, extractedContext(letter.headers), async (span) => {
      try {
        await this.republish(letter);
      } catch (error) {
        // Too large for the broker, say: it stays parked, and the admin is told why.
        if ((error as { permanent?: unknown }).permanent === true) throw errors.eventRefused((error as Error).message);
        throw error;
      } finally {
        span.end();
      }
    });
    return this.setStatus(id, 'retried');
  }

  async discard(id: number): Promise<DeadLetter> {
    await this.get(id);
    return this.setStatus(id, 'discarded');
  }

  private async receive(message: BusMessage): Promise<void> {
    const span = trace.getActiveSpan();
    const payload = message.envelope.payload as DeadLetterPayload;
    const original = payload.original;
    span?.setAttributes({
      'dlq.original.topic': payload.topic,
      'dlq.original.group': payload.group,
      'dlq.original.event_id': original.event_id,
      'dlq.original.event_type': original.event_type,
      'dlq.attempts': payload.attempts,
    });
    const seen = await this.db
      .selectFrom('dead_letters')
      .select(['id', 'status'])
      .where('dlq_event_id', '=', message.envelope.event_id)
      .executeTakeFirst();
    if (seen && seen.status !== 'retrying') return; // a redelivery of something already handled

    const earlier = await this.db
      .selectFrom('dead_letters')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('event_id', '=', original.event_id)
      .where('group_name', '=', payload.group)
      .where('dlq_event_id', '!=', message.envelope.event_id)
      .executeTakeFirstOrThrow();
    const retrying = Number(earlier.n) < this.options.maxRetries;
    span?.setAttribute('dlq.decision', retrying ? 'retry' : 'park');
    const id = seen?.id ?? (await this.record(message, payload, retrying ? 'retrying' : 'parked'));
    if (!retrying) return;
    await new Promise((resolve) => setTimeout(resolve, this.options.retryDelayMs));
    // Inside dlq.consume: the re-published message carries this span's context.
    await this.republish(await this.get(id));
    await this.setStatus(id, 'retried');
  }

  private async record(message: BusMessage, payload: DeadLetterPayload, status: DeadLetterStatus): Promise<number> {
    const now = this.now();
    const row = await this.db
      .insertInto('dead_letters')
      .values({
        dlq_event_id: message.envelope.event_id,
        event_id: payload.original.event_id,
        event_type: payload.original.event_type,
        topic: payload.topic,
        partition_no: payload.partition,
        group_name: payload.group,
        headers: JSON.stringify(message.headers),
        envelope: JSON.stringify(payload.original),
        error: `${payload.error.name}: ${payload.error.message}`,
        attempts: payload.attempts,
        status,
        created_at: now,
        updated_at: now,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    return Number(row.id);
  }

  private async republish(letter: DeadLetter): Promise<void> {
    const { envelope } = letter;
    const headers = injectedHeaders(envelope.event_type, this.service);
    await this.bus.publish(letter.topic, envelope.event_id, headers, envelope, {
      messageId: `${envelope.event_id}:retry:${letter.id}:${this.now()}`,
      partition: letter.partition,
    });
    this.metrics.retried(letter.topic);
  }

  private async setStatus(id: number, status: DeadLetterStatus): Promise<DeadLetter> {
    await this.db.updateTable('dead_letters').set({ status, updated_at: this.now() }).where('id', '=', id).execute();
    return this.get(id);
  }
}

function toDeadLetter(row: Selectable<EventTables['dead_letters']>): DeadLetter {
  return {
    id: Number(row.id),
    event_id: row.event_id,
    event_type: row.event_type,
    topic: row.topic,
    partition: row.partition_no,
    group: row.group_name,
    status: row.status,
    attempts: row.attempts,
    error: row.error,
    headers: JSON.parse(row.headers) as MessageHeaders,
    envelope: JSON.parse(row.envelope) as EventEnvelope,
    created_at: new Date(Number(row.created_at)).toISOString(),
    updated_at: new Date(Number(row.updated_at)).toISOString(),
  };
}
