import { EventEmitter } from 'node:events';
import type { Kysely } from 'kysely';
import { type EventEnvelope, type MessageHeaders, partitionFor } from '../../../domain/events.js';
import type {
  EventBus,
  OutgoingMessage,
  PublishedPosition,
  PublishOptions,
  PublishOutcome,
  SubscribeOptions,
  Subscription,
} from '../../../ports/event-bus.js';
import { isUniqueViolation } from '../../storage/database.js';
import type { DatabaseSchema } from '../../storage/schema.js';
import type { TransactionalLog } from '../outbox.js';
import { failure, isPermanent, MessageRefused } from '../publish-outcomes.js';
import { GroupConsumer } from './group-consumer.js';
import type { EmbeddedLogOptions, LogContext } from './log-context.js';
import { deepFreeze } from '../../../support/deep-freeze.js';
import { type LogEntry, type LogRow, positionOf } from './log-entry.js';
import { logStatements } from './log-statements.js';
import { PartitionEnds } from './partition-ends.js';
import { PartitionOffsets } from './partition-offsets.js';
import { RecentEntries } from './recent-entries.js';

export type { EmbeddedLogOptions } from './log-context.js';

/** What an append needs of a message; `encoded`: its envelope as JSON already (see EncodedMessage). */
type Appendable = Pick<OutgoingMessage, 'headers' | 'envelope'> & { readonly encoded?: string };

/** `messaging.system` of the embedded log. */
export const EMBEDDED_LOG_SYSTEM = 'urlshortener.embedded_log';

/**
 * The embedded event bus: a partitioned log in the service's own database. Consumer groups share
 * the partitions through leases, so several processes on one PostgreSQL database also work;
 * a group's position is committed after each handled message (at least once).
 */
export class EmbeddedLogEventBus implements EventBus, TransactionalLog {
  readonly partitions: number;
  /** Not a system the semantic conventions list: this service's own log, in its database. */
  readonly system = EMBEDDED_LOG_SYSTEM;
  private readonly db: Kysely<DatabaseSchema>;
  private readonly log: LogContext;
  private readonly offsets: PartitionOffsets;
  private readonly subscriptions = new Set<Subscription>();

  constructor(db: Kysely<DatabaseSchema>, options: EmbeddedLogOptions) {
    this.db = db;
    this.partitions = options.partitions;
    const statements = logStatements(this.db);
    const wake = new EventEmitter();
    wake.setMaxListeners(0);
    this.log = {
      db: this.db,
      statements,
      recent: new RecentEntries(),
      wake,
      ends: new PartitionEnds(this.db, options.pollMs),
      options,
      now: options.clock ?? Date.now,
    };
    this.offsets = new PartitionOffsets(statements, options.dialect);
  }

  async publish(
    topic: string,
    key: string,
    headers: MessageHeaders,
    envelope: EventEnvelope,
    options: PublishOptions = {},
  ): Promise<PublishedPosition> {
    let entry: LogRow;
    try {
      entry = await this.db.transaction().execute((trx) => this.append(trx, topic, key, headers, envelope, options));
    } catch (error) {
      // The same message published twice: the other insert won, which is the point.
      const messageId = options.messageId ?? envelope.event_id;
      const existing = isUniqueViolation(error) ? await this.positionOf(messageId) : undefined;
      if (!existing) throw error;
      this.log.wake.emit(topic);
      return existing;
    }
    this.committed([entry]);
    return positionOf(entry);
  }

  async publishAll(messages: readonly OutgoingMessage[]): Promise<PublishOutcome[]> {
    if (messages.length === 0) return [];
    let entries: LogRow[];
    try {
      // One transaction for the batch: one commit instead of one per message.
      entries = await this.db.transaction().execute(async (trx) => {
        const written: LogRow[] = [];
        for (const m of messages) written.push(await this.append(trx, m.topic, m.key, m.headers, m.envelope, {}));
        return written;
      });
    } catch (error) {
      if (!isUniqueViolation(error) && !isPermanent(error)) return messages.map(() => failure(error));
      // A message of the batch was there already, or cannot be taken: one by one, each answering for itself.
      const outcomes: PublishOutcome[] = [];
      for (const m of messages) {
        outcomes.push(
          await this.publish(m.topic, m.key, m.headers, m.envelope).then((position) => ({ position }), failure),
        );
      }
      return outcomes;
    }
    this.committed(entries);
    return entries.map((entry) => ({ position: positionOf(entry) }));
  }

