import { randomUUID } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import { type EventEnvelope, type MessageHeaders, partitionFor } from '../../domain/events.js';
import type { EventBus, OutgoingMessage } from '../../ports/event-bus.js';
import { withDeadline } from '../../support/deadline.js';
import type { DatabaseSchema, EventOutboxTable } from '../storage/schema.js';
import type { TransactionalOutbox } from './outbox.js';

export interface OutboxRelayOptions {
  readonly pollMs: number;
  readonly batchSize: number;
  /** How long this process holds the relay lease; another instance takes over after it lapses. */
  readonly leaseMs: number;
  readonly retryDelayMs: number;
  readonly clock?: () => number;
}

export interface RelayLogger {
  warn(object: unknown, message: string): void;
}

/** What the relay tells about the events it moves (metrics). */
export interface RelayHooks {
  /** The bus took the event. */
  published(topic: string, envelope: EventEnvelope): void;
  /** The bus can never take the event: it was moved to the dead letters. */
  deadLettered(topic: string, eventType: string): void;
}

/** Rows waiting in the outbox, and how long the oldest has waited. */
export interface OutboxBacklog {
  readonly depth: number;
  readonly oldestAgeSeconds: number;
}

type OutboxRow = Selectable<EventOutboxTable>;
/** An outbox row with its message, or why it cannot have one. */
type Waiting = { readonly row: OutboxRow } & (
  | { readonly message: OutgoingMessage; readonly error?: undefined }
  | { readonly message?: undefined; readonly error: Error }
);
type Refused = { readonly waiting: Waiting; readonly error: Error };

const RELAY_GROUP = '__outbox_relay';
const RELAY_TOPIC = '__outbox';
/** The consumer group an outbox dead letter is filed under (the admin API shows it). */
export const OUTBOX_DEAD_LETTER_GROUP = 'outbox-relay';
/** How the relay, woken by a new row, waits for more before it reads. */
const WAKE_LINGER_MS = 5;
/** A backlog measured this recently is answered again instead of counting the table again. */
const BACKLOG_FRESH_MS = 1000;
/** How long counting the backlog may take before the caller is answered without it. */
const BACKLOG_DEADLINE_MS = 1000;

function decoded(row: OutboxRow): Waiting {
  try {
    const headers = JSON.parse(row.headers) as MessageHeaders;
    const envelope = JSON.parse(row.envelope) as EventEnvelope;
    return { row, message: { topic: row.topic, key: row.message_key, headers, envelope } };
  } catch (error) {
    return { row, error: new Error(`the outbox row cannot be decoded: ${(error as Error).message}`) };
  }
}

/**
 * Moves outbox rows to the bus in id order, and deletes exactly the rows the bus took: a row
 * whose transaction committed after a later id's was read is left for the next batch, never
 * deleted unseen. A row the bus can never take (too large, not encodable) is moved to the dead
 * letters with its error, so the rows behind it flow on; a transient failure (the broker away)
 * keeps the row for the next attempt. One relay runs at a time across all instances (a lease);
 * should two run at once (a lapsed lease, a drain at shutdown), they publish the same rows in the
 * same order and the bus drops repeated event ids, so at worst a consumer sees an event twice
 * (consumers are idempotent by event id). Order per key holds: a later change of the same
 * mapping waited for the earlier one's row lock, so its row has the higher id and commits later.
 */
export class OutboxRelay {
  private readonly owner = randomUUID();
  private readonly now: () => number;
  private running = false;
  private loop: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private unsubscribe: (() => void) | undefined;
  private lastFailureLog = 0;
  private leaseUntil = 0;
  private woken = false;
  private backlogMeasure: { at: number; value: Promise<OutboxBacklog> } | undefined;

