import { EventEmitter } from 'node:events';
import type { Kysely } from 'kysely';
import { errors } from '../../domain/errors.js';
import type { EventEnvelope, EventsFor, OutgoingEvent } from '../../domain/events.js';
import type { OutgoingMessage } from '../../ports/event-bus.js';
import { producerHeaders } from '../telemetry/message-tracing.js';
import type { GroupCommit, TransactionWork } from '../storage/group-commit.js';
import type { DatabaseSchema } from '../storage/schema.js';

/**
 * Appends messages to the bus's own log inside a transaction of the service's database: when the
 * bus is that log (the embedded bus), the log is the outbox, and the relay has nothing to move.
 */
export interface TransactionalLog {
  /** Appends inside `trx`; the returned function is to be called once `trx` has committed. */
  appendInTransaction(trx: Kysely<DatabaseSchema>, messages: readonly EncodedMessage[]): Promise<() => void>;
}

export interface TransactionalOutboxOptions {
  /** Runs the write transactions on the service's database; one each by default. */
  readonly transactions?: TransactionRunner;
  /** When set, events go straight into this log instead of the outbox table. */
  readonly log?: TransactionalLog;
  /** Told of each event the outbox hands over itself (with `log`; otherwise the relay tells). */
  readonly onPublished?: (topic: string, envelope: EventEnvelope) => void;
  /** Largest encoded envelope (UTF-8 bytes) a change may record; a larger one fails the change. No limit when unset. */
  readonly maxEventBytes?: number;
  /** `messaging.system` of the producer spans: the bus the events go to (`EventBus.system`); `nats` by default. */
  readonly messagingSystem?: string;
  readonly now?: () => number;
}

/** A message with its envelope encoded as JSON (once: the size check needs it, and so does the row). */
export interface EncodedMessage extends OutgoingMessage {
  readonly encoded: string;
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
 * after answering or the broker is away. The relay (outbox-relay.ts) hands them to the bus.
 * With the embedded bus, the events go into its log directly, in that same transaction.
 */
export class TransactionalOutbox {
  private readonly appended = new EventEmitter();
  private readonly transactions: TransactionRunner;
  private readonly log: TransactionalLog | undefined;
  private readonly onPublished: (topic: string, envelope: EventEnvelope) => void;
  private readonly maxEventBytes: number;
  private readonly messagingSystem: string;
  private readonly now: () => number;

  constructor(
    private readonly service: string,
    options: TransactionalOutboxOptions = {},
  ) {
    this.transactions = options.transactions ?? eachInItsOwnTransaction;
    this.log = options.log;
    this.onPublished = options.onPublished ?? (() => undefined);
    this.maxEventBytes = options.maxEventBytes ?? Number.POSITIVE_INFINITY;
    this.messagingSystem = options.messagingSystem ?? 'nats';
    this.now = options.now ?? Date.now;
  }

  /**
   * Records `events` inside `trx`; the producer span and trace headers are made now, in the
   * caller's span. An event larger than `maxEventBytes` fails the change (and its transaction)
   * with EVENT_TOO_LARGE: refused now rather than acknowledged and then never deliverable.
   */
  async append(trx: Kysely<DatabaseSchema>, events: readonly OutgoingEvent[]): Promise<Appended | undefined> {
    if (events.length === 0) return undefined;
    return this.appendMessages(trx, this.messages(events));
  }

  /**
   * The messages of `events`, checked against the size limit, with their producer span and trace
   * headers made now, in the caller's context (so make them in the context of the request they
   * belong to).
   */
  messages(events: readonly OutgoingEvent[]): EncodedMessage[] {
    return events.map((event) => ({
      topic: event.topic,
      key: event.key,
      headers: producerHeaders(
        { topic: event.topic, eventId: event.envelope.event_id, eventType: event.envelope.event_type },
        this.service,
        this.messagingSystem,
      ),
      envelope: event.envelope,
      encoded: this.encoded(event.envelope),
    }));
  }

  private async appendMessages(trx: Kysely<DatabaseSchema>, messages: readonly EncodedMessage[]): Promise<Appended> {
    if (this.log) return { messages, committed: await this.log.appendInTransaction(trx, messages) };
    const rows = messages.map((message) => ({
      topic: message.topic,
      message_key: message.key,
      event_id: message.envelope.event_id,
      headers: JSON.stringify(message.headers),
      envelope: message.encoded,
      created_at: this.now(),
    }));
    await trx.insertInto('event_outbox').values(rows).execute();
    return { messages, committed: () => this.notify() };
  }

  /**
   * Several changes in one transaction: `change` calls `record` with the messages of each change
   * that wrote something (made by `messages`, each in its own request's context); they are
   * appended together after it, in the same transaction, and handed over once it has committed.
   */
  async transactAll<T>(
    db: Kysely<DatabaseSchema>,
    change: (trx: Kysely<DatabaseSchema>, record: (messages: readonly EncodedMessage[]) => void) => Promise<T>,
  ): Promise<T> {
    let appended: Appended | undefined;
    const result = await this.transactions(db, async (trx) => {
      const recorded: EncodedMessage[] = [];
      const written = await change(trx, (messages) => recorded.push(...messages));
      if (recorded.length > 0) appended = await this.appendMessages(trx, recorded);
      return written;
    });
    if (appended) this.handedOver(appended);
    return result;
  }

  /**
   * Runs `change` in a transaction together with its events, then wakes the relay (or the
   * consumers of the log). Nothing is recorded when the change wrote nothing (`undefined`);
   * without `events` the change runs on its own.
   */
  async transact<T>(
    db: Kysely<DatabaseSchema>,
    events: EventsFor<NonNullable<T>> | undefined,
    change: (db: Kysely<DatabaseSchema>) => Promise<T>,
  ): Promise<T> {
    if (!events) return change(db);
    let appended: Appended | undefined;
    const result = await this.transactions(db, async (trx) => {
      const written = await change(trx);
      if (written !== undefined && written !== null) appended = await this.append(trx, events(written));
      return written;
    });
    if (appended) this.handedOver(appended);
    return result;
  }

  /** After the commit: wakes the relay or the log's consumers. */
  private handedOver(appended: Appended): void {
    appended.committed();
    // Straight into the log: handed over now (otherwise the relay says so when it is).
    if (this.log) for (const m of appended.messages) this.onPublished(m.topic, m.envelope);
  }

  /** The envelope as JSON, checked against the size limit. */
  private encoded(envelope: EventEnvelope): string {
    const json = JSON.stringify(envelope);
    // A UTF-16 code unit takes at most 3 bytes in UTF-8: most events need no count.
    if (json.length * 3 > this.maxEventBytes) {
      const bytes = Buffer.byteLength(json);
      if (bytes > this.maxEventBytes) throw errors.eventTooLarge(envelope.event_type, bytes, this.maxEventBytes);
    }
    return json;
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
