import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Kysely } from 'kysely';
import { type EventEnvelope, type MessageHeaders, partitionFor } from '../../domain/events.js';
import type {
  BusMessage,
  EventBus,
  PublishedPosition,
  OutgoingMessage,
  PublishOptions,
  SubscribeOptions,
  Subscription,
} from '../../ports/event-bus.js';
import { isUniqueViolation, type AnyKysely } from '../storage/database.js';
import { PreparedQuery } from '../storage/prepared-query.js';
import type { TransactionalLog } from './outbox.js';
import type { EventTables } from './event-tables.js';

export interface EmbeddedLogOptions {
  readonly partitions: number;
  /** How long a member holds a partition without renewing; a crashed member's work moves after this. */
  readonly leaseMs: number;
  /** How often to look for messages published by other processes (this process's wake us at once). */
  readonly pollMs: number;
  /** Delay before a message whose handler failed is delivered again. */
  readonly retryDelayMs: number;
  readonly batchSize: number;
  readonly clock?: () => number;
}

type Row = EventTables['event_log'];

/** The statements of every append, built once (appends are on the write path of every change). */
function logStatements(db: Kysely<EventTables>) {
  return {
    takeOffset: new PreparedQuery(db, (db, p) =>
      db
        .updateTable('event_partitions')
        .set((eb) => ({ next_offset: eb('next_offset', '+', 1) }))
        .where('topic', '=', p('topic'))
        .where('partition_no', '=', p('partition'))
        .returning('next_offset'),
    ),
    createPartition: new PreparedQuery(db, (db, p) =>
      db
        .insertInto('event_partitions')
        .values({ topic: p('topic'), partition_no: p('partition'), next_offset: 0 })
        .onConflict((oc) => oc.columns(['topic', 'partition_no']).doNothing()),
    ),
    insertEntry: new PreparedQuery(db, (db, p) =>
      db.insertInto('event_log').values({
        topic: p('topic'),
        partition_no: p('partition'),
        log_offset: p('offset'),
        message_id: p('messageId'),
        headers: p('headers'),
        envelope: p('envelope'),
        created_at: p('createdAt'),
      }),
    ),
  };
}
type LogStatements = ReturnType<typeof logStatements>;

/**
 * How long a consumer woken by a publish waits for more before it reads: under load, one read
 * and one position commit then cover a few hundred messages instead of a handful.
 */
const WAKE_LINGER_MS = 20;

/**
 * The embedded event bus: a partitioned log in the service's own database. Consumer groups share
 * the partitions through leases, so several processes on one PostgreSQL database also work;
 * a group's position is committed after each handled message (at least once).
 */
export class EmbeddedLogEventBus implements EventBus, TransactionalLog {
  readonly partitions: number;
  private readonly db: Kysely<EventTables>;
  private readonly statements: LogStatements;
  private readonly wake = new EventEmitter();
  private readonly subscriptions = new Set<Subscription>();
  private readonly now: () => number;

  constructor(
    db: AnyKysely,
    private readonly options: EmbeddedLogOptions,
  ) {
    this.db = db as Kysely<EventTables>;
    this.partitions = options.partitions;
    this.statements = logStatements(this.db);
    this.now = options.clock ?? Date.now;
    this.wake.setMaxListeners(0);
  }

  async publish(
    topic: string,
    key: string,
    headers: MessageHeaders,
    envelope: EventEnvelope,
    options: PublishOptions = {},
  ): Promise<PublishedPosition> {
    let position: PublishedPosition;
    try {
      position = await this.db.transaction().execute((trx) => this.append(trx, topic, key, headers, envelope, options));
    } catch (error) {
      // The same message published twice: the other insert won, which is the point.
      const messageId = options.messageId ?? envelope.event_id;
      const existing = isUniqueViolation(error) ? await this.positionOf(messageId, this.db) : undefined;
      if (!existing) throw error;
      position = existing;
    }
    this.wake.emit(topic);
    return position;
  }