  constructor(
    private readonly db: Kysely<DatabaseSchema>,
    private readonly bus: EventBus,
    private readonly outbox: TransactionalOutbox,
    private readonly options: OutboxRelayOptions,
    private readonly logger: RelayLogger,
    private readonly hooks: RelayHooks = { published: () => undefined, deadLettered: () => undefined },
  ) {
    this.now = options.clock ?? Date.now;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.unsubscribe = this.outbox.onAppend(() => {
      this.woken = true;
      // Linger a moment after a wake-up, so that under load one batch carries many rows.
      const wakeUp = this.wakeUp;
      if (wakeUp) setTimeout(wakeUp, WAKE_LINGER_MS);
    });
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.unsubscribe?.();
    this.wakeUp?.();
    await this.loop;
    await this.release().catch(() => undefined);
  }

  /** Relays everything waiting now, whoever holds the lease (shutdown and tests). */
  async drain(): Promise<number> {
    let total = 0;
    for (;;) {
      const moved = await this.relayBatch();
      total += moved;
      if (moved === 0) return total;
    }
  }

  /**
   * Rows waiting and the oldest one's age, counted at most once a second however often asked
   * (metrics scrapes and readiness probes share it); rejects when the database does not answer
   * within a second.
   */
  backlog(): Promise<OutboxBacklog> {
    const now = this.now();
    if (this.backlogMeasure === undefined || now - this.backlogMeasure.at >= BACKLOG_FRESH_MS) {
      const value = this.countBacklog(now);
      value.catch(() => (this.backlogMeasure = undefined));
      this.backlogMeasure = { at: now, value };
    }
    return withDeadline(this.backlogMeasure.value, BACKLOG_DEADLINE_MS);
  }

  private async countBacklog(now: number): Promise<OutboxBacklog> {
    const row = await this.db
      .selectFrom('event_outbox')
      .select((eb) => [eb.fn.countAll<string | number>().as('depth'), eb.fn.min('created_at').as('oldest')])
      .executeTakeFirstOrThrow();
    const oldest = row.oldest === null ? undefined : Number(row.oldest);
    return {
      depth: Number(row.depth),
      oldestAgeSeconds: oldest === undefined ? 0 : Math.max(0, now - oldest) / 1000,
    };
  }

  private async run(): Promise<void> {
    while (this.running) {
      try {
        if (!(await this.holdLease())) {
          await this.idle(this.options.pollMs);
          continue;
        }
        const moved = await this.relayBatch();
        if (moved === 0) await this.idle(this.options.pollMs);
      } catch (error) {
        // Broker or database away: the rows stay in the outbox; try again shortly. The reason
        // alone is logged: a stack says nothing about an outage (issue 16).
        if (this.now() - this.lastFailureLog > 10_000) {
          this.lastFailureLog = this.now();
          const reason = error instanceof Error ? error.message : String(error);
          this.logger.warn({ err: reason }, 'outbox relay cannot publish; retrying');
        }
        await this.idle(this.options.retryDelayMs);
      }
    }
  }

  /**
   * One batch: the lowest ids waiting, handed to the bus in id order; then the rows the bus took
   * are deleted by id, and those it can never take are moved to the dead letters. Rejects (after
   * that) when a row failed for a transient reason; that row is tried again.
   */
  private async relayBatch(): Promise<number> {
    const rows = await this.db
      .selectFrom('event_outbox')
      .selectAll()
      .orderBy('id')
      .limit(this.options.batchSize)
      .execute();
    if (rows.length === 0) return 0;
    const waiting = rows.map(decoded);
    const sendable = waiting.filter((w) => w.message !== undefined);
    const outcomes = await this.bus.publishAll(sendable.map((w) => w.message!));
    const published: Waiting[] = [];
    const refused: Refused[] = waiting
      .filter((w) => w.error !== undefined)
      .map((w) => ({ waiting: w, error: w.error! }));
    let transient: Error | undefined;
    outcomes.forEach((outcome, i) => {
      const w = sendable[i]!;
      if (outcome.error === undefined) published.push(w);
      else if (outcome.permanent) refused.push({ waiting: w, error: outcome.error });
      else transient ??= outcome.error;
    });
    await this.settle(published, refused);
    for (const { message } of published) this.hooks.published(message!.topic, message!.envelope);
    for (const r of refused) this.reportDeadLetter(r);
    if (transient) throw transient;
    return rows.length;
  }

