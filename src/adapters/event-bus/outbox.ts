import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Kysely } from 'kysely';
import type { EventEnvelope, EventsFor, MessageHeaders, OutgoingEvent } from '../../domain/events.js';
import type { EventBus, OutgoingMessage } from '../../ports/event-bus.js';
import { producerHeaders } from '../telemetry/message-tracing.js';
import type { EventTables } from './event-tables.js';
import type { AnyKysely } from '../storage/database.js';
import type { GroupCommit, TransactionWork } from '../storage/group-commit.js';

/**
 * Appends messages to the bus's own log inside a transaction of the service's database: when the
 * bus is that log (the embedded bus), the log is the outbox, and the relay has nothing to move.
 */
export interface TransactionalLog {
  /** Appends inside `trx`; the returned function is to be called once `trx` has committed. */
  appendInTransaction(trx: AnyKysely, messages: readonly OutgoingMessage[]): Promise<() => void>;
}

export interface TransactionalOutboxOptions {
  /** Runs the write transactions on the service's database; one each by default. */
  readonly transactions?: TransactionRunner;
  /** When set, events go straight into this log instead of the outbox table. */
  readonly log?: TransactionalLog;
  /** Told of each event the outbox hands over itself (with `log`; otherwise the relay tells). */
  readonly onPublished?: (topic: string, envelope: EventEnvelope) => void;
  readonly now?: () => number;
}

/** What one change appended, and what to do once its transaction has committed. */
interface Appended {
  readonly messages: readonly OutgoingMessage[];
  readonly committed: () => void;
}

/** Runs `work` in a write transaction on `db`; a runner may share one transaction among several callers. */
export type TransactionRunner = <DB, T>(db: Kysely<DB>, work: TransactionWork<DB, T>) => Promise<T>;

/** One transaction per call. */
export const eachInItsOwnTransaction: TransactionRunner = (db, work) => db.transaction().execute(work);

/** Group commit for `group.db` (see GroupCommit); a transaction of its own on any other handle. */
export function groupCommitOn<G>(group: GroupCommit<G>): TransactionRunner {
  return <DB, T>(db: Kysely<DB>, work: TransactionWork<DB, T>) =>
    (db as unknown) === group.db
      ? group.run(work as unknown as TransactionWork<G, T>)
      : eachInItsOwnTransaction(db, work);
}

/**
 * The transactional outbox: events are written in the same database transaction as the change
 * they describe, so an acknowledged change always has its event, even if the process dies right
 * after answering or the broker is away. The relay below hands them to the bus. With the
 * embedded bus, the events go into its log directly, in that same transaction.
 */
export class TransactionalOutbox {
  private readonly appended = new EventEmitter();
  private readonly transactions: TransactionRunner;
  private readonly log: TransactionalLog | undefined;
  private readonly onPublished: (topic: string, envelope: EventEnvelope) => void;
  private readonly now: () => number;

  constructor(
    private readonly service: string,
    options: TransactionalOutboxOptions = {},
  ) {
    this.transactions = options.transactions ?? eachInItsOwnTransaction;
    this.log = options.log;
    this.onPublished = options.onPublished ?? (() => undefined);
    this.now = options.now ?? Date.now;
  }

  /** Records `events` inside `trx`; the producer span and trace headers are made now, in the caller's span. */
  async append(trx: AnyKysely, events: readonly OutgoingEvent[]): Promise<Appended | undefined> {
    if (events.length === 0) return undefined;
    const messages = events.map((event) => ({
      topic: event.topic,
      key: event.key,
      headers: producerHeaders(event, this.service),
      envelope: event.envelope,
    }));
    if (this.log) return { messages, committed: await this.log.appendInTransaction(trx, messages) };
    const rows = messages.map((message) => ({
      topic: message.topic,
      message_key: message.key,
      event_id: message.envelope.event_id,
      headers: JSON.stringify(message.headers),
      envelope: JSON.stringify(message.envelope),
      created_at: this.now(),
    }));
    await (trx as Kysely<EventTables>).insertInto('event_outbox').values(rows).execute();
    return { messages, committed: () => this.notify() };
  }

  /**
   * Runs `change` in a transaction together with its events, then wakes the relay (or the
   * consumers of the log). Nothing is recorded when the change wrote nothing (`undefined`);
   * without `events` the change runs on its own.
   */
  async transact<DB, T>(
    db: Kysely<DB>,
    events: EventsFor<NonNullable<T>> | undefined,
    change: (db: Kysely<DB>) => Promise<T>,
  ): Promise<T> {
    if (!events) return change(db);
    let appended: Appended | undefined;
    const result = await this.transactions(db, async (trx) => {
      const written = await change(trx);
      if (written !== undefined && written !== null) appended = await this.append(trx, events(written));
      return written;
    });
    if (appended) {
      appended.committed();
      // Straight into the log: handed over now (otherwise the relay says so when it is).
      if (this.log) for (const m of appended.messages) this.onPublished(m.topic, m.envelope);
    }
    return result;
  }

  /** Tells the relay of this process that rows are waiting (call after the transaction commits). */
  notify(): void {
    this.appended.emit('rows');
  }

  onAppend(listener: () => void): () => void {
    this.appended.on('rows', listener);
    return () => this.appended.off('rows', listener);
  }
}

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

const RELAY_GROUP = '__outbox_relay';
/** How long the relay, woken by a new row, waits for more before it reads. */
const WAKE_LINGER_MS = 5;
const RELAY_TOPIC = '__outbox';

/**
 * Moves outbox rows to the bus in order, deleting each batch once the bus has it. One relay runs
 * at a time across all instances (a lease). A crash between publish and delete publishes the
 * rows again: the bus drops repeated event ids, and consumers are idempotent by event id.
 */
export class OutboxRelay {
  private readonly db: Kysely<EventTables>;
  private readonly owner = randomUUID();
  private readonly now: () => number;
  private running = false;
  private loop: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private unsubscribe: (() => void) | undefined;
  private lastFailureLog = 0;
  private leaseUntil = 0;
  private woken = false;

  constructor(
    db: AnyKysely,
    private readonly bus: EventBus,
    private readonly outbox: TransactionalOutbox,
    private readonly options: OutboxRelayOptions,
    private readonly logger: RelayLogger,
    private readonly onPublished: (topic: string, envelope: EventEnvelope) => void = () => undefined,
  ) {
    this.db = db as Kysely<EventTables>;
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
        // Broker or database away: the rows stay in the outbox; try again shortly.
        if (this.now() - this.lastFailureLog > 10_000) {
          this.lastFailureLog = this.now();
          this.logger.warn({ err: error }, 'outbox relay cannot publish; retrying');
        }
        await this.idle(this.options.retryDelayMs);
      }
    }
  }

  private async relayBatch(): Promise<number> {
    const rows = await this.db
      .selectFrom('event_outbox')
      .selectAll()
      .orderBy('id')
      .limit(this.options.batchSize)
      .execute();
    if (rows.length === 0) return 0;
    const messages = rows.map((row) => ({
      topic: row.topic,
      key: row.message_key,
      headers: JSON.parse(row.headers) as MessageHeaders,
      envelope: JSON.parse(row.envelope) as EventEnvelope,
    }));
    // The whole batch at once; if it fails, all of it is handed over again (the bus drops repeats).
    await this.bus.publishAll(messages);
    await this.db
      .deleteFrom('event_outbox')
      .where('id', '<=', rows[rows.length - 1]!.id)
      .execute();
    for (const m of messages) this.onPublished(m.topic, m.envelope);
    return rows.length;
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