  /** Appends one message to its partition inside `trx`; a repeated message id fails the unique insert. */
  private async append(
    trx: Kysely<EventTables>,
    topic: string,
    key: string,
    headers: MessageHeaders,
    envelope: EventEnvelope,
    options: PublishOptions,
  ): Promise<PublishedPosition> {
    const partition = options.partition ?? partitionFor(key, this.partitions);
    const offset = await this.appendEntry(
      trx,
      topic,
      partition,
      options.messageId ?? envelope.event_id,
      headers,
      envelope,
    );
    return { partition, offset };
  }

  private async appendEntry(
    trx: Kysely<EventTables>,
    topic: string,
    partition: number,
    messageId: string,
    headers: MessageHeaders,
    envelope: EventEnvelope,
  ): Promise<number> {
    const at = { topic, partition };
    let [row] = (await this.statements.takeOffset.run(trx, at)).rows;
    if (row === undefined) {
      // The partition's first message ever: its counter row, then the same again.
      await this.statements.createPartition.run(trx, at);
      [row] = (await this.statements.takeOffset.run(trx, at)).rows;
    }
    const offset = Number(row!.next_offset) - 1;
    await this.statements.insertEntry.run(trx, {
      topic,
      partition,
      offset,
      messageId,
      headers: JSON.stringify(headers),
      envelope: JSON.stringify(envelope),
      createdAt: this.now(),
    });
    return offset;
  }

  /**
   * The outbox's way in (TransactionalLog): appends inside the caller's transaction, so the
   * change and its events commit together. Partitions are taken in order, so two transactions
   * never wait for each other's partitions in opposite orders (PostgreSQL row locks).
   */
  async appendInTransaction(trx: AnyKysely, messages: readonly OutgoingMessage[]): Promise<void> {
    const placed = messages.map((message) => ({ message, partition: partitionFor(message.key, this.partitions) }));
    // Stable: messages of one partition keep their order.
    placed.sort((a, b) =>
      a.message.topic === b.message.topic ? a.partition - b.partition : a.message.topic < b.message.topic ? -1 : 1,
    );
    for (const { message, partition } of placed) {
      const { topic, headers, envelope } = message;
      await this.appendEntry(trx as Kysely<EventTables>, topic, partition, envelope.event_id, headers, envelope);
    }
  }

  committed(messages: readonly OutgoingMessage[]): void {
    for (const topic of new Set(messages.map((m) => m.topic))) this.wake.emit(topic);
  }

  async publishAll(messages: readonly OutgoingMessage[]): Promise<PublishedPosition[]> {
    if (messages.length === 0) return [];
    let positions: PublishedPosition[];
    try {
      // One transaction for the batch: one commit instead of one per message.
      positions = await this.db.transaction().execute(async (trx) => {
        const written: PublishedPosition[] = [];
        for (const m of messages) written.push(await this.append(trx, m.topic, m.key, m.headers, m.envelope, {}));
        return written;
      });
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      // A message of the batch was there already: take them one by one, each answering for itself.
      positions = [];
      for (const m of messages) positions.push(await this.publish(m.topic, m.key, m.headers, m.envelope));
      return positions;
    }
    for (const topic of new Set(messages.map((m) => m.topic))) this.wake.emit(topic);
    return positions;
  }

  async subscribe(options: SubscribeOptions): Promise<Subscription> {
    const consumer = new GroupConsumer(this.db, this.wake, this.options, this.now, options);
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
  }

  private async positionOf(messageId: string, db: Kysely<EventTables>): Promise<PublishedPosition | undefined> {
    const row = await db
      .selectFrom('event_log')
      .select(['partition_no', 'log_offset'])
      .where('message_id', '=', messageId)
      .executeTakeFirst();
    return row && { partition: row.partition_no, offset: Number(row.log_offset) };
  }
}

/** One member of a consumer group: holds a fair share of the partitions and works each in order. */
class GroupConsumer {
  private readonly member = randomUUID();
  private readonly owned = new Set<number>();
  private readonly workers = new Map<number, Promise<void>>();
  private readonly attempts = new Map<string, number>();
  private running = true;
  private timer: NodeJS.Timeout | undefined;
  private rebalancing: Promise<void> | undefined;