  /** Deletes the published rows, and moves the refused ones to the dead letters, in one transaction. */
  private async settle(published: readonly Waiting[], refused: readonly Refused[]): Promise<void> {
    const ids = [...published, ...refused.map((r) => r.waiting)].map((w) => w.row.id);
    if (refused.length === 0) {
      if (ids.length > 0) await this.db.deleteFrom('event_outbox').where('id', 'in', ids).execute();
      return;
    }
    const now = this.now();
    await this.db.transaction().execute(async (trx) => {
      await trx
        .insertInto('dead_letters')
        .values(refused.map((r) => this.deadLetter(r, now)))
        .onConflict((oc) => oc.column('dlq_event_id').doNothing())
        .execute();
      await trx.deleteFrom('event_outbox').where('id', 'in', ids).execute();
    });
  }

  /** The dead letter of a refused row, parked for an admin (listed under /api/v1/admin/dlq). */
  private deadLetter({ waiting, error }: Refused, now: number) {
    const { row, message } = waiting;
    return {
      dlq_event_id: `outbox:${row.event_id}`,
      event_id: row.event_id,
      event_type: eventTypeOf(waiting),
      topic: row.topic,
      partition_no: partitionFor(row.message_key, this.bus.partitions),
      group_name: OUTBOX_DEAD_LETTER_GROUP,
      // Kept as they were; an undecodable row's text is kept as a JSON string, so listing it works.
      headers: message ? row.headers : '{}',
      envelope: message ? row.envelope : JSON.stringify(row.envelope),
      error: `${error.name}: ${error.message}`,
      attempts: 1,
      status: 'parked' as const,
      created_at: now,
      updated_at: now,
    };
  }

  private reportDeadLetter({ waiting, error }: Refused): void {
    const eventType = eventTypeOf(waiting);
    this.hooks.deadLettered(waiting.row.topic, eventType);
    this.logger.warn(
      { err: error, event_id: waiting.row.event_id, event_type: eventType, topic: waiting.row.topic },
      'the event bus refuses this event for good: moved from the outbox to the dead letters',
    );
  }

  private async holdLease(): Promise<boolean> {
    const now = this.now();
    if (now < this.leaseUntil - this.options.leaseMs / 2) return true; // renew at half-life only
    const until = now + this.options.leaseMs;
    await this.db
      .insertInto('consumer_leases')
      .values({ group_name: RELAY_GROUP, topic: RELAY_TOPIC, partition_no: 0, owner: '', expires_at: 0 })
      .onConflict((oc) => oc.columns(['group_name', 'topic', 'partition_no']).doNothing())
      .execute();
    const result = await this.db
      .updateTable('consumer_leases')
      .set({ owner: this.owner, expires_at: until })
      .where('group_name', '=', RELAY_GROUP)
      .where('topic', '=', RELAY_TOPIC)
      .where((eb) => eb.or([eb('owner', '=', this.owner), eb('expires_at', '<=', now)]))
      .executeTakeFirst();
    const held = Number(result.numUpdatedRows) === 1;
    this.leaseUntil = held ? until : 0;
    return held;
  }

  private async release(): Promise<void> {
    this.leaseUntil = 0;
    await this.db
      .updateTable('consumer_leases')
      .set({ owner: '', expires_at: 0 })
      .where('group_name', '=', RELAY_GROUP)
      .where('owner', '=', this.owner)
      .execute();
  }

  private idle(ms: number): Promise<void> {
    if (this.woken) {
      this.woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.woken = false;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakeUp = done;
    });
  }
}

const eventTypeOf = (waiting: Waiting): string =>
  waiting.message?.envelope.event_type ?? waiting.message?.headers.event_type ?? 'unknown';