  /**
   * The outbox's way in (TransactionalLog): appends inside the caller's transaction, so the
   * change and its events commit together. Partitions are taken in order, so two transactions
   * never wait for each other's partitions in opposite orders (PostgreSQL row locks).
   */
  async appendInTransaction(
    trx: Kysely<DatabaseSchema>,
    messages: readonly (OutgoingMessage & Appendable)[],
  ): Promise<() => void> {
    const placed = messages.map((message) => ({ message, partition: partitionFor(message.key, this.partitions) }));
    // Stable: messages of one partition keep their order.
    placed.sort((a, b) =>
      a.message.topic === b.message.topic ? a.partition - b.partition : a.message.topic < b.message.topic ? -1 : 1,
    );
    if (placed.length === 1) {
      const [{ message, partition }] = placed as [(typeof placed)[0]];
      const entry = await this.appendEntry(trx, message.topic, partition, message.envelope.event_id, message);
      return () => this.committed([entry]);
    }
    // A batch: the offsets of its partitions taken at once, every entry in one insert.
    const groups: { start: number; end: number; topic: string; partition: number }[] = [];
    for (let start = 0; start < placed.length;) {
      const { message, partition } = placed[start]!;
      let end = start + 1;
      while (
        end < placed.length &&
        placed[end]!.partition === partition &&
        placed[end]!.message.topic === message.topic
      )
        end++;
      groups.push({ start, end, topic: message.topic, partition });
      start = end;
    }
    const firsts = await this.offsets.takeAll(
      trx,
      groups.map(({ topic, partition, start, end }) => ({ topic, partition, count: end - start })),
    );
    const entries: LogEntry[] = [];
    groups.forEach(({ start, end, partition }, g) => {
      for (let i = start; i < end; i++) {
        const m = placed[i]!.message;
        entries.push(this.entry(m.topic, partition, firsts[g]! + i - start, m.envelope.event_id, m));
      }
    });
    await this.log.statements.insertEntries.run(trx, entries);
    return () => this.committed(entries);
  }

  async subscribe(options: SubscribeOptions): Promise<Subscription> {
    await this.log.ends.start();
    const consumer = new GroupConsumer(this.log, options);
    await consumer.start();
    const subscription: Subscription = {
      close: async () => {
        this.subscriptions.delete(subscription);
        await consumer.close();
      },
    };
    this.subscriptions.add(subscription);
    return subscription;
  }

  async seek(group: string, topic: string, partition: number, offset: number): Promise<void> {
    await this.db
      .insertInto('consumer_offsets')
      .values({ group_name: group, topic, partition_no: partition, next_offset: offset })
      .onConflict((oc) => oc.columns(['group_name', 'topic', 'partition_no']).doUpdateSet({ next_offset: offset }))
      .execute();
  }

  async ping(): Promise<void> {
    await this.db.selectFrom('event_partitions').select('topic').limit(1).execute();
  }

  async close(): Promise<void> {
    await Promise.all([...this.subscriptions].map((s) => s.close()));
    await this.log.ends.stop();
  }

  /** Appends one message to its partition inside `trx`; a repeated message id fails the unique insert. */
  private async append(
    trx: Kysely<DatabaseSchema>,
    topic: string,
    key: string,
    headers: MessageHeaders,
    envelope: EventEnvelope,
    options: PublishOptions,
  ): Promise<LogRow> {
    const partition = options.partition ?? partitionFor(key, this.partitions);
    return this.appendEntry(trx, topic, partition, options.messageId ?? envelope.event_id, { headers, envelope });
  }

  private async appendEntry(
    trx: Kysely<DatabaseSchema>,
    topic: string,
    partition: number,
    messageId: string,
    message: Appendable,
  ): Promise<LogEntry> {
    const offset = await this.offsets.take(trx, topic, partition);
    const entry = this.entry(topic, partition, offset, messageId, message);
    await this.log.statements.insertEntries.run(trx, [entry]);
    return entry;
  }

  /** The log entry of `message` at `offset`, its headers and envelope encoded (the envelope's encoding reused when given). */
  private entry(topic: string, partition: number, offset: number, messageId: string, message: Appendable): LogEntry {
    const { headers, envelope } = message;
    let encoded: { headers: string; envelope: string };
    try {
      encoded = { headers: JSON.stringify(headers), envelope: message.encoded ?? JSON.stringify(envelope) };
    } catch (error) {
      throw new MessageRefused(`the message cannot be encoded as JSON: ${(error as Error).message}`, error);
    }
    const row: LogRow = {
      topic,
      partition_no: partition,
      log_offset: offset,
      message_id: messageId,
      ...encoded,
      created_at: this.log.now(),
    };
    // Delivered as they are to every group of this process: frozen, so no handler changes another's.
    return { ...row, decoded: { headers: deepFreeze(headers), envelope: deepFreeze(envelope) } };
  }

  /** After the transaction that wrote `entries` committed: keep them for this process's consumers, and wake those. */
  private committed(entries: readonly LogRow[]): void {
    for (const entry of entries) this.log.recent.add(entry);
    for (const topic of new Set(entries.map((e) => e.topic))) this.log.wake.emit(topic);
  }

  private async positionOf(messageId: string): Promise<PublishedPosition | undefined> {
    const row = await this.db
      .selectFrom('event_log')
      .select(['partition_no', 'log_offset'])
      .where('message_id', '=', messageId)
      .executeTakeFirst();
    return row && { partition: row.partition_no, offset: Number(row.log_offset) };
  }
}