  constructor(
    private readonly db: Kysely<EventTables>,
    private readonly wake: EventEmitter,
    private readonly options: EmbeddedLogOptions,
    private readonly now: () => number,
    private readonly subscription: SubscribeOptions,
  ) {}

  private get key() {
    return { group_name: this.subscription.group, topic: this.subscription.topic };
  }

  async start(): Promise<void> {
    const partitions = Array.from({ length: this.options.partitions }, (_, p) => p);
    const ends = new Map<number, number>();
    if (this.subscription.startAt === 'latest') {
      const rows = await this.db
        .selectFrom('event_partitions')
        .select(['partition_no', 'next_offset'])
        .where('topic', '=', this.key.topic)
        .execute();
      for (const row of rows) ends.set(row.partition_no, Number(row.next_offset));
    }
    await this.db
      .insertInto('consumer_offsets')
      .values(partitions.map((p) => ({ ...this.key, partition_no: p, next_offset: ends.get(p) ?? 0 })))
      .onConflict((oc) => oc.columns(['group_name', 'topic', 'partition_no']).doNothing())
      .execute();
    await this.db
      .insertInto('consumer_leases')
      .values(partitions.map((p) => ({ ...this.key, partition_no: p, owner: '', expires_at: 0 })))
      .onConflict((oc) => oc.columns(['group_name', 'topic', 'partition_no']).doNothing())
      .execute();
    await this.rebalance();
    this.timer = setInterval(() => void this.rebalance(), Math.max(50, Math.floor(this.options.leaseMs / 3)));
    this.timer.unref();
  }

  async close(): Promise<void> {
    this.running = false;
    if (this.timer) clearInterval(this.timer);
    this.wake.emit(this.subscription.topic);
    await this.rebalancing;
    await Promise.all(this.workers.values());
    await this.db
      .updateTable('consumer_leases')
      .set({ owner: '', expires_at: 0 })
      .where('group_name', '=', this.key.group_name)
      .where('topic', '=', this.key.topic)
      .where('owner', '=', this.member)
      .execute();
    await this.db
      .deleteFrom('consumer_members')
      .where('group_name', '=', this.key.group_name)
      .where('topic', '=', this.key.topic)
      .where('member', '=', this.member)
      .execute();
  }

  /** Renews this member's leases and takes or gives back partitions towards a fair share. */
  private rebalance(): Promise<void> {
    this.rebalancing ??= this.doRebalance()
      .catch(() => undefined) // a failed round is retried at the next tick; the leases bound the damage
      .finally(() => (this.rebalancing = undefined));
    return this.rebalancing;
  }

  private async doRebalance(): Promise<void> {
    if (!this.running) return;
    const now = this.now();
    const until = now + this.options.leaseMs;
    const { group_name, topic } = this.key;
    await this.db
      .insertInto('consumer_members')
      .values({ group_name, topic, member: this.member, expires_at: until })
      .onConflict((oc) => oc.columns(['group_name', 'topic', 'member']).doUpdateSet({ expires_at: until }))
      .execute();
    const live = await this.db
      .selectFrom('consumer_members')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('group_name', '=', group_name)
      .where('topic', '=', topic)
      .where('expires_at', '>', now)
      .executeTakeFirstOrThrow();
    const share = Math.ceil(this.options.partitions / Math.max(1, Number(live.n)));

    await this.db
      .updateTable('consumer_leases')
      .set({ expires_at: until })
      .where('group_name', '=', group_name)
      .where('topic', '=', topic)
      .where('owner', '=', this.member)
      .where('expires_at', '>', now)
      .execute();
    const leases = await this.db
      .selectFrom('consumer_leases')
      .select(['partition_no', 'owner', 'expires_at'])
      .where('group_name', '=', group_name)
      .where('topic', '=', topic)
      .orderBy('partition_no')
      .execute();
    const mine = leases.filter((l) => l.owner === this.member && Number(l.expires_at) > now).map((l) => l.partition_no);

    for (const p of mine.slice(share)) {
      await this.db
        .updateTable('consumer_leases')
        .set({ owner: '', expires_at: 0 })
        .where('group_name', '=', group_name)
        .where('topic', '=', topic)
        .where('partition_no', '=', p)
        .where('owner', '=', this.member)
        .execute();
    }
    const kept = mine.slice(0, share);
    for (const lease of leases) {
      if (kept.length >= share) break;
      if (Number(lease.expires_at) > now) continue;
      const claimed = await this.db
        .updateTable('consumer_leases')
        .set({ owner: this.member, expires_at: until })
        .where('group_name', '=', group_name)
        .where('topic', '=', topic)
        .where('partition_no', '=', lease.partition_no)
        .where('expires_at', '<=', now)
        .executeTakeFirst();
      if (Number(claimed.numUpdatedRows) === 1) kept.push(lease.partition_no);
    }

    this.owned.clear();
    for (const p of kept) this.owned.add(p);
    for (const p of kept) {
      if (this.running && !this.workers.has(p)) {
        this.workers.set(
          p,
          this.work(p).finally(() => this.workers.delete(p)),
        );
      }
    }
  }

  /** Delivers partition `p` in order while this member holds it. */
  private async work(p: number): Promise<void> {
    const { group_name, topic } = this.key;
    let next: number | undefined;
    while (this.running && this.owned.has(p)) {
      try {
        next ??= Number(
          (
            await this.db
              .selectFrom('consumer_offsets')
              .select('next_offset')
              .where('group_name', '=', group_name)
              .where('topic', '=', topic)
              .where('partition_no', '=', p)
              .executeTakeFirstOrThrow()
          ).next_offset,
        );
        const rows = await this.db
          .selectFrom('event_log')
          .selectAll()
          .where('topic', '=', topic)
          .where('partition_no', '=', p)
          .where('log_offset', '>=', next)
          .orderBy('log_offset')
          .limit(this.options.batchSize)
          .execute();
        if (rows.length === 0) {
          await this.idle();
          continue;
        }
        // Handle the batch in order; commit the position once for what was handled.
        const from = next;
        let failed = false;
        for (const row of rows) {
          if (!this.running || !this.owned.has(p)) break;
          if (!(await this.deliver(row))) {
            failed = true;
            break;
          }
          next = Number(row.log_offset) + 1;
        }
        if (next > from) {
          await this.db
            .updateTable('consumer_offsets')
            .set({ next_offset: next })
            .where('group_name', '=', group_name)
            .where('topic', '=', topic)
            .where('partition_no', '=', p)
            .execute();
        }
        if (failed) {
          next = undefined; // read the committed position again, then retry the message that failed
          await sleep(this.options.retryDelayMs);
        }
      } catch {
        next = undefined;
        await sleep(this.options.retryDelayMs); // the database is away: try again shortly
      }
    }
  }

  private async deliver(row: Row): Promise<boolean> {
    const id = `${row.partition_no}:${row.log_offset}`;
    const deliveryCount = (this.attempts.get(id) ?? 0) + 1;
    this.attempts.set(id, deliveryCount);
    const message: BusMessage = {
      topic: row.topic,
      partition: row.partition_no,
      offset: Number(row.log_offset),
      headers: JSON.parse(row.headers) as MessageHeaders,
      envelope: JSON.parse(row.envelope) as EventEnvelope,
      deliveryCount,
    };
    try {
      await this.subscription.handler(message);
      this.attempts.delete(id);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Waits for a publish to this topic (or the poll interval). After a wake-up it lingers a
   * moment, so that under load one read takes a batch instead of one message.
   */
  private idle(): Promise<void> {
    return new Promise((resolve) => {
      const topic = this.subscription.topic;
      const done = () => {
        clearTimeout(timer);
        this.wake.off(topic, woken);
        resolve();
      };
      const woken = () => {
        this.wake.off(topic, woken);
        clearTimeout(timer);
        setTimeout(done, this.running ? WAKE_LINGER_MS : 0);
      };
      const timer = setTimeout(done, this.options.pollMs);
      this.wake.on(topic, woken);
    });
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
